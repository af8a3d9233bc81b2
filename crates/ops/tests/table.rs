//! The table of operations is consistent: names are unique where they are
//! looked up, every builtin name finds its row, `nograd` rows are exactly
//! the random draws, and the user documentation names every builtin.

use std::collections::{BTreeSet, HashSet};

use autobatch_ops::{
    BinaryOp, BinaryOperator, Builtin, CompareOp, CompareOperator, ReduceOp, Signature, Spelling,
    UnaryOp, UnaryOperator,
};

/// One row of the table, as data.
struct Row {
    name: &'static str,
    group: &'static str,
    ir_name: &'static str,
    signature: Signature,
    differentiable: bool,
    spelling: Spelling,
}

macro_rules! rows {
    ($($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?,
        $grad:ident, $spelling:ident $(($user:literal))?])*) => {
        vec![$(Row {
            name: stringify!($n),
            group: stringify!($g),
            ir_name: $ir,
            signature: Signature::$s $({$($sa)*})?,
            differentiable: autobatch_ops::__grad!($grad),
            spelling: Spelling::$spelling $(($user))?,
        }),*]
    };
}

fn rows() -> Vec<Row> {
    autobatch_ops::for_each_op!(rows)
}

#[test]
fn row_names_and_ir_names_are_unique() {
    let rows = rows();
    let mut names = HashSet::new();
    let mut ir_names = HashSet::new();
    for row in &rows {
        assert!(names.insert(row.name), "two rows named {}", row.name);
        assert!(
            ir_names.insert(row.ir_name),
            "two rows with IR name {}",
            row.ir_name
        );
    }
}

#[test]
fn the_op_enums_hold_their_groups_rows_in_order() {
    let rows = rows();
    let group = |g: &str| -> Vec<&'static str> {
        rows.iter()
            .filter(|r| r.group == g)
            .map(|r| r.ir_name)
            .collect()
    };
    assert_eq!(
        group("Unary"),
        UnaryOp::ALL.iter().map(|o| o.name()).collect::<Vec<_>>()
    );
    assert_eq!(
        group("Binary"),
        BinaryOp::ALL.iter().map(|o| o.name()).collect::<Vec<_>>()
    );
    assert_eq!(
        group("Compare"),
        CompareOp::ALL.iter().map(|o| o.name()).collect::<Vec<_>>()
    );
    assert_eq!(
        group("Reduce"),
        ReduceOp::ALL.iter().map(|o| o.name()).collect::<Vec<_>>()
    );
}

#[test]
fn every_method_and_function_name_resolves_to_its_row() {
    let rows = rows();
    let builtin_rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.spelling.method().is_some() || r.spelling.function().is_some())
        .collect();
    assert_eq!(builtin_rows.len(), Builtin::ALL.len());
    for (row, b) in builtin_rows.iter().zip(Builtin::ALL) {
        assert_eq!(format!("{b:?}"), row.name);
        assert_eq!(b.spelling(), row.spelling);
        assert_eq!(b.signature(), row.signature);
        assert_eq!(b.ir_name(), row.ir_name);
        assert_eq!(b.differentiable(), row.differentiable);
        assert_eq!(
            Some(b.name()),
            row.spelling.method().or(row.spelling.function())
        );
        if let Some(m) = b.spelling().method() {
            assert_eq!(Builtin::method(m), Some(*b), "method `{m}`");
        }
        if let Some(f) = b.spelling().function() {
            assert_eq!(Builtin::function(f), Some(*b), "function `{f}`");
        }
    }
    assert_eq!(Builtin::method("len"), None);
    assert_eq!(Builtin::function("exp"), None);
    assert_eq!(Builtin::method("sigmoid"), None);
}

#[test]
fn operators_have_distinct_symbols_and_their_rows_ops() {
    // (arity, symbol) -> IR name of the operation.
    let mut operators = std::collections::BTreeMap::new();
    for op in UnaryOperator::ALL {
        assert!(operators.insert((1, op.symbol()), op.op().name()).is_none());
    }
    for op in BinaryOperator::ALL {
        assert!(operators.insert((2, op.symbol()), op.op().name()).is_none());
    }
    for op in CompareOperator::ALL {
        assert!(operators.insert((2, op.symbol()), op.op().name()).is_none());
    }
    let mut rows_seen = 0;
    for row in rows() {
        if let Spelling::Operator(symbol) = row.spelling {
            let arity = row.signature.arity().expect("an operator's arity");
            assert_eq!(
                operators.get(&(arity, symbol)),
                Some(&row.ir_name),
                "{}",
                row.name
            );
            rows_seen += 1;
        }
    }
    assert_eq!(rows_seen, operators.len());
}

#[test]
fn nograd_rows_are_exactly_the_random_draws_host_calls_and_derived_code_bookkeeping() {
    // The front end's message for a `nograd` builtin speaks of a random
    // draw, or of a function without a derivative rule (those listed);
    // a host call is not a builtin (it has its own message); a static
    // adjoint, the tape, `tri_solve_t`, `cholesky_adjoint` and the shape
    // derivatives of the incomplete gamma and beta functions exist only in
    // derived code, never differentiated; the inverses serve random draws
    // only.
    let without_rule = [
        "trigamma",
        "bessel_i1_over_i0",
        "tri_solve_t",
        "cholesky_adjoint",
        "log_gamma_p_da",
        "log_gamma_q_da",
        "log_gamma_p_inv",
        "poisson_inv",
        "von_mises_draw",
        "log_beta_inc_da",
        "log_beta_inc_db",
        "log_beta_inc_c_da",
        "log_beta_inc_c_db",
        "binomial_inv",
    ];
    for row in rows() {
        assert_eq!(
            row.differentiable,
            !row.signature.is_random()
                && row.signature != Signature::Host
                && row.signature != Signature::StaticAdjoint
                && row.signature != Signature::TapePush
                && row.name != "TapePop"
                && row.name != "TapeOver"
                && row.name != "TapeMark"
                && row.name != "TapeSettle"
                && !without_rule.contains(&row.ir_name),
            "row {}",
            row.name
        );
    }
}

#[test]
fn every_builtin_takes_a_fixed_number_of_operands() {
    for b in Builtin::ALL {
        assert_eq!(b.signature().arity(), Some(b.arity()), "{b:?}");
        if b.spelling().method().is_some() {
            assert!(b.arity() >= 1, "a method has a receiver: {b:?}");
        }
    }
}

/// The words inside backticks in `text`.
fn code_words(text: &str) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 {
            words.extend(span.split_whitespace().map(str::to_string));
            words.extend(
                span.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string),
            );
        }
    }
    words
}

#[test]
fn the_language_reference_names_every_builtin_and_operator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/language.md");
    let text = std::fs::read_to_string(path).expect("docs/language.md");
    let words = code_words(&text);
    let mut missing = Vec::new();
    for b in Builtin::ALL {
        if !words.contains(b.name()) {
            missing.push(b.name());
        }
    }
    let symbols = UnaryOperator::ALL
        .iter()
        .map(|o| o.symbol())
        .chain(BinaryOperator::ALL.iter().map(|o| o.symbol()))
        .chain(CompareOperator::ALL.iter().map(|o| o.symbol()));
    for s in symbols {
        if !words.contains(s) {
            missing.push(s);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/language.md does not mention (in backticks): {missing:?}"
    );
}
