//! The one text form of the IR, used by `autobatch ir` and by every golden test.
//!
//! ```text
//! static s0 X: [[f64; D]; N]  @3:5
//!
//! fn f0 fib(v0 n: i64) -> (i64)  @1:1
//!   vars: v0 n: i64, v1: i64, v2: bool
//! b0:  @1:1
//!   v1 = const 1_i64  @1:28
//!   v2 = le v0, v1  @1:26
//!   branch v2, b1, b2
//! ```
//!
//! Every operation ends with the source location it came from.
//!
//! A function whose source signature has tuples (or whose parameters are
//! not named as their variables) also gets a `sig:` line after `vars:`,
//! since the header shows only the flattened parameters and results:
//!
//! ```text
//! fn f1 swap_sum(v0 p.0: f64, v1 p.1.0: f64, v2 p.1.1: f64) -> (f64, f64)  @5:1
//!   vars: v0 p.0: f64, v1 p.1.0: f64, v2 p.1.1: f64, v3: f64
//!   sig: (p: (f64, (f64, f64))) -> (f64, f64)
//! ```
//!
//! A function whose blocks count no steps ([`Function::uncounted`]) has
//! `uncounted` after its results, a block that counts none
//! ([`crate::BlockData::uncounted`]) `uncounted` after its label (`b4:
//! uncounted  @3:5`), and a check arm ([`crate::BlockData::check_arm`])
//! `check_arm` after that; a fork that keeps its instances' tapes
//! or gives them back starts with `save` or `restore` (`v3 = save join
//! ...`); the tape's operations are `tape_push v1, v2` and `v3 = tape_pop
//! [f64; 4]`.
//!
//! [`crate::parse`] reads this form back: `parse(print(p)) == p`.

use std::fmt::{self, Write};

use crate::{Function, Op, Program, Terminator};
use autobatch_types::{Dim, TensorType, Type};

/// The text of a whole program.
pub fn program_to_string(program: &Program) -> String {
    let mut out = String::new();
    write_program(&mut out, program).expect("writing to a String cannot fail");
    out
}

pub fn write_program(out: &mut impl Write, program: &Program) -> fmt::Result {
    write_header(out, program)?;
    for (i, (id, f)) in program.functions.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        write_function(out, program, id, f)?;
    }
    Ok(())
}

/// The symbols and statics, then a blank line if there were any.
pub fn write_header(out: &mut impl Write, program: &Program) -> fmt::Result {
    if !program.symbols.is_empty() {
        write!(out, "symbols:")?;
        for (i, s) in program.symbols.iter().enumerate() {
            write!(out, " sym{i}={s}")?;
        }
        writeln!(out)?;
    }
    for (id, s) in program.statics.iter() {
        writeln!(
            out,
            "static {id} {}: {}  @{}",
            s.name,
            program.type_name(&s.ty),
            s.loc
        )?;
    }
    if !program.symbols.is_empty() || !program.statics.is_empty() {
        writeln!(out)?;
    }
    Ok(())
}

pub fn write_function(
    out: &mut impl Write,
    program: &Program,
    id: crate::FuncId,
    f: &Function,
) -> fmt::Result {
    let ty = |t: &TensorType| program.type_name(t);
    let var = |v: crate::Var| match &f.vars.get(v).and_then(|d| d.name.clone()) {
        Some(n) => format!("{v} {n}"),
        None => format!("{v}"),
    };
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", var(*p), ty(&f.vars[*p].ty)))
        .collect();
    let results: Vec<String> = f.results.iter().map(ty).collect();
    let uncounted = if f.uncounted { " uncounted" } else { "" };
    writeln!(
        out,
        "fn {id} {}({}) -> ({}){uncounted}  @{}",
        f.name,
        params.join(", "),
        results.join(", "),
        f.loc
    )?;
    let vars: Vec<String> = f
        .vars
        .iter()
        .map(|(v, d)| format!("{}: {}", var(v), ty(&d.ty)))
        .collect();
    writeln!(out, "  vars: {}", vars.join(", "))?;
    if f.signature != f.flat_signature() || f.ret_type != f.flat_ret_type() {
        write_signature(out, program, f)?;
    }
    for (b, block) in f.blocks.iter() {
        let uncounted = if block.uncounted { " uncounted" } else { "" };
        let check_arm = if block.check_arm { " check_arm" } else { "" };
        writeln!(out, "{b}:{uncounted}{check_arm}  @{}", block.loc)?;
        for op in &block.ops {
            write!(out, "  ")?;
            write_op(out, program, op)?;
            writeln!(out)?;
        }
        write!(out, "  ")?;
        write_terminator(out, &block.term)?;
        writeln!(out)?;
    }
    Ok(())
}

/// The `sig:` line: the parameters and result type as written in the source.
fn write_signature(out: &mut impl Write, program: &Program, f: &Function) -> fmt::Result {
    let params: Vec<String> = f
        .signature
        .iter()
        .map(|p| format!("{}: {}", p.name, structured_type_name(program, &p.ty)))
        .collect();
    writeln!(
        out,
        "  sig: ({}) -> {}",
        params.join(", "),
        structured_type_name(program, &f.ret_type)
    )
}

/// A structured type in source syntax: a tensor type, or a tuple
/// (`()`, `(T,)`, `(T, U)`).
fn structured_type_name(program: &Program, ty: &Type) -> String {
    match ty {
        Type::Tensor(t) => program.type_name(t),
        Type::Tuple(items) => {
            let names: Vec<String> = items
                .iter()
                .map(|t| structured_type_name(program, t))
                .collect();
            match &names[..] {
                [one] => format!("({one},)"),
                _ => format!("({})", names.join(", ")),
            }
        }
    }
}

fn list(vars: &[crate::Var]) -> String {
    vars.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn write_op(out: &mut impl Write, program: &Program, op: &Op) -> fmt::Result {
    match op {
        Op::Prim {
            dst,
            prim,
            args,
            loc,
        } => {
            if let Some(d) = dst {
                write!(out, "{d} = ")?;
            }
            write!(out, "{prim}")?;
            let named = match prim {
                crate::Prim::LoadStatic(s) => Some(*s),
                crate::Prim::StaticAdjoint(a) => Some(a.id),
                _ => None,
            };
            if let Some(s) = named {
                if let Some(decl) = program.statics.get(s) {
                    write!(out, " ({})", decl.name)?;
                }
            }
            if !args.is_empty() {
                write!(out, " {}", list(args))?;
            }
            write!(out, "  @{loc}")
        }
        Op::Call {
            dsts,
            callee,
            args,
            loc,
            catch,
        } => {
            if !dsts.is_empty() {
                write!(out, "{} = ", list(dsts))?;
            }
            let name = program
                .functions
                .get(*callee)
                .map(|f| f.name.as_str())
                .unwrap_or("?");
            let call = if *catch { "catch call" } else { "call" };
            write!(out, "{call} {callee} {name}({})  @{loc}", list(args))
        }
        Op::Fork {
            dsts,
            args,
            instances,
            loc,
            tape,
        } => {
            if !dsts.is_empty() {
                write!(out, "{} = ", list(dsts))?;
            }
            match tape {
                crate::TapeMode::None => {}
                crate::TapeMode::Save => write!(out, "save ")?,
                crate::TapeMode::Restore => write!(out, "restore ")?,
                crate::TapeMode::Again => write!(out, "again ")?,
                crate::TapeMode::SaveAgain => write!(out, "save again ")?,
            }
            write_fork(out, program, args, instances)?;
            write!(out, "  @{loc}")
        }
    }
}

/// `join f1 a(v0), f2 b(v1, v2)` or `map.4 f1 g(index, each v0, v2)`.
fn write_fork(
    out: &mut impl Write,
    program: &Program,
    args: &[crate::Var],
    instances: &crate::Instances,
) -> fmt::Result {
    let name = |f: crate::FuncId| {
        program
            .functions
            .get(f)
            .map(|f| f.name.as_str())
            .unwrap_or("?")
    };
    match instances {
        crate::Instances::Join(calls) => {
            write!(out, "join")?;
            let mut next = 0;
            for (i, call) in calls.iter().enumerate() {
                let taken = args.get(next..next + call.args).unwrap_or(&[]);
                next += call.args;
                let sep = if i == 0 { " " } else { ", " };
                write!(
                    out,
                    "{sep}{} {}({}) @{}",
                    call.callee,
                    name(call.callee),
                    list(taken),
                    call.loc
                )?;
            }
            Ok(())
        }
        crate::Instances::Map {
            callee,
            count,
            index,
            each,
        } => {
            match count {
                Dim::Fixed(n) => write!(out, "map.{n}")?,
                Dim::Symbolic(s) => write!(out, "map.sym{}", s.0)?,
            }
            let mut parts: Vec<String> = Vec::new();
            if *index {
                parts.push("index".into());
            }
            for (i, a) in args.iter().enumerate() {
                parts.push(if i < *each {
                    format!("each {a}")
                } else {
                    a.to_string()
                });
            }
            write!(out, " {callee} {}({})", name(*callee), parts.join(", "))
        }
    }
}

pub fn write_terminator(out: &mut impl Write, term: &Terminator) -> fmt::Result {
    match term {
        Terminator::Jump(b) => write!(out, "jump {b}"),
        Terminator::Branch {
            cond,
            then_block,
            else_block,
        } => {
            write!(out, "branch {cond}, {then_block}, {else_block}")
        }
        Terminator::Return(vars) => write!(out, "return {}", list(vars)).map(|_| ()),
    }
}
