//! The differentiable helpers a program may take Jacobians of.
//!
//! Some programs get, besides the functions with a depth parameter, a few
//! helpers that `jacobian` differentiates: `dv<i>(x: [f64; 3]) -> [f64; 3]`
//! made of elementwise arithmetic, `tanh`/`sin`/`cos`, calls of earlier
//! helpers, and instances: `map` of a scalar helper `ds(a, c)` with an extra
//! argument (its adjoint is summed over the instances), `pfor::<3>` of an
//! indexed helper `dk(k, x)`, and `join` of two earlier vector helpers. They
//! have no loops, branches, random draws or recursion, so the front end
//! accepts them for `jacobian`, and they terminate. Some vector helpers
//! take a data argument `d: [f64; 3]` after the point (not differentiated).
//! An expression of type `[f64; 3]` elsewhere may then be a row
//! `jacobian(dv<i>, point)[m]` (`jacobian(dv<i>, point, data)[m]` for a
//! helper with data), and one of type `f64` the derivative of the scalar
//! helper in its first argument, the second being data: `grad(ds, a, c)`.
//! A vector expression may be an ODE solve (`ode_rk45` or `ode_bdf_tol`)
//! of a small linear system from it, the state at time 1, its
//! coefficients passed as the users' further arguments may be: a flat
//! array (`dode`), a matrix `[[f64; 3]; 2]` (`dode_m`) or a tuple `(f64,
//! [f64; 3])` (`dode_t`), then perhaps an integer, a `bool` or an `f32`
//! passed through to the right-hand side (`dode_i`, `dode_mb`, `dode_tf`,
//! ...).
//! One more vector helper, `dl(x)`, runs a counted loop (`for k in 0..T`)
//! that updates an array and a scalar (and may swap two scalars); with `T` of 16 or less the
//! derivation unrolls it, above that it differentiates it over a tape.
//! Another, `dt(x)`, calls `dtr(x, T, x)`, which calls itself in tail
//! position (a jump, in the function and in its derivatives) with an
//! accumulator that reads `x` (and `W`) at the computed index `n % 3`.
//!
//! In a program with the float static `W: [f64; 3]`, the helpers also read
//! it (whole, `W[i]`, and inside instances and the counted loop), and a
//! loss `sloss(x: [f64; 3]) -> f64`, the sum of a vector helper at `x`
//! times `W` plus products with the static matrix `M: [[f64; 3]; 3]` and
//! a row of it, is the entry of a gradient with respect to `W` and `M`
//! summed over members (`--grad-statics W,M`,
//! [`crate::case::GradientCase`]).
//!
//! Some helpers (the loss too) hold an operation that faults for some
//! points (an integer `/` or `%` by a value cast from the point, an index
//! out of `[1, 2, 3, 4]`, an `assert!`), most often one whose value nothing
//! reads, else one whose value the result adds in; or a caught one, a
//! `catch` of the recursive `dz` on a value that does not depend on the
//! point (differentiated code may hold it: it needs no derivative). Each program with
//! helpers also gets entries that differentiate them (`vg_ds`, `g_ds`, a
//! row of `jacobian` per vector helper: `j_dl`, `j_dv0`, ...), which the
//! oracle runs beside the helpers themselves on the same arguments
//! ([`crate::case::DerivedCase`]): a derivative stops a member exactly
//! when, and with the error that, its function does.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value as Json;

use crate::ast::*;
use crate::case::{DerivedCase, DerivedEntry};

/// The helpers of one program: the functions, the vector helpers
/// (`[f64; 3] -> [f64; 3]`) that `jacobian` may take, and the scalar
/// helper that `grad` may take with a data argument.
pub struct Helpers {
    pub functions: Vec<Function>,
    pub targets: Vec<Target>,
    pub scalar: Option<String>,
    /// The loss `sloss` (among `functions`), in a program with `W`.
    pub loss: Option<String>,
    /// The helpers compared with their derivatives, whose entries are
    /// among `functions`.
    pub derived: Vec<DerivedCase>,
}

/// A vector helper `jacobian` may take: its name, and whether it takes a
/// data argument `d: [f64; 3]` after the point.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub name: String,
    pub data: bool,
}

impl Helpers {
    /// No helpers (most programs).
    pub fn none() -> Helpers {
        Helpers {
            functions: Vec::new(),
            targets: Vec::new(),
            scalar: None,
            loss: None,
            derived: Vec::new(),
        }
    }
}

/// The name of the loss of a gradient with respect to `W`.
pub const LOSS: &str = "sloss";

/// Writes the helpers of one program (one to three vector helpers);
/// `weight`: whether the program has the static `W: [f64; 3]`, which the
/// helpers then read, and the loss `sloss`.
pub fn helpers(rng: &mut ChaCha8Rng, weight: bool) -> Helpers {
    // The faults and the derived checks draw from a stream of their own,
    // so that the rest of the program is what the seed gave without them.
    let mut faults = rng.clone();
    faults.set_stream(FAULT_STREAM);
    // So do the forms of the ODE calls' further arguments.
    let mut forms = rng.clone();
    forms.set_stream(ODE_FORM_STREAM);
    let mut systems = vec![OdeForm::PLAIN];
    let mut functions = vec![
        scalar_helper(rng),
        indexed_helper(rng, weight),
        loop_helper(rng, weight),
    ];
    // The self-tail-recursive helper draws from a stream of its own too.
    let mut tails = rng.clone();
    tails.set_stream(TAIL_STREAM);
    functions.extend(tail_helpers(&mut tails, weight));
    let mut targets: Vec<Target> = vec![
        Target {
            name: LOOP.into(),
            data: false,
        },
        Target {
            name: TAIL.into(),
            data: false,
        },
    ];
    for i in 0..rng.gen_range(1..=3) {
        let name = format!("dv{i}");
        let data = rng.gen_bool(0.5);
        let mut writer = VectorWriter {
            rng: &mut *rng,
            earlier: &targets,
            data,
            weight,
            forms: &mut forms,
            systems: &mut systems,
        };
        let tail = writer.vector(2);
        let mut params = vec![param("x", Ty::FloatArray)];
        if data {
            params.push(param("d", Ty::FloatArray));
        }
        functions.push(Function {
            name: name.clone(),
            params,
            ret: Ty::FloatArray,
            body: Block {
                stmts: Vec::new(),
                tail,
            },
        });
        targets.push(Target { name, data });
    }
    let loss = weight.then(|| {
        let target = targets.choose(rng).cloned().unwrap_or(Target {
            name: LOOP.into(),
            data: false,
        });
        functions.push(loss_function(&target));
        LOSS.to_owned()
    });
    let mut catches = false;
    for function in &mut functions {
        if faults.gen_bool(FAULTING_HELPERS) {
            catches |= add_fault(&mut faults, function);
        }
    }
    if catches {
        functions.push(caught_callee());
    }
    functions.extend(systems.iter().map(|form| form.system()));
    let derived = derived_cases(&mut faults, &targets);
    functions.extend(derived.iter().flat_map(|d| d.wrappers.clone()));
    Helpers {
        functions,
        targets,
        scalar: Some(SCALAR.into()),
        loss,
        derived: derived.into_iter().map(|d| d.case).collect(),
    }
}

/// The stream of [`add_fault`] and [`derived_cases`].
const FAULT_STREAM: u64 = 0xfa17;
const TAIL_STREAM: u64 = 0x7a11;
/// The stream of the forms of the ODE calls' further arguments
/// ([`OdeForm::draw`] and the values it passes).
const ODE_FORM_STREAM: u64 = 0x0de5;

/// How often a helper gets an operation that may fault.
const FAULTING_HELPERS: f64 = 0.4;

/// Adds to `function` (a helper) an operation that faults for some
/// points, on a float the helper has at hand: `let fault: i64 = e;` with
/// `e` an integer `/` or `%` by `(v * 2.0) as i64`, or `[1, 2, 3, 4][(v *
/// 2.0) as i64]`, or `assert!(v < 1.5)`; in the counted loop of `dl`, at
/// the start of its body; elsewhere at the start or the end of the body's
/// statements. Most often nothing reads `fault`; else the result adds
/// `fault as f64 * 0.125` (not in the loop). Sometimes the fault is
/// caught instead ([`caught_stmt`]); returns whether it is.
fn add_fault(rng: &mut ChaCha8Rng, function: &mut Function) -> bool {
    let leaves = fault_leaves(function);
    let Some(leaf) = leaves.choose(rng).cloned() else {
        return false;
    };
    let caught = rng.gen_bool(CAUGHT_FAULTS);
    let stmt = if caught {
        caught_stmt(rng, &function.name)
    } else {
        fault_stmt(rng, leaf)
    };
    let defines = matches!(stmt, Stmt::Let { .. });
    let body = &mut function.body;
    if function.name == LOOP {
        if let Some(Stmt::For { body, .. }) = body.stmts.last_mut() {
            body.insert(0, stmt);
        }
        return caught;
    }
    if rng.gen_bool(0.5) {
        body.stmts.insert(0, stmt);
    } else {
        body.stmts.push(stmt);
    }
    if defines && rng.gen_bool(0.3) {
        let used = Expr::binary(
            Ty::Float,
            BinOp::Mul,
            Expr::new(
                Ty::Float,
                ExprKind::Cast {
                    operand: Box::new(Expr::var(FAULT, Ty::Int)),
                },
            ),
            float(0.125),
        );
        let tail = std::mem::replace(&mut body.tail, float(0.0));
        body.tail = Expr::binary(tail.ty, BinOp::Add, tail, used);
    }
    caught
}

/// The variable [`add_fault`] defines.
const FAULT: &str = "fault";

/// The floats a helper's fault may be computed from (for `dl`, its loop's
/// state).
fn fault_leaves(function: &Function) -> Vec<Expr> {
    let elements = |array: fn() -> Expr| -> Vec<Expr> {
        (0..FLOAT_ARRAY_LEN as i64)
            .map(|i| index(array(), Expr::int(i)))
            .collect()
    };
    match function.name.as_str() {
        SCALAR => vec![Expr::var("a", Ty::Float), Expr::var("c", Ty::Float)],
        INDEXED => vec![index(x(), Expr::var("k", Ty::Int))],
        LOOP => {
            let mut leaves = elements(|| Expr::var("s", Ty::FloatArray));
            leaves.push(Expr::var("a", Ty::Float));
            leaves
        }
        _ => {
            let mut leaves = elements(x);
            if function.params.iter().any(|p| p.name == "d") {
                leaves.extend(elements(d));
            }
            leaves
        }
    }
}

/// `let fault: i64 = ..;` or `assert!(..)` on the float `leaf` (see
/// [`add_fault`]).
fn fault_stmt(rng: &mut ChaCha8Rng, leaf: Expr) -> Stmt {
    let scaled = Expr::new(
        Ty::Int,
        ExprKind::Cast {
            operand: Box::new(Expr::binary(
                Ty::Float,
                BinOp::Mul,
                leaf.clone(),
                float(2.0),
            )),
        },
    );
    let value = match rng.gen_range(0..4) {
        0 => Expr::binary(Ty::Int, BinOp::Div, Expr::int(7), scaled),
        1 => Expr::binary(Ty::Int, BinOp::Rem, Expr::int(7), scaled),
        2 => Expr::new(
            Ty::Int,
            ExprKind::Index {
                array: Box::new(Expr::new(
                    Ty::IntArray,
                    ExprKind::Array((1..=INT_ARRAY_LEN as i64).map(Expr::int).collect()),
                )),
                index: Box::new(scaled),
            },
        ),
        _ => {
            return Stmt::Assert {
                cond: Expr::binary(Ty::Bool, BinOp::Lt, leaf, float(1.5)),
            }
        }
    };
    Stmt::Let {
        name: FAULT.into(),
        value,
    }
}

/// How often a helper's fault is a caught one ([`caught_stmt`]).
const CAUGHT_FAULTS: f64 = 0.3;

/// The function a caught fault calls ([`caught_callee`]).
const CAUGHT: &str = "dz";

/// `let fault: i64 = catch(dz(n)) or a fallback;` with `n` a value that
/// does not depend on the point (so that differentiated code may catch
/// it): the index `k - 1` in `dk`, `k % 4 - 1` in `dl`'s loop, else a
/// constant from -1 to 3. `dz(-1)` faults; `dz(n)` nests `n + 1` calls, so
/// under a small stack the `catch` recovers from an overflow.
fn caught_stmt(rng: &mut ChaCha8Rng, helper: &str) -> Stmt {
    let k = || Expr::var("k", Ty::Int);
    let arg = match helper {
        INDEXED => Expr::binary(Ty::Int, BinOp::Sub, k(), Expr::int(1)),
        LOOP => Expr::binary(
            Ty::Int,
            BinOp::Sub,
            Expr::binary(Ty::Int, BinOp::Rem, k(), Expr::int(4)),
            Expr::int(1),
        ),
        _ => Expr::int(rng.gen_range(-1..=3)),
    };
    let call = Expr::new(
        Ty::Int,
        ExprKind::Call {
            callee: CAUGHT.into(),
            args: vec![arg],
        },
    );
    Stmt::Let {
        name: FAULT.into(),
        value: Expr::new(
            Ty::Int,
            ExprKind::Catch {
                call: Box::new(call),
                fallback: Box::new(Expr::int(rng.gen_range(-3..=3))),
            },
        ),
    }
}

/// `fn dz(n: i64) -> i64 { if n <= 0 { 7 / (n + 1) } else { dz(n - 1) + 1 } }`.
fn caught_callee() -> Function {
    let n = || Expr::var("n", Ty::Int);
    let leaf = |e: Expr| Block {
        stmts: Vec::new(),
        tail: e,
    };
    let bottom = Expr::binary(
        Ty::Int,
        BinOp::Div,
        Expr::int(7),
        Expr::binary(Ty::Int, BinOp::Add, n(), Expr::int(1)),
    );
    let recursive = Expr::binary(
        Ty::Int,
        BinOp::Add,
        Expr::new(
            Ty::Int,
            ExprKind::Call {
                callee: CAUGHT.into(),
                args: vec![Expr::binary(Ty::Int, BinOp::Sub, n(), Expr::int(1))],
            },
        ),
        Expr::int(1),
    );
    let tail = Expr::new(
        Ty::Int,
        ExprKind::If {
            cond: Box::new(Expr::binary(Ty::Bool, BinOp::Le, n(), Expr::int(0))),
            then: Box::new(leaf(bottom)),
            otherwise: Box::new(leaf(recursive)),
        },
    );
    Function {
        name: CAUGHT.into(),
        params: vec![param("n", Ty::Int)],
        ret: Ty::Int,
        body: leaf(tail),
    }
}

/// A [`DerivedCase`] with the functions it runs as entries.
struct Derived {
    case: DerivedCase,
    wrappers: Vec<Function>,
}

/// The derived checks of a program's helpers: `ds` against `vg_ds` (the
/// value of `value_and_grad(ds, a, c)`) and `g_ds` (`grad(ds, a, c)`);
/// each vector helper `t` against `j_t` (a row of `jacobian(t, x, ..)`);
/// each on 1 to 6 members with points and data in [-2, 2].
fn derived_cases(rng: &mut ChaCha8Rng, targets: &[Target]) -> Vec<Derived> {
    let a = || Expr::var("a", Ty::Float);
    let c = || Expr::var("c", Ty::Float);
    let gradient = |field: Option<u8>| ExprKind::Grad {
        function: SCALAR.into(),
        point: Box::new(a()),
        data: vec![c()],
        field,
    };
    let scalar_params = vec![param("a", Ty::Float), param("c", Ty::Float)];
    let members = rng.gen_range(1..=6);
    let mut out = vec![Derived {
        case: DerivedCase {
            function: SCALAR.into(),
            derivatives: vec![
                DerivedEntry {
                    entry: format!("vg_{SCALAR}"),
                    value: true,
                },
                DerivedEntry {
                    entry: format!("g_{SCALAR}"),
                    value: false,
                },
            ],
            args: vec![
                ("a".into(), points(rng, members, Ty::Float)),
                ("c".into(), points(rng, members, Ty::Float)),
            ],
        },
        wrappers: vec![
            wrapper(
                &format!("vg_{SCALAR}"),
                &scalar_params,
                Ty::Float,
                gradient(Some(0)),
            ),
            wrapper(
                &format!("g_{SCALAR}"),
                &scalar_params,
                Ty::Float,
                gradient(None),
            ),
        ],
    }];
    for target in targets {
        let mut params = vec![param("x", Ty::FloatArray)];
        let mut args = vec![("x".to_string(), points(rng, members, Ty::FloatArray))];
        let mut data = Vec::new();
        if target.data {
            params.push(param("d", Ty::FloatArray));
            args.push(("d".into(), points(rng, members, Ty::FloatArray)));
            data.push(d());
        }
        let entry = format!("j_{}", target.name);
        let row = ExprKind::Jacobian {
            function: target.name.clone(),
            point: Box::new(x()),
            data,
            row: rng.gen_range(0..FLOAT_ARRAY_LEN),
        };
        out.push(Derived {
            case: DerivedCase {
                function: target.name.clone(),
                derivatives: vec![DerivedEntry {
                    entry: entry.clone(),
                    value: false,
                }],
                args,
            },
            wrappers: vec![wrapper(&entry, &params, Ty::FloatArray, row)],
        });
    }
    out
}

/// `fn name(params) -> ret { body }`.
fn wrapper(name: &str, params: &[Param], ret: Ty, body: ExprKind) -> Function {
    Function {
        name: name.into(),
        params: params.to_vec(),
        ret,
        body: Block {
            stmts: Vec::new(),
            tail: Expr::new(ret, body),
        },
    }
}

/// One value of type `ty` (`f64` or `[f64; 3]`) per member, each float
/// in [-2, 2] by quarters.
fn points(rng: &mut ChaCha8Rng, members: usize, ty: Ty) -> Vec<Json> {
    let mut value = || f64::from(rng.gen_range(-8..=8)) * 0.25;
    (0..members)
        .map(|_| match ty {
            Ty::FloatArray => Json::from((0..FLOAT_ARRAY_LEN).map(|_| value()).collect::<Vec<_>>()),
            _ => Json::from(value()),
        })
        .collect()
}

/// `sloss(x: [f64; 3]) -> f64 { let t = target(x); sum(t * W) +
/// dot(matvec(M, t), x) + sum(vecmat(t, M) * W) + dot(M[1], t) +
/// sum(W * softplus(matvec(M, x))) }` (`target(x, x)` with data): `W` is
/// read here and, often, inside the target; the static matrix `M` in both
/// products and by a row, so that the gradient with respect to `W` and `M`
/// meets every kind of static adjoint (dense, row, outer), and
/// `native-batched` waits at products. The last term is a generalized
/// linear model's: its gradient with respect to `x` is a chain between
/// `matvec(M, x)` and `vecmat(., M)`, which the batching strategies may
/// run fused with both products.
fn loss_function(target: &Target) -> Function {
    let mut args = vec![x()];
    if target.data {
        args.push(x());
    }
    let t = || Expr::var("t", Ty::FloatArray);
    let m = || Expr::var("M", Ty::Matrix);
    let builtin = |ty: Ty, builtin: Builtin, args: Vec<Expr>| {
        Expr::new(ty, ExprKind::Builtin { builtin, args })
    };
    let terms = [
        builtin(
            Ty::Float,
            Builtin::Sum,
            vec![Expr::binary(Ty::FloatArray, BinOp::Mul, t(), w())],
        ),
        builtin(
            Ty::Float,
            Builtin::Dot,
            vec![
                builtin(Ty::FloatArray, Builtin::Matvec, vec![m(), t()]),
                x(),
            ],
        ),
        builtin(
            Ty::Float,
            Builtin::Sum,
            vec![Expr::binary(
                Ty::FloatArray,
                BinOp::Mul,
                builtin(Ty::FloatArray, Builtin::Vecmat, vec![t(), m()]),
                w(),
            )],
        ),
        builtin(
            Ty::Float,
            Builtin::Dot,
            vec![
                Expr::new(
                    Ty::FloatArray,
                    ExprKind::Index {
                        array: Box::new(m()),
                        index: Box::new(Expr::new(Ty::Int, ExprKind::Int(1))),
                    },
                ),
                t(),
            ],
        ),
        builtin(
            Ty::Float,
            Builtin::Sum,
            vec![Expr::binary(
                Ty::FloatArray,
                BinOp::Mul,
                w(),
                builtin(
                    Ty::FloatArray,
                    Builtin::Softplus,
                    vec![builtin(Ty::FloatArray, Builtin::Matvec, vec![m(), x()])],
                ),
            )],
        ),
    ];
    let tail = terms
        .into_iter()
        .reduce(|a, b| Expr::binary(Ty::Float, BinOp::Add, a, b))
        .expect("terms");
    Function {
        name: LOSS.into(),
        params: vec![param("x", Ty::FloatArray)],
        ret: Ty::Float,
        body: Block {
            stmts: vec![Stmt::Let {
                name: "t".into(),
                value: call(&target.name, args),
            }],
            tail,
        },
    }
}

fn w() -> Expr {
    Expr::var("W", Ty::FloatArray)
}

const SCALAR: &str = "ds";
const INDEXED: &str = "dk";
const LOOP: &str = "dl";
const ODE: &str = "dode";
const TAIL: &str = "dt";
const TAIL_REC: &str = "dtr";

/// `dtr(x, n, acc)`: `if n <= 0 { return acc; }` then
/// `dtr(x, n - 1, tanh(acc * c + x * x[n % 3] (+ W[n % 3])))`, a self tail
/// call reading rows at a computed index; and `dt(x) = dtr(x, T, x)`.
fn tail_helpers(rng: &mut ChaCha8Rng, weight: bool) -> [Function; 2] {
    let trips = *[0, 1, 4, 9, 30].choose(rng).unwrap_or(&4);
    let n = || Expr::var("n", Ty::Int);
    let acc = || Expr::var("acc", Ty::FloatArray);
    let k = || Expr::binary(Ty::Int, BinOp::Rem, n(), Expr::int(FLOAT_ARRAY_LEN as i64));
    let mut next = Expr::binary(
        Ty::FloatArray,
        BinOp::Add,
        Expr::binary(Ty::FloatArray, BinOp::Mul, acc(), literal(rng)),
        Expr::binary(Ty::FloatArray, BinOp::Mul, x(), index(x(), k())),
    );
    if weight {
        next = Expr::binary(Ty::FloatArray, BinOp::Add, next, index(w(), k()));
    }
    let next = Expr::new(
        Ty::FloatArray,
        ExprKind::Builtin {
            builtin: Builtin::Tanh,
            args: vec![next],
        },
    );
    let recursive = Function {
        name: TAIL_REC.into(),
        params: vec![
            param("x", Ty::FloatArray),
            param("n", Ty::Int),
            param("acc", Ty::FloatArray),
        ],
        ret: Ty::FloatArray,
        body: Block {
            stmts: vec![Stmt::ReturnIf {
                cond: Expr::binary(Ty::Bool, BinOp::Le, n(), Expr::int(0)),
                value: acc(),
            }],
            tail: call(
                TAIL_REC,
                vec![
                    x(),
                    Expr::binary(Ty::Int, BinOp::Sub, n(), Expr::int(1)),
                    next,
                ],
            ),
        },
    };
    let entry = Function {
        name: TAIL.into(),
        params: vec![param("x", Ty::FloatArray)],
        ret: Ty::FloatArray,
        body: Block {
            stmts: Vec::new(),
            tail: call(TAIL_REC, vec![x(), Expr::int(trips), x()]),
        },
    };
    [recursive, entry]
}

fn param(name: &str, ty: Ty) -> Param {
    Param {
        name: name.into(),
        ty,
    }
}

fn float(v: f64) -> Expr {
    Expr::new(Ty::Float, ExprKind::Float(v))
}

fn literal(rng: &mut ChaCha8Rng) -> Expr {
    float(f64::from(rng.gen_range(-6..=6)) * 0.25)
}

fn index(array: Expr, i: Expr) -> Expr {
    Expr::new(
        Ty::Float,
        ExprKind::Index {
            array: Box::new(array),
            index: Box::new(i),
        },
    )
}

fn x() -> Expr {
    Expr::var("x", Ty::FloatArray)
}

fn d() -> Expr {
    Expr::var("d", Ty::FloatArray)
}

/// A smooth float expression of `depth` levels over `leaves`.
fn scalar_expr(rng: &mut ChaCha8Rng, leaves: &[Expr], depth: u32) -> Expr {
    if depth == 0 || rng.gen_bool(0.25) {
        return match leaves.choose(rng) {
            Some(leaf) if rng.gen_bool(0.8) => leaf.clone(),
            _ => literal(rng),
        };
    }
    if rng.gen_bool(0.3) {
        let builtin = *[
            Builtin::Tanh,
            Builtin::Sin,
            Builtin::Cos,
            Builtin::Erf,
            Builtin::Phi,
        ]
        .choose(rng)
        .unwrap_or(&Builtin::Tanh);
        let operand = scalar_expr(rng, leaves, depth - 1);
        return Expr::new(
            Ty::Float,
            ExprKind::Builtin {
                builtin,
                args: vec![operand],
            },
        );
    }
    let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul]
        .choose(rng)
        .unwrap_or(&BinOp::Mul);
    let lhs = scalar_expr(rng, leaves, depth - 1);
    let rhs = scalar_expr(rng, leaves, depth - 1);
    Expr::binary(Ty::Float, op, lhs, rhs)
}

/// `ds(a: f64, c: f64) -> f64`, mapped over an array with `c` extra.
fn scalar_helper(rng: &mut ChaCha8Rng) -> Function {
    let leaves = [Expr::var("a", Ty::Float), Expr::var("c", Ty::Float)];
    // `a` appears at least once, so that the mapped elements matter.
    let tail = Expr::binary(
        Ty::Float,
        BinOp::Mul,
        leaves[0].clone(),
        scalar_expr(rng, &leaves, 2),
    );
    Function {
        name: SCALAR.into(),
        params: vec![param("a", Ty::Float), param("c", Ty::Float)],
        ret: Ty::Float,
        body: Block {
            stmts: Vec::new(),
            tail,
        },
    }
}

/// `dk(k: i64, x: [f64; 3]) -> f64`: element `k` of `x` times an
/// expression of its neighbour `x[(k + 1) % 3]` and `x[0]`.
fn indexed_helper(rng: &mut ChaCha8Rng, weight: bool) -> Function {
    let k = Expr::var("k", Ty::Int);
    let next = Expr::binary(
        Ty::Int,
        BinOp::Rem,
        Expr::binary(Ty::Int, BinOp::Add, k.clone(), Expr::int(1)),
        Expr::int(FLOAT_ARRAY_LEN as i64),
    );
    let mut leaves = vec![index(x(), next.clone()), index(x(), Expr::int(0))];
    if weight {
        leaves.push(index(w(), next));
    }
    let tail = Expr::binary(
        Ty::Float,
        BinOp::Mul,
        index(x(), k),
        scalar_expr(rng, &leaves, 2),
    );
    Function {
        name: INDEXED.into(),
        params: vec![param("k", Ty::Int), param("x", Ty::FloatArray)],
        ret: Ty::Float,
        body: Block {
            stmts: Vec::new(),
            tail,
        },
    }
}

/// How an ODE call holds the coefficients of its linear system, its
/// argument after the times (and tolerances).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// `a: [f64; 3]`.
    Flat,
    /// `a: [[f64; 3]; 2]`: a second row of couplings, to `y[(i + 2) % 3]`.
    Matrix,
    /// `q: (f64, [f64; 3])`: the couplings `q.1` scaled by `q.0`.
    Tuple,
}

/// The argument an ODE call passes after its coefficients, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Passed {
    Nothing,
    /// `m: i64`, from 0 to 2: row `i` couples `y[(i + m) % 3]`.
    Int,
    /// `flip: bool`: the couplings negated where true.
    Bool,
    /// `s: f32`: the couplings scaled by `s as f64`.
    F32,
}

/// The form of an ODE call's further arguments, which names the
/// right-hand side it solves ([`OdeForm::system`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OdeForm {
    holder: Holder,
    passed: Passed,
}

impl OdeForm {
    /// One flat array of coefficients, nothing passed: `dode`.
    const PLAIN: OdeForm = OdeForm {
        holder: Holder::Flat,
        passed: Passed::Nothing,
    };

    /// Half the calls [`OdeForm::PLAIN`], the others any other form alike.
    fn draw(rng: &mut ChaCha8Rng) -> OdeForm {
        if rng.gen_bool(0.5) {
            return OdeForm::PLAIN;
        }
        let holders = [Holder::Flat, Holder::Matrix, Holder::Tuple];
        let passed = [Passed::Nothing, Passed::Int, Passed::Bool, Passed::F32];
        let others: Vec<OdeForm> = holders
            .iter()
            .flat_map(|&holder| passed.iter().map(move |&passed| OdeForm { holder, passed }))
            .filter(|form| *form != OdeForm::PLAIN)
            .collect();
        *others.choose(rng).unwrap_or(&OdeForm::PLAIN)
    }

    /// The right-hand side's name: `dode`, `dode_m`, `dode_ti`, ...
    fn name(self) -> String {
        let holder = match self.holder {
            Holder::Flat => "",
            Holder::Matrix => "m",
            Holder::Tuple => "t",
        };
        let passed = match self.passed {
            Passed::Nothing => "",
            Passed::Int => "i",
            Passed::Bool => "b",
            Passed::F32 => "f",
        };
        if self == OdeForm::PLAIN {
            ODE.to_owned()
        } else {
            format!("{ODE}_{holder}{passed}")
        }
    }

    /// `fn name(t: f64, y: [f64; 3], coefficients, passed) -> [f64; 3]`:
    /// the right-hand side of the linear system `y'[i] = c_i - y[i]`, with
    /// `r = (i + 1) % 3` (`(i + m) % 3` given an integer `m`) and the
    /// coupling `c_i` being `a[i] y[r]` (flat), `a[0][i] y[r] + a[1][i]
    /// y[(i + 2) % 3] * 0.5` (matrix) or `q.1[i] y[r] q.0` (tuple), times
    /// -1 where `flip`, times `s as f64` given an `f32`. With coefficients
    /// from `tanh` and `s` in [-2, 2] its solution stays small over the
    /// unit time the calls solve, and `expm` of its matrix is the exact
    /// solution (`tools/derivative_seeds.py`).
    fn system(self) -> Function {
        let row = |i: i64| {
            let coupling = self.coupling(i);
            let coupling = match self.factor() {
                Some(factor) => Expr::binary(Ty::Float, BinOp::Mul, coupling, factor),
                None => coupling,
            };
            Expr::binary(Ty::Float, BinOp::Sub, coupling, ode_state(Expr::int(i)))
        };
        Function {
            name: self.name(),
            params: self.params(),
            ret: Ty::FloatArray,
            body: Block {
                stmts: Vec::new(),
                tail: Expr::new(
                    Ty::FloatArray,
                    ExprKind::Array(vec![row(0), row(1), row(2)]),
                ),
            },
        }
    }

    /// The right-hand side's parameters: `t`, `y`, the coefficients, then
    /// what is passed after them.
    fn params(self) -> Vec<Param> {
        let mut params = vec![param("t", Ty::Float), param("y", Ty::FloatArray)];
        params.push(match self.holder {
            Holder::Flat => param("a", Ty::FloatArray),
            Holder::Matrix => param("a", Ty::TwoRows),
            Holder::Tuple => param("q", Ty::ScaledArray),
        });
        match self.passed {
            Passed::Nothing => {}
            Passed::Int => params.push(param("m", Ty::Int)),
            Passed::Bool => params.push(param("flip", Ty::Bool)),
            Passed::F32 => params.push(param("s", Ty::F32)),
        }
        params
    }

    /// The index `r` row `i` couples to: `(i + 1) % 3`, or `(i + m) % 3`
    /// given an integer `m`.
    fn next(self, i: i64) -> Expr {
        match self.passed {
            Passed::Int => Expr::binary(
                Ty::Int,
                BinOp::Rem,
                Expr::binary(Ty::Int, BinOp::Add, Expr::int(i), Expr::var("m", Ty::Int)),
                Expr::int(FLOAT_ARRAY_LEN as i64),
            ),
            _ => Expr::int((i + 1) % FLOAT_ARRAY_LEN as i64),
        }
    }

    /// Row `i`'s coupling `c_i` before its factor.
    fn coupling(self, i: i64) -> Expr {
        let product = |c: Expr, j: Expr| Expr::binary(Ty::Float, BinOp::Mul, c, ode_state(j));
        match self.holder {
            Holder::Flat => product(
                index(Expr::var("a", Ty::FloatArray), Expr::int(i)),
                self.next(i),
            ),
            Holder::Matrix => {
                let row = |r: i64| {
                    index(
                        Expr::new(
                            Ty::FloatArray,
                            ExprKind::Index {
                                array: Box::new(Expr::var("a", Ty::TwoRows)),
                                index: Box::new(Expr::int(r)),
                            },
                        ),
                        Expr::int(i),
                    )
                };
                let second = product(row(1), Expr::int((i + 2) % FLOAT_ARRAY_LEN as i64));
                Expr::binary(
                    Ty::Float,
                    BinOp::Add,
                    product(row(0), self.next(i)),
                    Expr::binary(Ty::Float, BinOp::Mul, second, float(0.5)),
                )
            }
            Holder::Tuple => {
                let field = |field: u8, ty: Ty| {
                    Expr::new(
                        ty,
                        ExprKind::Field {
                            pair: Box::new(Expr::var("q", Ty::ScaledArray)),
                            field,
                        },
                    )
                };
                Expr::binary(
                    Ty::Float,
                    BinOp::Mul,
                    product(index(field(1, Ty::FloatArray), Expr::int(i)), self.next(i)),
                    field(0, Ty::Float),
                )
            }
        }
    }

    /// What every coupling is multiplied by: -1 where `flip`, `s as f64`
    /// given an `f32`; nothing otherwise.
    fn factor(self) -> Option<Expr> {
        match self.passed {
            Passed::Bool => Some(Expr::new(
                Ty::Float,
                ExprKind::If {
                    cond: Box::new(Expr::var("flip", Ty::Bool)),
                    then: Box::new(Block {
                        stmts: Vec::new(),
                        tail: float(-1.0),
                    }),
                    otherwise: Box::new(Block {
                        stmts: Vec::new(),
                        tail: float(1.0),
                    }),
                },
            )),
            Passed::F32 => Some(Expr::new(
                Ty::Float,
                ExprKind::Cast {
                    operand: Box::new(Expr::var("s", Ty::F32)),
                },
            )),
            Passed::Nothing | Passed::Int => None,
        }
    }
}

/// `y[i]`: element `i` of a right-hand side's state.
fn ode_state(i: Expr) -> Expr {
    index(Expr::var("y", Ty::FloatArray), i)
}

/// `dl(x: [f64; 3]) -> [f64; 3]`: a counted loop of a constant count
/// (unrolled when short, taped when long) over an array state `s`, updated
/// one element per iteration, and scalar states `a` and `b` that may trade
/// values each iteration; `tanh` keeps them bounded however long the loop.
fn loop_helper(rng: &mut ChaCha8Rng, weight: bool) -> Function {
    let trips = *[0, 3, 12, 17, 40].choose(rng).unwrap_or(&17);
    let s = || Expr::var("s", Ty::FloatArray);
    let a = || Expr::var("a", Ty::Float);
    let k = Expr::var("k", Ty::Int);
    let tanh = |e: Expr| {
        Expr::new(
            Ty::Float,
            ExprKind::Builtin {
                builtin: Builtin::Tanh,
                args: vec![e],
            },
        )
    };
    let mut leaves: Vec<Expr> = (0..FLOAT_ARRAY_LEN as i64)
        .map(|i| index(s(), Expr::int(i)))
        .collect();
    leaves.push(a());
    leaves.push(index(
        x(),
        Expr::int(rng.gen_range(0..FLOAT_ARRAY_LEN as i64)),
    ));
    let position = Expr::binary(Ty::Int, BinOp::Rem, k, Expr::int(FLOAT_ARRAY_LEN as i64));
    if weight {
        leaves.push(index(w(), position.clone()));
    }
    let scaled_a = Expr::binary(Ty::Float, BinOp::Mul, a(), literal(rng));
    let b = || Expr::var("b", Ty::Float);
    let mut body = vec![
        Stmt::SetIndex {
            name: "s".into(),
            index: position,
            op: AssignOp::Set,
            value: tanh(scalar_expr(rng, &leaves, 2)),
        },
        Stmt::Assign {
            name: "a".into(),
            op: AssignOp::Set,
            value: tanh(Expr::binary(
                Ty::Float,
                BinOp::Add,
                scaled_a,
                scalar_expr(rng, &leaves, 1),
            )),
            slice: None,
        },
    ];
    // Sometimes `a` and `b` trade values, so that the loop's carried
    // adjoints are handed on from one variable to another.
    if rng.gen_bool(0.5) {
        body.extend([
            Stmt::Let {
                name: "held".into(),
                value: a(),
            },
            Stmt::Assign {
                name: "a".into(),
                op: AssignOp::Set,
                value: b(),
                slice: None,
            },
            Stmt::Assign {
                name: "b".into(),
                op: AssignOp::Set,
                value: Expr::var("held", Ty::Float),
                slice: None,
            },
        ]);
    }
    let stmts = vec![
        Stmt::Let {
            name: "s".into(),
            value: x(),
        },
        Stmt::Let {
            name: "a".into(),
            value: index(x(), Expr::int(0)),
        },
        Stmt::Let {
            name: "b".into(),
            value: index(x(), Expr::int(1)),
        },
        Stmt::For {
            var: "k".into(),
            start: Expr::int(0),
            end: Expr::int(trips),
            body,
        },
    ];
    Function {
        name: LOOP.into(),
        params: vec![param("x", Ty::FloatArray)],
        ret: Ty::FloatArray,
        body: Block {
            stmts,
            tail: Expr::binary(Ty::FloatArray, BinOp::Mul, s(), a()),
        },
    }
}

/// Writes the body of a vector helper; `earlier` are the vector helpers
/// written before it (which it may call and join); `data`: whether the
/// helper takes the data argument `d`.
struct VectorWriter<'a> {
    rng: &'a mut ChaCha8Rng,
    earlier: &'a [Target],
    data: bool,
    /// Whether the program has the static `W`, a leaf too.
    weight: bool,
    /// The stream the forms of the ODE calls' further arguments are drawn
    /// from, and the forms drawn so far (their right-hand sides).
    forms: &'a mut ChaCha8Rng,
    systems: &'a mut Vec<OdeForm>,
}

impl VectorWriter<'_> {
    /// An expression of type `[f64; 3]` over `x` (and `d`).
    fn vector(&mut self, depth: u32) -> Expr {
        let ty = Ty::FloatArray;
        if depth == 0 {
            return self.leaf();
        }
        let sub = depth - 1;
        match self.rng.gen_range(0..9) {
            0 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul]
                    .choose(self.rng)
                    .unwrap_or(&BinOp::Add);
                Expr::binary(ty, op, self.vector(sub), self.vector(sub))
            }
            1 => {
                let scale = self.element_expr();
                Expr::binary(ty, BinOp::Mul, self.vector(sub), scale)
            }
            2 => {
                let builtin = *[
                    Builtin::Tanh,
                    Builtin::Sin,
                    Builtin::Cos,
                    Builtin::Erf,
                    Builtin::Phi,
                ]
                .choose(self.rng)
                .unwrap_or(&Builtin::Tanh);
                let operand = self.vector(sub);
                Expr::new(
                    ty,
                    ExprKind::Builtin {
                        builtin,
                        args: vec![operand],
                    },
                )
            }
            3 | 4 => self.map(sub),
            5 => self.pfor(sub),
            8 => self.ode(sub),
            6 if !self.earlier.is_empty() => self.earlier_call(sub),
            7 if !self.earlier.is_empty() => {
                let calls = vec![self.earlier_call(sub), self.earlier_call(sub)];
                Expr::new(
                    ty,
                    ExprKind::Join {
                        calls,
                        picks: vec![0, 1],
                    },
                )
            }
            _ => self.leaf(),
        }
    }

    /// `x`, or sometimes the data argument `d` if the helper takes one.
    fn leaf(&mut self) -> Expr {
        if self.data && self.rng.gen_bool(0.3) {
            d()
        } else if self.weight && self.rng.gen_bool(0.25) {
            w()
        } else {
            x()
        }
    }

    /// A call of an earlier vector helper at a vector expression, with a
    /// data argument (`d`, or `x` in a helper without data) if it takes one.
    fn earlier_call(&mut self, depth: u32) -> Expr {
        let Some(callee) = self.earlier.choose(self.rng).cloned() else {
            return x();
        };
        let mut args = vec![self.vector(depth)];
        if callee.data {
            args.push(if self.data { d() } else { x() });
        }
        call(&callee.name, args)
    }

    /// A float expression of the elements of `x`.
    fn element_expr(&mut self) -> Expr {
        let mut leaves: Vec<Expr> = (0..FLOAT_ARRAY_LEN as i64)
            .map(|i| index(x(), Expr::int(i)))
            .collect();
        if self.weight {
            leaves.push(index(
                w(),
                Expr::int(self.rng.gen_range(0..FLOAT_ARRAY_LEN as i64)),
            ));
        }
        scalar_expr(self.rng, &leaves, 1)
    }

    /// `map(ds, [v[0], v[1], v[2]], c)` for a vector expression `v` (of
    /// one level at most: it is written once per element) and an extra
    /// argument `c` of the elements of `x`.
    fn map(&mut self, depth: u32) -> Expr {
        let v = self.vector(depth.min(1));
        let elements: Vec<Expr> = (0..FLOAT_ARRAY_LEN as i64)
            .map(|i| index(v.clone(), Expr::int(i)))
            .collect();
        let extra = self.element_expr();
        Expr::new(
            Ty::FloatArray,
            ExprKind::Instances {
                callee: SCALAR.into(),
                form: InstanceForm::Map { depths: elements },
                args: vec![extra],
                use_: InstanceUse::Whole,
            },
        )
    }

    /// The state at time 1 of a linear system ([`OdeForm::system`]) from
    /// the vector expression `v` at time 0, its coefficients `tanh(u)` of
    /// another, by `ode_rk45` or `ode_bdf_tol`: `ode_rk45(dode, v, 0.0,
    /// [0.5, 1.0], tanh(u))[1]`. The form of the further arguments is drawn
    /// from a stream of its own ([`OdeForm::draw`]): `tanh(u)`, `[tanh(u),
    /// tanh(v)]` or `(tanh(v[k]), tanh(u))`, then nothing, an integer from
    /// 0 to 2, a bool (`d[k] < 0.0` in a helper with data, else a
    /// constant) or an `f32` constant. The `f32` is a constant since a
    /// helper without data passes its point as an earlier helper's data:
    /// cast from it, the function would be rounded at a resolution above
    /// the derivative oracle's close step.
    fn ode(&mut self, depth: u32) -> Expr {
        let form = OdeForm::draw(self.forms);
        if !self.systems.contains(&form) {
            self.systems.push(form);
        }
        let v = self.vector(depth.min(1));
        let u = self.vector(depth.min(1));
        let tanh = |e: Expr, ty: Ty| {
            Expr::new(
                ty,
                ExprKind::Builtin {
                    builtin: Builtin::Tanh,
                    args: vec![e],
                },
            )
        };
        let coefficients = match form.holder {
            Holder::Flat => tanh(u, Ty::FloatArray),
            Holder::Matrix => Expr::new(
                Ty::TwoRows,
                ExprKind::Array(vec![
                    tanh(u, Ty::FloatArray),
                    tanh(v.clone(), Ty::FloatArray),
                ]),
            ),
            Holder::Tuple => {
                let k = self.forms.gen_range(0..FLOAT_ARRAY_LEN as i64);
                Expr::new(
                    Ty::ScaledArray,
                    ExprKind::Pair(
                        Box::new(tanh(index(v.clone(), Expr::int(k)), Ty::Float)),
                        Box::new(tanh(u, Ty::FloatArray)),
                    ),
                )
            }
        };
        let passed = self.passed(form.passed);
        let times = Expr::new(
            Ty::FloatArray,
            ExprKind::Array(vec![float(0.5), float(1.0)]),
        );
        let mut args = vec![
            Expr::var(&form.name(), Ty::FloatArray),
            v,
            float(0.0),
            times,
        ];
        let solver = if self.rng.gen_bool(0.5) {
            "ode_rk45"
        } else {
            args.extend([float(1e-6), float(1e-8), Expr::int(1000)]);
            "ode_bdf_tol"
        };
        args.push(coefficients);
        args.extend(passed);
        Expr::new(
            Ty::FloatArray,
            ExprKind::Index {
                array: Box::new(call(solver, args)),
                index: Box::new(Expr::int(1)),
            },
        )
    }

    /// The value an ODE call passes after its coefficients (see [`ode`]).
    ///
    /// [`ode`]: VectorWriter::ode
    fn passed(&mut self, passed: Passed) -> Option<Expr> {
        let k = self.forms.gen_range(0..FLOAT_ARRAY_LEN as i64);
        let element = || index(d(), Expr::int(k));
        match passed {
            Passed::Nothing => None,
            Passed::Int => Some(Expr::int(self.forms.gen_range(0..=2))),
            Passed::Bool if self.data => {
                Some(Expr::binary(Ty::Bool, BinOp::Lt, element(), float(0.0)))
            }
            Passed::Bool => Some(Expr::new(
                Ty::Bool,
                ExprKind::Bool(self.forms.gen_bool(0.5)),
            )),
            Passed::F32 => Some(Expr::new(
                Ty::F32,
                ExprKind::Float(f64::from(self.forms.gen_range(-8..=8)) * 0.25),
            )),
        }
    }

    /// `pfor::<3>(dk, v)` for a vector expression `v`.
    fn pfor(&mut self, depth: u32) -> Expr {
        let v = self.vector(depth);
        Expr::new(
            Ty::FloatArray,
            ExprKind::Instances {
                callee: INDEXED.into(),
                form: InstanceForm::Pfor {
                    count: FLOAT_ARRAY_LEN,
                    name: None,
                },
                args: vec![v],
                use_: InstanceUse::Whole,
            },
        )
    }
}

fn call(callee: &str, args: Vec<Expr>) -> Expr {
    Expr::new(
        Ty::FloatArray,
        ExprKind::Call {
            callee: callee.into(),
            args,
        },
    )
}
