//! The IR's view of the table of operations: every row's IR name reads back
//! (through `Prim::from_plain_name` and the text parser) as the row's
//! primitive, with the row's signature class.

use autobatch_ir::parse::parse_program;
use autobatch_ir::{Op, Prim, Signature};

/// A row as the IR sees it: its name, its primitive (`None` for a row of
/// group `Payload`) and its signature class.
struct Row {
    ir_name: &'static str,
    prim: Option<Prim>,
    signature: Signature,
}

macro_rules! row_prim {
    (Payload $o:ident) => {
        None
    };
    ($g:ident $o:ident) => {
        Some(autobatch_ir::prim_of_row!($g $o))
    };
}

macro_rules! rows {
    ($($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?,
        $grad:ident, $spelling:ident $(($user:literal))?])*) => {
        vec![$(Row {
            ir_name: $ir,
            prim: row_prim!($g $o),
            signature: Signature::$s $({$($sa)*})?,
        }),*]
    };
}

fn rows() -> Vec<Row> {
    autobatch_ops::for_each_op!(rows)
}

#[test]
fn every_plain_row_round_trips_through_its_name() {
    for row in rows() {
        assert_eq!(
            Prim::from_plain_name(row.ir_name),
            row.prim,
            "{}",
            row.ir_name
        );
        if let Some(prim) = &row.prim {
            assert_eq!(prim.name(), row.ir_name);
            assert_eq!(prim.signature(), row.signature, "{}", row.ir_name);
        }
    }
}

/// A function whose one operation is `line` (on `f64` operands; the parser
/// does not check types).
fn one_op_program(line: &str) -> String {
    format!(
        "fn f0 t(v0 a: f64, v1 b: f64, v2 c: f64) -> (f64)  @1:1\n  vars: v0 a: f64, v1 b: f64, v2 c: f64, v3: f64\nb0:  @1:1\n  {line}  @1:1\n  return v3\n"
    )
}

#[test]
fn the_parser_reads_every_plain_row() {
    for row in rows() {
        let Some(prim) = row.prim else { continue };
        let arity = row.signature.arity().unwrap_or(1);
        let operands: Vec<String> = (0..arity).map(|i| format!("v{i}")).collect();
        let line = if arity == 0 {
            format!("v3 = {}", row.ir_name)
        } else {
            format!("v3 = {} {}", row.ir_name, operands.join(", "))
        };
        let text = one_op_program(&line);
        let program = parse_program(&text).unwrap_or_else(|e| panic!("{line}: {e}"));
        let (_, f) = program.functions.iter().next().expect("one function");
        let (_, block) = f.blocks.iter().next().expect("one block");
        match &block.ops[..] {
            [Op::Prim { prim: read, .. }] => assert_eq!(*read, prim, "{line}"),
            other => panic!("{line}: read {other:?}"),
        }
    }
}
