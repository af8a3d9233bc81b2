//! The front end and the IR type every operation alike: for each builtin
//! and operator of the table of operations and sample operand types, a
//! one-line program the front end accepts must lower, and the type the
//! front end gives the call must be the type `Prim::result_type` gives the
//! primitive it lowers to.

use autobatch_frontend::hir::{self, BinaryOp, Builtin, CompareOp, DimExpr, UnaryOp};
use autobatch_ir::{Dim, Op, TensorType};

/// Operand types: scalars of every class, vectors, matrices of two shapes.
const TYPES: &[&str] = &[
    "bool",
    "i32",
    "i64",
    "usize",
    "f32",
    "f64",
    "[f64; 3]",
    "[f32; 3]",
    "[i64; 3]",
    "[bool; 3]",
    "[[f64; 3]; 2]",
    "[[f64; 2]; 3]",
    "[[f64; 3]; 3]",
    "[[i64; 3]; 2]",
];

/// Every tuple of `n` operand types.
fn operand_types(n: usize) -> Vec<Vec<&'static str>> {
    let mut all = vec![Vec::new()];
    for _ in 0..n {
        all = all
            .into_iter()
            .flat_map(|prefix| {
                TYPES.iter().map(move |t| {
                    let mut v = prefix.clone();
                    v.push(*t);
                    v
                })
            })
            .collect();
    }
    all
}

fn ir_type(ty: &hir::Ty) -> Option<TensorType> {
    let hir::Ty::Tensor(t) = ty else { return None };
    let dims = t
        .dims
        .iter()
        .map(|d| match d {
            DimExpr::Fixed(n) => Some(Dim::Fixed(*n)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(TensorType { elem: t.elem, dims })
}

/// Checks `expr` (over parameters `p0: types[0]`, ...) and, if the front
/// end accepts it, that it lowers to an `ir_name` primitive of the same
/// type. Returns whether the front end accepted it.
fn agree(expr: &str, types: &[&str], ir_name: &str) -> bool {
    let params: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("p{i}: {t}"))
        .collect();
    let source = format!("fn f({}) {{ let r = {expr}; }}", params.join(", "));
    let Ok(module) = autobatch_frontend::check(&source) else {
        return false;
    };
    let local = module.functions[0]
        .locals
        .iter()
        .find(|l| l.name == "r")
        .expect("the local `r`");
    let front = ir_type(&local.ty).unwrap_or_else(|| panic!("{source}: {:?}", local.ty));
    let program = autobatch_lower::compile(&source)
        .unwrap_or_else(|e| panic!("{source}: accepted but not lowered: {}", e[0].message));
    let (_, f) = program.functions.iter().next().expect("one function");
    let types: Vec<&TensorType> = f
        .blocks
        .iter()
        .flat_map(|(_, b)| &b.ops)
        .filter_map(|op| match op {
            Op::Prim {
                prim, dst: Some(d), ..
            } if prim.name() == ir_name => Some(&f.vars[*d].ty),
            _ => None,
        })
        .collect();
    assert_eq!(types, [&front], "{source}: front end and IR types differ");
    true
}

#[test]
fn builtins_have_one_type_in_the_front_end_and_the_ir() {
    for b in Builtin::ALL {
        let mut accepted = 0;
        for types in operand_types(b.arity()) {
            let operands: Vec<String> = (0..types.len()).map(|i| format!("p{i}")).collect();
            let expr = match b.spelling().method() {
                Some(m) => format!("p0.{m}({})", operands[1..].join(", ")),
                None => format!(
                    "{}({})",
                    b.spelling().function().unwrap_or(b.name()),
                    operands.join(", ")
                ),
            };
            accepted += usize::from(agree(&expr, &types, b.ir_name()));
        }
        assert!(accepted > 0, "no sample operands fit {b:?}");
    }
}

#[test]
fn operators_have_one_type_in_the_front_end_and_the_ir() {
    for op in UnaryOp::ALL {
        for types in operand_types(1) {
            agree(&format!("{}p0", op.symbol()), &types, op.op().name());
        }
    }
    for types in operand_types(2) {
        for op in BinaryOp::ALL {
            agree(&format!("p0 {} p1", op.symbol()), &types, op.op().name());
        }
        for op in CompareOp::ALL {
            agree(&format!("p0 {} p1", op.symbol()), &types, op.op().name());
        }
    }
}
