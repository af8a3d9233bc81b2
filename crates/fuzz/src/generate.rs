//! The generator: one seed gives one [`Case`], a well-typed program that
//! terminates, with inputs and limits.
//!
//! Termination: every function takes a depth `d: i64` first. It calls a
//! function written after it with `d` itself, and any function (itself,
//! each other, the entry) with `d - 1` or `d - 2` only where `d > 0` holds
//! (after `if d <= 0 { return ...; }`, in the `else` of
//! `if d <= 0 { ... } else { ... }`, or inside
//! `if d > 0 { call } else { constant }`); so each call lowers `d`, or
//! keeps it and moves to a later function. Every loop runs at most a few
//! iterations of a counter the body cannot assign. Recursion is therefore
//! bounded by the entry's `d`, and the run's step limit bounds the rest
//! (a shrunk program may lose its guards).
//!
//! Instances keep the rule: the calls of a `join` are such calls; `map`
//! maps a function over an array of such depth arguments; `pfor::<N>`
//! gives instance `k` the depth `k`, so it runs only where `d >= N` (any
//! function, itself included: every `k < d`) or `d >= N - 1` (a later
//! function: every `k <= d`). Calls to later functions with a depth of at
//! most `d`, and to any function with less than `d`, decrease the pair
//! (`d`, position from the end), so every program still terminates.
//! `pfor::<L>` over the member's own ragged length `L` is guarded by
//! `d >= L` (`d >= L - 1` for a later function) for the same reason, and
//! `map` over `[depth; L]` passes every instance the same depth argument.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value as Json};

use crate::ast::*;
use crate::case::{Case, GradientCase, InputArg, InputValue, Inputs, Limits, ENTRY};
use crate::differentiable;

/// Types a variable, parameter or result may have.
const VALUE_TYPES: [Ty; 9] = [
    Ty::Int,
    Ty::Float,
    Ty::IntArray,
    Ty::FloatArray,
    Ty::Pair,
    Ty::I32,
    Ty::Usize,
    Ty::F32,
    Ty::F32Array,
];

/// The same in a program with ragged arrays.
const RAGGED_VALUE_TYPES: [Ty; 10] = [
    Ty::Int,
    Ty::Float,
    Ty::IntArray,
    Ty::FloatArray,
    Ty::Pair,
    Ty::F32,
    Ty::IntRagged,
    Ty::FloatRagged,
    Ty::F32Ragged,
    Ty::RowsRagged,
];

/// The same in a scalar program ([`scalar_program`]): scalars and the
/// pair of two (a tuple is as many scalar variables in the IR), `i64` and
/// `f64` the most often.
const SCALAR_VALUE_TYPES: [Ty; 9] = [
    Ty::Int,
    Ty::Int,
    Ty::Float,
    Ty::Float,
    Ty::I32,
    Ty::Usize,
    Ty::F32,
    Ty::Bool,
    Ty::Pair,
];

/// The types a program with a second ragged dimension adds.
const INNER_RAGGED_TYPES: [Ty; 2] = [Ty::ColsRagged, Ty::GridRagged];

/// The elementwise float builtins of one operand (methods and functions).
const FLOAT_MAPS: [Builtin; 27] = [
    Builtin::Abs,
    Builtin::Exp,
    Builtin::ExpM1,
    Builtin::Ln,
    Builtin::Ln1p,
    Builtin::Log10,
    Builtin::Sqrt,
    Builtin::Sin,
    Builtin::Cos,
    Builtin::Tan,
    Builtin::Tanh,
    Builtin::Floor,
    Builtin::Ceil,
    Builtin::Round,
    Builtin::Signum,
    Builtin::Recip,
    Builtin::Sigmoid,
    Builtin::LogSigmoid,
    Builtin::Softplus,
    Builtin::Lgamma,
    Builtin::Digamma,
    Builtin::Erf,
    Builtin::Erfc,
    Builtin::Phi,
    Builtin::InvPhi,
    Builtin::Trigamma,
    Builtin::Atan,
];

/// How often a program has ragged arrays.
const RAGGED_PROGRAMS: f64 = 0.4;

/// The forms of the ranges of generated slices, taken in turn.
const SLICE_FORMS: [SliceForm; 4] = [
    SliceForm::Offset,
    SliceForm::Between,
    SliceForm::Computed,
    SliceForm::Prefix,
];

/// How often a program with ragged arrays has a second ragged dimension
/// (`[f64; D]`, `[[f64; D]; L]`).
const INNER_RAGGED_PROGRAMS: f64 = 0.4;
/// How often a program is a scalar program ([`scalar_program`]).
const SCALAR_PROGRAMS: f64 = 0.15;
/// Mixed into the seed for the draw of [`scalar_program`], which has its
/// own random stream.
const SCALAR_STREAM: u64 = 0x5ca1_a75e_ed5c_a1a7;
/// How often the recursive arm of an `i64` function ends with
/// `e + self(d - k, ..)` or `e * self(d - k, ..)`: a self call whose result
/// is combined with the caller's value, which native code makes a jump
/// (`autobatch_native`'s `translate::tail`).
const FOLDED_SELF_CALLS: f64 = 0.5;
/// Mixed into the seed for the draws of [`FOLDED_SELF_CALLS`], which have
/// their own random stream (so that the seeds whose functions draw no
/// such call give the programs they gave before).
const FOLD_STREAM: u64 = 0xf01d_5e1f_ca11_f01d;
/// How often a float expression is a call of a host primitive.
const HOST_CALLS: f64 = 0.03;

/// How often a float (outside a scalar program) is a call of a library
/// function.
const LIBRARY_CALLS: f64 = 0.04;

/// What the generator passes for one argument of a library function.
#[derive(Clone, Copy)]
pub enum LibraryArg {
    /// Any float, or sometimes a `[f64; 3]` (elementwise; the sum is taken).
    Real,
    /// A float scalar.
    Scalar,
    /// `softplus(x) + 0.25`: positive (but for an infinite or NaN `x`).
    Positive,
    /// `inv_logit(x)`: in [0, 1].
    Unit,
    /// `3 tanh(x)`: an angle in [-3, 3], inside [-pi, pi] (but for a NaN `x`).
    Angle,
    /// `abs(n) % 5`: a count (negative for `i64::MIN`).
    Count,
    /// `abs(n) % 3 + 1`: a category of three.
    Category,
    /// A `[f64; 3]`.
    Vector,
    /// A `[[f64; 3]; 3]` (only its lower triangle read).
    Lower,
    /// The size `3usize` of a matrix drawn: the call gives a
    /// `[[f64; 3]; 3]`, of which the element `[2][1]` is taken.
    Size,
}

/// Library functions generated in place of a [`LIBRARY`] function with
/// the same arguments, half the time it is chosen: `(of, twin)`. A twin
/// added here leaves every program that does not call `of` as it was, so
/// the fixed seeds of the tests keep their programs.
pub const LIBRARY_TWINS: [(&str, &str); 1] = [("von_mises_lcdf", "von_mises_lccdf")];

/// The library functions the generator calls, each giving an `f64`, and
/// their arguments. Their checks make some members fail with
/// `domain_error` (a scale of `inf`, a count of `i64::MIN`, a zero on the
/// diagonal of a factor), which every executor must report alike.
pub const LIBRARY: [(&str, &[LibraryArg]); 35] = {
    use LibraryArg::*;
    [
        ("normal_lpdf", &[Real, Real, Positive]),
        ("normal_lcdf", &[Real, Real, Positive]),
        ("student_t_lpdf", &[Real, Positive, Real, Positive]),
        ("cauchy_lupdf", &[Real, Real, Positive]),
        ("logistic_lccdf", &[Real, Real, Positive]),
        ("lognormal_lpdf", &[Positive, Real, Positive]),
        ("gamma_lpdf", &[Positive, Positive, Positive]),
        ("gamma_lcdf", &[Positive, Positive, Positive]),
        ("inv_gamma_lcdf", &[Positive, Positive, Positive]),
        ("chi_square_lccdf", &[Positive, Positive]),
        ("student_t_lcdf", &[Real, Positive, Real, Positive]),
        ("beta_lccdf", &[Unit, Positive, Positive]),
        ("bernoulli_lcdf", &[Count, Unit]),
        ("binomial_lcdf", &[Count, Count, Unit]),
        ("neg_binomial_2_lccdf", &[Count, Positive, Positive]),
        ("poisson_lccdf", &[Count, Positive]),
        ("exponential_lpdf", &[Positive, Positive]),
        ("von_mises_lpdf", &[Real, Real, Positive]),
        ("von_mises_lcdf", &[Angle, Real, Positive]),
        ("poisson_lpmf", &[Count, Positive]),
        ("binomial_logit_lpmf", &[Count, Count, Real]),
        ("categorical_logit_lpmf", &[Category, Vector]),
        ("multi_normal_cholesky_lpdf", &[Vector, Vector, Lower]),
        ("normal_rng", &[Scalar, Positive]),
        ("gamma_rng", &[Positive, Positive]),
        ("student_t_rng", &[Positive, Scalar, Positive]),
        ("von_mises_rng", &[Scalar, Positive]),
        ("lkj_corr_cholesky_rng", &[Size, Positive]),
        ("lbeta", &[Positive, Positive]),
        ("inc_beta", &[Positive, Positive, Unit]),
        ("lchoose", &[Positive, Positive]),
        ("log_sum_exp", &[Scalar, Scalar]),
        ("log1p_exp", &[Scalar]),
        ("log_inv_logit", &[Scalar]),
        ("log_mix", &[Unit, Scalar, Scalar]),
    ]
};

/// The limits of most cases (others get a small stack or step limit).
pub const USUAL_LIMITS: Limits = Limits {
    max_stack_depth: 64,
    max_steps: 20_000,
    seed: 0,
};

/// Calls one function body may write (a call inside a loop costs more).
const CALL_BUDGET: i32 = 7;

/// Whether the program of `seed` is a scalar program (about
/// [`SCALAR_PROGRAMS`] of the seeds): see [`Generator::scalar`]. Drawn from
/// a stream of its own, so that the other seeds give the programs they
/// gave before scalar programs existed.
pub fn scalar_program(seed: u64) -> bool {
    ChaCha8Rng::seed_from_u64(seed ^ SCALAR_STREAM).gen_bool(SCALAR_PROGRAMS)
}

/// Generates the case of `seed`.
pub fn generate(seed: u64) -> Case {
    let mut gen = Generator::new(seed);
    let program = gen.program();
    let inputs = gen.inputs(&program);
    let limits = gen.limits();
    let gradient = gen.gradient(&program);
    Case {
        program,
        inputs,
        limits,
        gradient,
        derived: std::mem::take(&mut gen.derived),
    }
}

struct Signature {
    name: String,
    params: Vec<Param>,
    ret: Ty,
    /// Per parameter: whether call sites usually pass it the static `W`
    /// (a weight passed as an argument, which every call site passing `W`
    /// makes invariant in the callee).
    weights: Vec<bool>,
}

struct Var {
    name: String,
    ty: Ty,
    assignable: bool,
    /// For an `i64` known to be in `0..L` (or `0..D`: the counter of a
    /// loop over it), that dimension: an index in bounds of every array of
    /// the member whose outer length it is.
    in_dim: Option<&'static str>,
}

impl Var {
    fn new(name: &str, ty: Ty, assignable: bool) -> Var {
        Var {
            name: name.to_owned(),
            ty,
            assignable,
            in_dim: None,
        }
    }
}

/// What a `break` inside the innermost loop must carry.
#[derive(Clone, Copy, PartialEq)]
enum LoopKind {
    Plain,
    Value(Ty),
}

/// The state of the function being written.
struct Scope {
    vars: Vec<Var>,
    /// Whether `d > 0` holds here, so that calls need no guard.
    guarded: bool,
    loops: Vec<LoopKind>,
    calls_left: i32,
    ret: Ty,
    /// How many expressions with statements inside (`if`, `loop`) enclose
    /// this point: expressions of statements get shallower with it, so
    /// that generation ends.
    nesting: u32,
    /// Index of the function being written.
    function: usize,
}

struct Generator {
    rng: ChaCha8Rng,
    signatures: Vec<Signature>,
    statics: Vec<Param>,
    /// The `usize` constants the program declares (counts of `pfor`).
    consts: Vec<(String, usize)>,
    /// The differentiable helpers `jacobian` may take (none in most programs).
    jacobian_targets: Vec<differentiable::Target>,
    /// The scalar helper `grad` may take (with a data argument), if any.
    grad_target: Option<String>,
    /// The helpers to run beside their derivatives.
    derived: Vec<crate::case::DerivedCase>,
    /// Whether the program has ragged arrays (`[i64; L]`, `[f64; L]`; the
    /// entry then takes at least one).
    ragged: bool,
    /// Whether the program also has the second ragged dimension `D`
    /// (the entry then takes an argument that fixes it).
    inner: bool,
    /// Whether some expression calls a host primitive ([`HOSTS`]).
    hosts: bool,
    /// Whether this is a *scalar program*, the programs the lock-step
    /// strategy (`native-lockstep`) compiles rather than leaving to an
    /// interpreter: every parameter, result, variable and intermediate
    /// value of every function is a scalar (`i64`, `f64`, `i32`, `usize`,
    /// `f32`, `bool`) or a pair of them, which the IR holds as scalars.
    /// Nothing makes an array: no array types, literals, elements,
    /// reductions, `len`, products or casts of arrays; no statics and no
    /// ragged inputs; no differentiable helpers (`grad`, `jacobian`); no
    /// forks (`join`, `map`, `pfor`), catching calls, random draws or host
    /// primitives. What stays: calls between the functions with the depth
    /// rule (recursion included), loops with `break`/`continue`, `if` and
    /// `while` on data, integer division and remainder (which fault),
    /// `assert!`, early returns, and the limits of [`Self::limits`].
    scalar: bool,
    /// The stream of the draws of [`FOLDED_SELF_CALLS`].
    folds: ChaCha8Rng,
    fresh: usize,
    /// The slices written so far (their forms go in turn, [`SLICE_FORMS`]).
    slices: usize,
    scope: Scope,
}

impl Generator {
    fn new(seed: u64) -> Generator {
        Generator {
            rng: ChaCha8Rng::seed_from_u64(seed),
            signatures: Vec::new(),
            statics: Vec::new(),
            consts: Vec::new(),
            jacobian_targets: Vec::new(),
            grad_target: None,
            derived: Vec::new(),
            ragged: false,
            inner: false,
            hosts: false,
            scalar: scalar_program(seed),
            folds: ChaCha8Rng::seed_from_u64(seed ^ FOLD_STREAM),
            fresh: 0,
            slices: 0,
            scope: Scope {
                vars: Vec::new(),
                guarded: false,
                loops: Vec::new(),
                calls_left: 0,
                ret: Ty::Int,
                nesting: 0,
                function: 0,
            },
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    /// An arm of `0..arms`: in a scalar program, never one of `arrays`
    /// (the arms that make or read an array, draw a random number, ...).
    /// Other programs draw once, as they always did.
    fn arm(&mut self, arms: u32, arrays: &[u32]) -> u32 {
        loop {
            let arm = self.rng.gen_range(0..arms);
            if !self.scalar || !arrays.contains(&arm) {
                return arm;
            }
        }
    }

    /// The types a variable may be assigned.
    fn assignable_types(&self) -> &'static [Ty] {
        if self.scalar {
            &SCALAR_VALUE_TYPES
        } else {
            &VALUE_TYPES
        }
    }

    fn value_type(&mut self) -> Ty {
        if self.scalar {
            return *SCALAR_VALUE_TYPES.choose(&mut self.rng).unwrap_or(&Ty::Int);
        }
        if self.inner && self.chance(0.15) {
            return *INNER_RAGGED_TYPES
                .choose(&mut self.rng)
                .unwrap_or(&Ty::ColsRagged);
        }
        let types: &[Ty] = if self.ragged {
            &RAGGED_VALUE_TYPES
        } else {
            &VALUE_TYPES
        };
        *types.choose(&mut self.rng).unwrap_or(&Ty::Int)
    }

    /// A ragged array type.
    fn ragged_type(&mut self) -> Ty {
        *[
            Ty::IntRagged,
            Ty::FloatRagged,
            Ty::FloatRagged,
            Ty::RowsRagged,
        ]
        .choose(&mut self.rng)
        .unwrap_or(&Ty::FloatRagged)
    }

    // ---- program, functions ----

    fn program(&mut self) -> Program {
        // A scalar program has no ragged arrays, statics or helpers.
        self.ragged = !self.scalar && self.chance(RAGGED_PROGRAMS);
        self.inner = self.ragged && self.chance(INNER_RAGGED_PROGRAMS);
        if !self.scalar && self.chance(0.3) {
            self.statics = vec![
                Param {
                    name: "W".into(),
                    ty: Ty::FloatArray,
                },
                Param {
                    name: "K".into(),
                    ty: Ty::Int,
                },
                Param {
                    name: "M".into(),
                    ty: Ty::Matrix,
                },
                Param {
                    name: "MS".into(),
                    ty: Ty::MatrixStack,
                },
            ];
        }
        let count = if self.chance(0.1) {
            1
        } else {
            self.rng.gen_range(2..=4)
        };
        for index in 0..count {
            let signature = self.signature(index);
            self.signatures.push(signature);
        }
        let helpers = if !self.scalar && self.chance(0.3) {
            let weight = self.statics.iter().any(|s| s.name == "W");
            differentiable::helpers(&mut self.rng, weight)
        } else {
            differentiable::Helpers::none()
        };
        self.jacobian_targets = helpers.targets;
        self.grad_target = helpers.scalar;
        self.derived = helpers.derived;
        let mut functions: Vec<Function> = (0..count).map(|index| self.function(index)).collect();
        functions.extend(helpers.functions);
        Program {
            consts: self.consts.clone(),
            statics: self.statics.clone(),
            functions,
            hosts: self.hosts,
        }
    }

    fn signature(&mut self, index: usize) -> Signature {
        let name = if index == 0 {
            ENTRY.to_owned()
        } else {
            format!("f{index}")
        };
        let mut params = vec![Param {
            name: "d".into(),
            ty: Ty::Int,
        }];
        let extra = self.rng.gen_range(usize::from(index == 0)..=3);
        for p in 0..extra {
            let ty = self.value_type();
            params.push(Param {
                name: format!("p{p}"),
                ty,
            });
        }
        if index == 0 && self.ragged && !params.iter().any(|p| p.ty.is_ragged()) {
            // `L` is fixed by the entry's arguments only.
            let ty = self.ragged_type();
            params.push(Param {
                name: format!("p{}", params.len() - 1),
                ty,
            });
        }
        let fixes_d = |ty: Ty| INNER_RAGGED_TYPES.contains(&ty);
        if index == 0 && self.inner && !params.iter().any(|p| fixes_d(p.ty)) {
            // So is `D`.
            let ty = *INNER_RAGGED_TYPES
                .choose(&mut self.rng)
                .unwrap_or(&Ty::ColsRagged);
            params.push(Param {
                name: format!("p{}", params.len() - 1),
                ty,
            });
        }
        let ret = self.value_type();
        let has_weight = self.statics.iter().any(|s| s.name == "W");
        let weights = params
            .iter()
            .map(|p| has_weight && index > 0 && p.ty == Ty::FloatArray && self.chance(0.6))
            .collect();
        Signature {
            name,
            params,
            ret,
            weights,
        }
    }

    fn function(&mut self, index: usize) -> Function {
        let signature = &self.signatures[index];
        let (name, params, ret) = (
            signature.name.clone(),
            signature.params.clone(),
            signature.ret,
        );
        let mut vars: Vec<Var> = params
            .iter()
            .map(|p| Var::new(&p.name, p.ty, false))
            .collect();
        vars.extend(self.statics.iter().map(|s| Var::new(&s.name, s.ty, false)));
        self.scope = Scope {
            vars,
            guarded: false,
            loops: Vec::new(),
            calls_left: CALL_BUDGET,
            ret,
            nesting: 0,
            function: index,
        };
        let body = self.function_body(ret);
        Function {
            name,
            params,
            ret,
            body,
        }
    }

    /// One of three shapes: an early `return` for `d <= 0`; an `if d <= 0`
    /// expression as the tail; or no guard (every call guarded on its own).
    fn function_body(&mut self, ret: Ty) -> Block {
        let d_le_0 = Expr::binary(Ty::Bool, BinOp::Le, Expr::var("d", Ty::Int), Expr::int(0));
        match self.rng.gen_range(0..3) {
            0 => {
                let base = self.expr(ret, 2);
                let mut stmts = vec![Stmt::ReturnIf {
                    cond: d_le_0,
                    value: base,
                }];
                self.scope.guarded = true;
                stmts.extend(self.stmts(3, 2..6));
                Block {
                    stmts,
                    tail: self.expr(ret, 3),
                }
            }
            1 => {
                let stmts = self.stmts(1, 0..3);
                let base = Block {
                    stmts: Vec::new(),
                    tail: self.expr(ret, 2),
                };
                self.scope.guarded = true;
                let mut recursive = self.block(ret, 3, 1..5);
                if ret == Ty::Int && self.folds.gen_bool(FOLDED_SELF_CALLS) {
                    recursive.tail = self.folded_self_call(recursive.tail);
                }
                let tail = Expr::new(
                    ret,
                    ExprKind::If {
                        cond: Box::new(d_le_0),
                        then: Box::new(base),
                        otherwise: Box::new(recursive),
                    },
                );
                Block { stmts, tail }
            }
            _ => {
                let stmts = self.stmts(3, 2..6);
                Block {
                    stmts,
                    tail: self.expr(ret, 3),
                }
            }
        }
    }

    // ---- statements ----

    /// A block with its own scope.
    fn block(&mut self, ty: Ty, depth: u32, count: std::ops::Range<usize>) -> Block {
        let mark = self.scope.vars.len();
        let stmts = self.stmts(depth, count);
        let tail = self.expr(ty, depth.min(2));
        self.scope.vars.truncate(mark);
        Block { stmts, tail }
    }

    /// Statements whose declarations end with them.
    fn scoped_stmts(&mut self, depth: u32, count: std::ops::Range<usize>) -> Vec<Stmt> {
        let mark = self.scope.vars.len();
        let stmts = self.stmts(depth, count);
        self.scope.vars.truncate(mark);
        stmts
    }

    fn stmts(&mut self, depth: u32, count: std::ops::Range<usize>) -> Vec<Stmt> {
        let n = if count.is_empty() {
            count.start
        } else {
            self.rng.gen_range(count)
        };
        (0..n).map(|_| self.stmt(depth)).collect()
    }

    fn stmt(&mut self, depth: u32) -> Stmt {
        let in_loop = !self.scope.loops.is_empty();
        loop {
            let stmt = match self.rng.gen_range(0..20) {
                0..=5 => Some(self.let_stmt()),
                6..=8 => self.assign_stmt(),
                9 if !self.scalar => self.set_index_stmt(),
                10 | 11 if depth > 0 => Some(self.if_stmt(depth)),
                12 if depth > 0 => Some(self.while_stmt(depth)),
                13 if depth > 0 => Some(self.for_stmt(depth)),
                14 | 15 if in_loop => Some(self.break_or_continue()),
                16 => Some(self.return_if()),
                17 => Some(self.assert_stmt()),
                _ => None,
            };
            if let Some(stmt) = stmt {
                return stmt;
            }
        }
    }

    /// `depth` less the nesting of statement-holding expressions.
    fn stmt_expr_depth(&self, depth: u32) -> u32 {
        depth.saturating_sub(self.scope.nesting)
    }

    fn let_stmt(&mut self) -> Stmt {
        let ty = self.value_type();
        let value = self.expr(ty, self.stmt_expr_depth(3));
        let name = self.fresh("v");
        self.scope.vars.push(Var::new(&name, ty, true));
        Stmt::Let { name, value }
    }

    fn assignable(&mut self, wanted: &[Ty]) -> Option<(String, Ty)> {
        let candidates: Vec<(String, Ty)> = self
            .scope
            .vars
            .iter()
            .filter(|v| v.assignable && wanted.contains(&v.ty))
            .map(|v| (v.name.clone(), v.ty))
            .collect();
        candidates.choose(&mut self.rng).cloned()
    }

    fn assign_stmt(&mut self) -> Option<Stmt> {
        let (name, ty) = self.assignable(self.assignable_types())?;
        let op = match ty {
            Ty::Int
            | Ty::Float
            | Ty::IntArray
            | Ty::FloatArray
            | Ty::I32
            | Ty::Usize
            | Ty::F32
            | Ty::F32Array
            | Ty::IntRagged
            | Ty::FloatRagged
            | Ty::F32Ragged
            | Ty::RowsRagged => *[AssignOp::Set, AssignOp::Add, AssignOp::Sub, AssignOp::Mul]
                .choose(&mut self.rng)?,
            _ => AssignOp::Set,
        };
        let value = self.expr(ty, self.stmt_expr_depth(3));
        let slice = match ty {
            Ty::IntArray | Ty::FloatArray | Ty::F32Array => self.slice_place(ty),
            _ => None,
        };
        Some(Stmt::Assign {
            name,
            op,
            value,
            slice,
        })
    }

    /// How an assignment to an array of the fixed-length type `ty` writes
    /// its place: every other one through slices, the range's forms in
    /// turn; of those, four as the whole slice, then four in two parts
    /// split at a point that moves along the array, and so on. No draw, so
    /// every later draw of the seed is as it would be without slices.
    fn slice_place(&mut self, ty: Ty) -> Option<SlicePlace> {
        self.slices += 1;
        if !self.slices.is_multiple_of(2) {
            return None;
        }
        let turn = self.slices / 2;
        let form = SLICE_FORMS[turn % SLICE_FORMS.len()];
        if (turn / SLICE_FORMS.len()).is_multiple_of(2) {
            return Some(SlicePlace::Whole(form));
        }
        Some(SlicePlace::Split {
            form,
            at: 1 + turn % (fixed_len(ty) - 1),
            temp: format!("part{}", self.slices),
        })
    }

    fn set_index_stmt(&mut self) -> Option<Stmt> {
        let (name, ty) = self.assignable(&[
            Ty::IntArray,
            Ty::FloatArray,
            Ty::F32Array,
            Ty::IntRagged,
            Ty::FloatRagged,
            Ty::F32Ragged,
            Ty::RowsRagged,
            Ty::ColsRagged,
            Ty::GridRagged,
        ])?;
        let element = ty.element();
        let index = self.index(ty, 1);
        let value = self.expr(element, self.stmt_expr_depth(2));
        let op = *[
            AssignOp::Set,
            AssignOp::Set,
            AssignOp::Add,
            AssignOp::Sub,
            AssignOp::Mul,
        ]
        .choose(&mut self.rng)?;
        Some(Stmt::SetIndex {
            name,
            index,
            op,
            value,
        })
    }

    fn if_stmt(&mut self, depth: u32) -> Stmt {
        let cond = self.bool_expr(self.stmt_expr_depth(2));
        let then = self.scoped_stmts(depth - 1, 1..4);
        let otherwise = self.scoped_stmts(depth - 1, 0..3);
        Stmt::If {
            cond,
            then,
            otherwise,
        }
    }

    /// Runs `f` as if outside every loop: for expressions printed inside a
    /// loop's own header (a `while` condition, a `loop`'s exit test and
    /// value), where a `break` or `continue` would act on that loop.
    fn outside_loops<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let loops = std::mem::take(&mut self.scope.loops);
        let out = f(self);
        self.scope.loops = loops;
        out
    }

    /// A loop bound: a small constant or `(e % 4)` (at most 3 iterations).
    fn loop_bound(&mut self) -> Expr {
        if self.chance(0.5) {
            Expr::int(self.rng.gen_range(0..=3))
        } else {
            let e = self.expr(Ty::Int, 1);
            Expr::binary(Ty::Int, BinOp::Rem, e, Expr::int(4))
        }
    }

    /// The body of a loop; calls in it cost three times as much.
    fn loop_body(&mut self, kind: LoopKind, depth: u32) -> Vec<Stmt> {
        self.scope.loops.push(kind);
        self.scope.calls_left -= 1;
        let body = self.scoped_stmts(depth, 1..5);
        self.scope.loops.pop();
        body
    }

    fn while_stmt(&mut self, depth: u32) -> Stmt {
        let limit = self.outside_loops(Self::loop_bound);
        let counter = self.fresh("c");
        self.scope.vars.push(Var::new(&counter, Ty::Int, false));
        let body = self.loop_body(LoopKind::Plain, depth - 1);
        Stmt::While {
            counter,
            limit,
            body,
        }
    }

    /// `for i in -1..bound`, or in a program with ragged arrays sometimes
    /// `for i in 0..(xs.len() as i64)` (or `0..(L as i64)`, or the same
    /// over `D`), whose `i` is in bounds of every array of the member of
    /// that outer length.
    fn for_stmt(&mut self, depth: u32) -> Stmt {
        let over_d = self.inner && self.chance(0.25);
        let over_l = !over_d && self.ragged && self.chance(0.5);
        let (start, end) = if over_l {
            (Expr::int(0), self.length())
        } else if over_d {
            (Expr::int(0), self.inner_length())
        } else {
            (Expr::int(self.rng.gen_range(-1..=1)), self.loop_bound())
        };
        let var = self.fresh("i");
        let mark = self.scope.vars.len();
        self.scope.vars.push(Var {
            in_dim: if over_l {
                Some(RAGGED_DIM)
            } else {
                over_d.then_some(INNER_RAGGED_DIM)
            },
            ..Var::new(&var, Ty::Int, false)
        });
        let body = self.loop_body(LoopKind::Plain, depth - 1);
        self.scope.vars.truncate(mark);
        Stmt::For {
            var,
            start,
            end,
            body,
        }
    }

    fn break_or_continue(&mut self) -> Stmt {
        let cond = self.bool_expr(1);
        if self.chance(0.3) {
            return Stmt::ContinueIf { cond };
        }
        let value = match self.scope.loops.last() {
            Some(LoopKind::Value(ty)) => Some(self.expr(*ty, self.stmt_expr_depth(2))),
            _ => None,
        };
        Stmt::BreakIf { cond, value }
    }

    fn return_if(&mut self) -> Stmt {
        let cond = self.bool_expr(1);
        let value = self.expr(self.scope.ret, self.stmt_expr_depth(2));
        Stmt::ReturnIf { cond, value }
    }

    fn assert_stmt(&mut self) -> Stmt {
        let e = self.expr(Ty::Int, self.stmt_expr_depth(2));
        let unlucky = Expr::int(self.rng.gen_range(4..=9));
        Stmt::Assert {
            cond: Expr::binary(Ty::Bool, BinOp::Ne, e, unlucky),
        }
    }

    // ---- expressions ----

    fn expr(&mut self, ty: Ty, depth: u32) -> Expr {
        if depth == 0 || self.chance(0.2) {
            return self.leaf(ty);
        }
        loop {
            let made = match self.rng.gen_range(0..7) {
                // A scalar program forks nothing: plain calls only.
                0 | 6 if self.scalar => self.call(ty, depth),
                0 | 6 => match self.rng.gen_range(0..10) {
                    0 | 1 => self.join_expr(ty, depth),
                    2 | 3 => self.instances_expr(ty, depth),
                    4 => self.jacobian_expr(ty, depth),
                    _ => self.call(ty, depth),
                },
                1 => Some(self.if_expr(ty, depth)),
                2 if depth >= 2 && self.chance(0.3) => Some(self.loop_expr(ty, depth)),
                _ => self.typed_expr(ty, depth),
            };
            if let Some(e) = made {
                return e;
            }
        }
    }

    fn typed_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        match ty {
            Ty::Int => self.int_expr(depth),
            Ty::Float => self.float_expr(depth),
            Ty::Bool => Some(self.bool_expr(depth)),
            Ty::IntArray | Ty::FloatArray => self.array_expr(ty, depth),
            Ty::I32 | Ty::Usize => self.small_int_expr(ty, depth),
            Ty::F32 => self.f32_expr(depth),
            Ty::F32Array => self.f32_array_expr(depth),
            Ty::BoolArray => self.bool_array_expr(depth),
            Ty::Pair => self.pair_expr(depth),
            Ty::IntRagged | Ty::FloatRagged | Ty::F32Ragged => self.ragged_expr(ty, depth),
            Ty::RowsRagged | Ty::GridRagged => self.rows_expr(ty, depth),
            Ty::ColsRagged => self.cols_expr(depth),
            Ty::Matrix | Ty::F32Matrix => self.matrix_expr(ty, depth),
            // Only the static `MS`; only the coefficients of ODE calls.
            Ty::MatrixStack | Ty::TwoRows | Ty::ScaledArray => Some(self.leaf(ty)),
        }
    }

    /// A constant or a variable of type `ty`.
    fn leaf(&mut self, ty: Ty) -> Expr {
        let names: Vec<String> = self
            .scope
            .vars
            .iter()
            .filter(|v| v.ty == ty)
            .map(|v| v.name.clone())
            .collect();
        match names.choose(&mut self.rng) {
            Some(name) if self.chance(0.7) => Expr::var(name, ty),
            _ => self.literal(ty),
        }
    }

    fn literal(&mut self, ty: Ty) -> Expr {
        let kind = match ty {
            Ty::Int => ExprKind::Int(self.rng.gen_range(-4..=9)),
            Ty::Float | Ty::F32 => ExprKind::Float(f64::from(self.rng.gen_range(-12..=12)) * 0.25),
            Ty::I32 => ExprKind::Int(self.rng.gen_range(-4..=9)),
            // A negative `usize` literal is an error.
            Ty::Usize => ExprKind::Int(self.rng.gen_range(0..=9)),
            Ty::F32Array | Ty::BoolArray | Ty::F32Matrix => ExprKind::Array(
                (0..FLOAT_ARRAY_LEN)
                    .map(|_| self.literal(ty.element()))
                    .collect(),
            ),
            Ty::Bool => ExprKind::Bool(self.chance(0.5)),
            Ty::IntArray => {
                ExprKind::Array((0..INT_ARRAY_LEN).map(|_| self.literal(Ty::Int)).collect())
            }
            Ty::FloatArray => ExprKind::Array(
                (0..FLOAT_ARRAY_LEN)
                    .map(|_| self.literal(Ty::Float))
                    .collect(),
            ),
            Ty::Pair => ExprKind::Pair(
                Box::new(self.literal(Ty::Int)),
                Box::new(self.literal(Ty::Float)),
            ),
            Ty::IntRagged
            | Ty::FloatRagged
            | Ty::F32Ragged
            | Ty::RowsRagged
            | Ty::ColsRagged
            | Ty::GridRagged => ExprKind::Fill(Box::new(self.literal(ty.element()))),
            Ty::Matrix => ExprKind::Array(
                (0..FLOAT_ARRAY_LEN)
                    .map(|_| self.literal(Ty::FloatArray))
                    .collect(),
            ),
            Ty::MatrixStack => ExprKind::Array(
                (0..MATRIX_STACK_LEN)
                    .map(|_| self.literal(Ty::Matrix))
                    .collect(),
            ),
            Ty::TwoRows => ExprKind::Array(
                (0..ODE_ROWS)
                    .map(|_| self.literal(Ty::FloatArray))
                    .collect(),
            ),
            Ty::ScaledArray => ExprKind::Pair(
                Box::new(self.literal(Ty::Float)),
                Box::new(self.literal(Ty::FloatArray)),
            ),
        };
        Expr::new(ty, kind)
    }

    fn builtin(&mut self, ty: Ty, builtin: Builtin, args: Vec<Expr>) -> Expr {
        Expr::new(ty, ExprKind::Builtin { builtin, args })
    }

    fn int_expr(&mut self, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        if self.ragged && self.chance(0.2) {
            return self.ragged_scalar(Ty::Int, sub);
        }
        // Not in a scalar program: an element, `sum`, `argmax`.
        let e = match self.arm(12, &[8, 10]) {
            0..=2 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(
                    Ty::Int,
                    op,
                    self.expr(Ty::Int, sub),
                    self.expr(Ty::Int, sub),
                )
            }
            3 => {
                // May divide by zero: an error for some members only.
                let op = *[BinOp::Div, BinOp::Rem].choose(&mut self.rng)?;
                let mut rhs = self.expr(Ty::Int, sub);
                if self.chance(0.5) {
                    rhs = Expr::binary(Ty::Int, BinOp::Rem, rhs, Expr::int(3));
                }
                Expr::binary(Ty::Int, op, self.expr(Ty::Int, sub), rhs)
            }
            4 => self.bitwise_expr(Ty::Int, Ty::I32, sub)?,
            5 => {
                // `-x`, or bitwise `!x`.
                let op = *[UnOp::Neg, UnOp::Neg, UnOp::Not].choose(&mut self.rng)?;
                let operand = Box::new(self.expr(Ty::Int, sub));
                Expr::new(Ty::Int, ExprKind::Unary { op, operand })
            }
            6 => {
                let builtin = *[Builtin::Abs, Builtin::Min, Builtin::Max].choose(&mut self.rng)?;
                let mut args = vec![self.expr(Ty::Int, sub)];
                if builtin != Builtin::Abs {
                    args.push(self.expr(Ty::Int, sub));
                }
                self.builtin(Ty::Int, builtin, args)
            }
            7 => {
                let operand = Box::new(self.expr(Ty::Float, sub));
                Expr::new(Ty::Int, ExprKind::Cast { operand })
            }
            8 => self.index_expr(Ty::IntArray, sub),
            9 => {
                let pair = Box::new(self.expr(Ty::Pair, sub));
                Expr::new(Ty::Int, ExprKind::Field { pair, field: 0 })
            }
            10 if self.chance(0.5) => {
                let array = self.expr(Ty::IntArray, sub);
                self.builtin(Ty::Int, Builtin::Sum, vec![array])
            }
            10 => {
                // `argmax`/`argmin` give a `usize`.
                let builtin = *[Builtin::Argmax, Builtin::Argmin].choose(&mut self.rng)?;
                let ty = *[Ty::FloatArray, Ty::IntArray, Ty::F32Array].choose(&mut self.rng)?;
                let array = self.expr(ty, sub);
                let arg = self.builtin(Ty::Usize, builtin, vec![array]);
                Expr::new(
                    Ty::Int,
                    ExprKind::Cast {
                        operand: Box::new(arg),
                    },
                )
            }
            _ => self.leaf(Ty::Int),
        };
        Some(e)
    }

    /// `& | ^ << >>` of two integers of type `ty`; a shift's amount is
    /// sometimes of type `amount` (any integer type may shift any).
    fn bitwise_expr(&mut self, ty: Ty, amount: Ty, sub: u32) -> Option<Expr> {
        let op = *[
            BinOp::BitAnd,
            BinOp::BitOr,
            BinOp::BitXor,
            BinOp::Shl,
            BinOp::Shr,
        ]
        .choose(&mut self.rng)?;
        let amount_ty = if matches!(op, BinOp::Shl | BinOp::Shr) && self.chance(0.3) {
            amount
        } else {
            ty
        };
        Some(Expr::binary(
            ty,
            op,
            self.expr(ty, sub),
            self.expr(amount_ty, sub),
        ))
    }

    /// A call of one of the [`HOSTS`] on float expressions.
    fn host_call(&mut self, sub: u32) -> Expr {
        let (name, _, arity) = HOSTS[self.rng.gen_range(0..HOSTS.len())];
        let args = (0..arity).map(|_| self.expr(Ty::Float, sub)).collect();
        self.hosts = true;
        Expr::new(Ty::Float, ExprKind::HostCall { name, args })
    }

    /// A call of one of the [`LIBRARY`] functions (or of a [`LIBRARY_TWINS`]
    /// twin of the one chosen, half the time).
    fn library_call(&mut self, sub: u32) -> Option<Expr> {
        let (mut name, params) = *LIBRARY.choose(&mut self.rng)?;
        if let Some(&(_, twin)) = LIBRARY_TWINS.iter().find(|(of, _)| *of == name) {
            if self.chance(0.5) {
                name = twin;
            }
        }
        // `_rng` and the special functions are elementwise: scalars only.
        let sums = name.contains("_lp") || name.contains("_lc") || name.contains("_lu");
        let mut args = Vec::new();
        for &param in params {
            let arg = match param {
                LibraryArg::Real if sums && self.chance(0.3) => self.expr(Ty::FloatArray, sub),
                LibraryArg::Real | LibraryArg::Scalar => self.expr(Ty::Float, sub),
                LibraryArg::Positive => {
                    let x = self.expr(Ty::Float, sub);
                    let soft = self.builtin(Ty::Float, Builtin::Softplus, vec![x]);
                    let quarter = Expr::new(Ty::Float, ExprKind::Float(0.25));
                    Expr::binary(Ty::Float, BinOp::Add, soft, quarter)
                }
                LibraryArg::Unit => {
                    let x = self.expr(Ty::Float, sub);
                    self.builtin(Ty::Float, Builtin::Sigmoid, vec![x])
                }
                LibraryArg::Angle => {
                    let x = self.expr(Ty::Float, sub);
                    let t = self.builtin(Ty::Float, Builtin::Tanh, vec![x]);
                    let three = Expr::new(Ty::Float, ExprKind::Float(3.0));
                    Expr::binary(Ty::Float, BinOp::Mul, three, t)
                }
                LibraryArg::Count | LibraryArg::Category => {
                    let n = self.expr(Ty::Int, sub);
                    let abs = self.builtin(Ty::Int, Builtin::Abs, vec![n]);
                    let three = matches!(param, LibraryArg::Category);
                    let k = Expr::binary(
                        Ty::Int,
                        BinOp::Rem,
                        abs,
                        Expr::int(if three { 3 } else { 5 }),
                    );
                    if three {
                        Expr::binary(Ty::Int, BinOp::Add, k, Expr::int(1))
                    } else {
                        k
                    }
                }
                LibraryArg::Vector => self.expr(Ty::FloatArray, sub),
                LibraryArg::Lower => self.expr(Ty::Matrix, sub),
                LibraryArg::Size => Expr::new(Ty::Usize, ExprKind::Int(3)),
            };
            args.push(arg);
        }
        if !params.iter().any(|p| matches!(p, LibraryArg::Size)) {
            return Some(Expr::new(Ty::Float, ExprKind::Library { name, args }));
        }
        let matrix = Expr::new(Ty::Matrix, ExprKind::Library { name, args });
        let row = Expr::new(
            Ty::FloatArray,
            ExprKind::Index {
                array: Box::new(matrix),
                index: Box::new(Expr::int(2)),
            },
        );
        Some(Expr::new(
            Ty::Float,
            ExprKind::Index {
                array: Box::new(row),
                index: Box::new(Expr::int(1)),
            },
        ))
    }

    fn float_expr(&mut self, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        if self.ragged && self.chance(0.2) {
            return self.ragged_scalar(Ty::Float, sub);
        }
        if !self.scalar && self.chance(HOST_CALLS) {
            return Some(self.host_call(sub));
        }
        if !self.scalar && self.chance(LIBRARY_CALLS) {
            return self.library_call(sub);
        }
        // Not in a scalar program: an element, `sum`/`max`, `dot`, draws.
        let e = match self.arm(12, &[5, 7, 8, 9, 10]) {
            0..=2 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div].choose(&mut self.rng)?;
                Expr::binary(
                    Ty::Float,
                    op,
                    self.expr(Ty::Float, sub),
                    self.expr(Ty::Float, sub),
                )
            }
            3 => self.float_builtin(Ty::Float, sub)?,
            4 => {
                let from =
                    *[Ty::Int, Ty::Int, Ty::F32, Ty::I32, Ty::Usize].choose(&mut self.rng)?;
                let operand = Box::new(self.expr(from, sub));
                Expr::new(Ty::Float, ExprKind::Cast { operand })
            }
            5 => self.index_expr(Ty::FloatArray, sub),
            6 => {
                let pair = Box::new(self.expr(Ty::Pair, sub));
                Expr::new(Ty::Float, ExprKind::Field { pair, field: 1 })
            }
            7 => {
                let builtin = *[Builtin::Sum, Builtin::ReduceMax].choose(&mut self.rng)?;
                let array = self.expr(Ty::FloatArray, sub);
                self.builtin(Ty::Float, builtin, vec![array])
            }
            8 => {
                let (a, b) = (
                    self.expr(Ty::FloatArray, sub),
                    self.expr(Ty::FloatArray, sub),
                );
                self.builtin(Ty::Float, Builtin::Dot, vec![a, b])
            }
            9 | 10 if self.chance(0.8) => {
                let builtin = *[Builtin::Uniform, Builtin::Normal].choose(&mut self.rng)?;
                self.builtin(Ty::Float, builtin, Vec::new())
            }
            9 | 10 => {
                // Draws shaped like their operand (an `i64` gives an `f64`).
                let builtin = *[Builtin::UniformLike, Builtin::NormalLike].choose(&mut self.rng)?;
                let like = *[Ty::Float, Ty::Int].choose(&mut self.rng)?;
                let x = self.expr(like, sub);
                self.builtin(Ty::Float, builtin, vec![x])
            }
            _ => {
                let operand = Box::new(self.expr(Ty::Float, sub));
                Expr::new(
                    Ty::Float,
                    ExprKind::Unary {
                        op: UnOp::Neg,
                        operand,
                    },
                )
            }
        };
        Some(e)
    }

    fn bool_expr(&mut self, depth: u32) -> Expr {
        let sub = depth.saturating_sub(1);
        match self.rng.gen_range(0..8) {
            0 if depth > 0 => {
                // `&&`, `||`, or `& | ^` on `bool` (both sides evaluated).
                let op = *[
                    BinOp::And,
                    BinOp::Or,
                    BinOp::And,
                    BinOp::Or,
                    BinOp::BitAnd,
                    BinOp::BitOr,
                    BinOp::BitXor,
                ]
                .choose(&mut self.rng)
                .unwrap_or(&BinOp::And);
                Expr::binary(Ty::Bool, op, self.bool_expr(sub), self.bool_expr(sub))
            }
            1 if depth > 0 => {
                let operand = Box::new(self.bool_expr(sub));
                Expr::new(
                    Ty::Bool,
                    ExprKind::Unary {
                        op: UnOp::Not,
                        operand,
                    },
                )
            }
            // An element of a `[bool; 3]`, a draw: not in a scalar program.
            2 if !self.scalar && depth > 0 && self.chance(0.3) => {
                self.index_expr(Ty::BoolArray, sub)
            }
            // A scalar program has `bool` variables too.
            2 if self.scalar => self.leaf(Ty::Bool),
            2 => self.literal(Ty::Bool),
            3 if !self.scalar && self.chance(0.1) => {
                let p = self.expr(Ty::Float, sub);
                self.builtin(Ty::Bool, Builtin::Bernoulli, vec![p])
            }
            3 if self.chance(0.3) => {
                let builtin = *[Builtin::IsNan, Builtin::IsFinite]
                    .choose(&mut self.rng)
                    .unwrap_or(&Builtin::IsNan);
                let ty = if self.chance(0.7) { Ty::Float } else { Ty::F32 };
                let x = self.expr(ty, sub);
                self.builtin(Ty::Bool, builtin, vec![x])
            }
            k => {
                let ty = match (k, self.rng.gen_range(0..6)) {
                    (_, 0) => Ty::F32,
                    (_, 1) => Ty::I32,
                    (_, 2) => Ty::Usize,
                    (k, _) if k % 2 == 0 => Ty::Float,
                    _ => Ty::Int,
                };
                let ops = [
                    BinOp::Lt,
                    BinOp::Le,
                    BinOp::Gt,
                    BinOp::Ge,
                    BinOp::Eq,
                    BinOp::Ne,
                ];
                let op = *ops.choose(&mut self.rng).unwrap_or(&BinOp::Lt);
                Expr::binary(Ty::Bool, op, self.expr(ty, sub), self.expr(ty, sub))
            }
        }
    }

    fn array_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        if ty == Ty::FloatArray && self.ragged && self.chance(0.2) {
            // A row of `[[f64; 3]; L]`, or `vecmat` contracting over `L`.
            if self.chance(0.5) {
                return Some(self.index_expr(Ty::RowsRagged, sub));
            }
            let (v, m) = (
                self.expr(Ty::FloatRagged, sub),
                self.expr(Ty::RowsRagged, sub),
            );
            return Some(self.builtin(ty, Builtin::Vecmat, vec![v, m]));
        }
        if ty == Ty::FloatArray && self.chance(0.1) {
            return Some(self.matrix_product(Ty::Matrix, sub));
        }
        if ty == Ty::FloatArray && self.chance(0.1) {
            // A `[f32; 3]` widened element by element.
            let operand = Box::new(self.expr(Ty::F32Array, sub));
            return Some(Expr::new(ty, ExprKind::Cast { operand }));
        }
        let (element, len) = if ty == Ty::IntArray {
            (Ty::Int, INT_ARRAY_LEN)
        } else {
            (Ty::Float, FLOAT_ARRAY_LEN)
        };
        let e = match self.rng.gen_range(0..6) {
            0 => Expr::new(
                ty,
                ExprKind::Array((0..len).map(|_| self.expr(element, sub)).collect()),
            ),
            1 => {
                // The same items as a slice of a longer array, with a zero
                // before them (after them for `[..len]`), the range's form
                // taken in turn: no further draw, so the value and every
                // later draw are as they were before slices existed.
                let form = SLICE_FORMS[self.slices % SLICE_FORMS.len()];
                self.slices += 1;
                let drawn: Vec<Expr> = (0..len).map(|_| self.expr(element, sub)).collect();
                let (items, start) = if form == SliceForm::Prefix {
                    (drawn.into_iter().chain([element.zero()]).collect(), 0)
                } else {
                    (std::iter::once(element.zero()).chain(drawn).collect(), 1)
                };
                Expr::new(
                    ty,
                    ExprKind::Slice {
                        items,
                        start,
                        len,
                        form,
                    },
                )
            }
            2 => {
                let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul];
                if ty == Ty::IntArray {
                    // Elementwise bitwise operations and shifts.
                    ops.extend([BinOp::BitAnd, BinOp::BitXor, BinOp::Shl, BinOp::Shr]);
                }
                let op = *ops.choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => {
                let op = *[BinOp::Add, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(element, sub))
            }
            4 if ty == Ty::FloatArray && self.chance(0.5) => {
                let array = self.expr(ty, sub);
                self.builtin(ty, Builtin::Softmax, vec![array])
            }
            4 if ty == Ty::FloatArray => self.float_builtin(ty, sub)?,
            _ if ty == Ty::FloatArray => {
                let args = vec![
                    self.select_condition(sub),
                    self.expr(ty, sub),
                    self.expr(ty, sub),
                ];
                self.builtin(ty, Builtin::Select, args)
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// An elementwise float builtin on a float or float array of type
    /// `ty`: a map of one operand ([`FLOAT_MAPS`]), `min`/`max`/`powf` of
    /// two, `powi` by an `i32`.
    fn float_builtin(&mut self, ty: Ty, sub: u32) -> Option<Expr> {
        let e = match self.rng.gen_range(0..6) {
            0 => {
                let builtin = *[Builtin::Min, Builtin::Max, Builtin::Powf, Builtin::Atan2]
                    .choose(&mut self.rng)?;
                let args = vec![self.expr(ty, sub), self.expr(ty, sub)];
                self.builtin(ty, builtin, args)
            }
            1 if self.chance(0.5) => {
                let args = vec![self.expr(ty, sub), self.expr(Ty::I32, sub)];
                self.builtin(ty, Builtin::Powi, args)
            }
            _ => {
                let builtin = *FLOAT_MAPS.choose(&mut self.rng)?;
                let args = vec![self.expr(ty, sub)];
                self.builtin(ty, builtin, args)
            }
        };
        Some(e)
    }

    /// An `i32` or a `usize`: wrapping arithmetic, division (by zero: a
    /// member's error), bitwise operations and shifts, `abs` (not of a
    /// `usize`)/`min`/`max`/`pow`, casts from `i64` (wrapping), `f64` and
    /// `f32` (saturating), negation (`-` of an `i32`, bitwise `!`).
    fn small_int_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let signed = ty == Ty::I32;
        let sub = depth - 1;
        let e = match self.rng.gen_range(0..8) {
            0 | 1 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            2 => {
                let op = *[BinOp::Div, BinOp::Rem].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => self.bitwise_expr(ty, Ty::Int, sub)?,
            4 => {
                let builtins: &[Builtin] = if signed {
                    &[Builtin::Abs, Builtin::Min, Builtin::Max, Builtin::Pow]
                } else {
                    &[Builtin::Min, Builtin::Max, Builtin::Pow]
                };
                let builtin = *builtins.choose(&mut self.rng)?;
                let mut args = vec![self.expr(ty, sub)];
                match builtin {
                    Builtin::Abs => {}
                    // Any integer type, taken as `u32` (wrapping).
                    Builtin::Pow => args.push(self.expr(Ty::Int, sub)),
                    _ => args.push(self.expr(ty, sub)),
                }
                self.builtin(ty, builtin, args)
            }
            5 => {
                let from =
                    *[Ty::Int, Ty::Float, Ty::F32, Ty::I32, Ty::Usize].choose(&mut self.rng)?;
                let operand = Box::new(self.expr(from, sub));
                Expr::new(ty, ExprKind::Cast { operand })
            }
            6 => {
                let op = if signed {
                    *[UnOp::Neg, UnOp::Not].choose(&mut self.rng)?
                } else {
                    UnOp::Not
                };
                let operand = Box::new(self.expr(ty, sub));
                Expr::new(ty, ExprKind::Unary { op, operand })
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// An `f32`: arithmetic, `abs`/`sqrt`/`tanh`/`min`/`max`, an element,
    /// `sum`/`max`/`dot` of `[f32; 3]`, casts from `i64`, `i32` and `f64`
    /// (random draws among them).
    fn f32_expr(&mut self, depth: u32) -> Option<Expr> {
        let (ty, sub) = (Ty::F32, depth - 1);
        if self.ragged && self.chance(0.15) {
            // A reduction or an element of an `[f32; L]`.
            let array = self.expr(Ty::F32Ragged, sub);
            return Some(match self.rng.gen_range(0..4) {
                0 => {
                    let other = self.expr(Ty::F32Ragged, sub);
                    self.builtin(ty, Builtin::Dot, vec![array, other])
                }
                1 => {
                    let index = Box::new(self.index(Ty::F32Ragged, sub));
                    Expr::new(
                        ty,
                        ExprKind::Index {
                            array: Box::new(array),
                            index,
                        },
                    )
                }
                _ => {
                    let builtin = *[
                        Builtin::Sum,
                        Builtin::ReduceMax,
                        Builtin::Mean,
                        Builtin::LogSumExp,
                    ]
                    .choose(&mut self.rng)?;
                    self.builtin(ty, builtin, vec![array])
                }
            });
        }
        // Not in a scalar program: an element, `sum`/`max`, `dot`.
        let e = match self.arm(9, &[5, 6, 7]) {
            0..=2 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => self.float_builtin(ty, sub)?,
            4 => {
                let from = *[Ty::Int, Ty::I32, Ty::Float].choose(&mut self.rng)?;
                let operand = Box::new(self.expr(from, sub));
                Expr::new(ty, ExprKind::Cast { operand })
            }
            5 => self.index_expr(Ty::F32Array, sub),
            6 => {
                let builtin = *[Builtin::Sum, Builtin::ReduceMax].choose(&mut self.rng)?;
                let array = self.expr(Ty::F32Array, sub);
                self.builtin(ty, builtin, vec![array])
            }
            7 => {
                let (a, b) = (self.expr(Ty::F32Array, sub), self.expr(Ty::F32Array, sub));
                self.builtin(ty, Builtin::Dot, vec![a, b])
            }
            _ => {
                let operand = Box::new(self.expr(ty, sub));
                Expr::new(
                    ty,
                    ExprKind::Unary {
                        op: UnOp::Neg,
                        operand,
                    },
                )
            }
        };
        Some(e)
    }

    /// A `[f32; 3]`: an array of `f32`s, elementwise with another or with
    /// an `f32`, `softmax`/`tanh`, `select`, a `[f64; 3]` cast.
    fn f32_array_expr(&mut self, depth: u32) -> Option<Expr> {
        let (ty, sub) = (Ty::F32Array, depth - 1);
        if self.chance(0.15) {
            return Some(self.matrix_product(Ty::F32Matrix, sub));
        }
        let e = match self.rng.gen_range(0..7) {
            0 => Expr::new(
                ty,
                ExprKind::Array(
                    (0..FLOAT_ARRAY_LEN)
                        .map(|_| self.expr(Ty::F32, sub))
                        .collect(),
                ),
            ),
            1 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            2 => {
                let op = *[BinOp::Add, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(Ty::F32, sub))
            }
            3 if self.chance(0.5) => {
                let array = self.expr(ty, sub);
                self.builtin(ty, Builtin::Softmax, vec![array])
            }
            3 => self.float_builtin(ty, sub)?,
            4 => {
                let args = vec![
                    self.select_condition(sub),
                    self.expr(ty, sub),
                    self.expr(ty, sub),
                ];
                self.builtin(ty, Builtin::Select, args)
            }
            5 if self.chance(0.8) => {
                let operand = Box::new(self.expr(Ty::FloatArray, sub));
                Expr::new(ty, ExprKind::Cast { operand })
            }
            5 => {
                let builtin = *[Builtin::UniformLike, Builtin::NormalLike].choose(&mut self.rng)?;
                let x = self.expr(ty, sub);
                self.builtin(ty, builtin, vec![x])
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// The condition of a `select` between two `[f64; 3]` or `[f32; 3]`:
    /// a `bool`, or a `[bool; 3]` choosing element by element.
    fn select_condition(&mut self, sub: u32) -> Expr {
        if self.chance(0.4) {
            self.expr(Ty::BoolArray, sub)
        } else {
            self.bool_expr(sub)
        }
    }

    /// A `[bool; 3]` (comparisons apply to scalars only): a literal, an
    /// array of conditions, `is_nan`/`is_finite` of a float array, `!`,
    /// `& | ^` of two.
    fn bool_array_expr(&mut self, depth: u32) -> Option<Expr> {
        let (ty, sub) = (Ty::BoolArray, depth - 1);
        let e = match self.rng.gen_range(0..6) {
            0 => self.literal(ty),
            // Conditions that differ from member to member.
            1 => Expr::new(
                ty,
                ExprKind::Array((0..FLOAT_ARRAY_LEN).map(|_| self.bool_expr(sub)).collect()),
            ),
            2 => {
                let builtin = *[Builtin::IsNan, Builtin::IsFinite].choose(&mut self.rng)?;
                let floats = *[Ty::FloatArray, Ty::F32Array].choose(&mut self.rng)?;
                let x = self.expr(floats, sub);
                self.builtin(ty, builtin, vec![x])
            }
            3 => {
                let operand = Box::new(self.expr(ty, sub));
                Expr::new(
                    ty,
                    ExprKind::Unary {
                        op: UnOp::Not,
                        operand,
                    },
                )
            }
            _ => {
                let op = *[BinOp::BitAnd, BinOp::BitOr, BinOp::BitXor].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
        };
        Some(e)
    }

    /// A vector made of a matrix of type `matrix` (`[[f64; 3]; 3]` or
    /// `[[f32; 3]; 3]`): `matvec`, `vecmat` or one of its rows; with the
    /// static `M`, sometimes a chain between two products with it
    /// (`vecmat(sigmoid(matvec(M, v * d)) * u, M)`, a generalized linear
    /// model's gradient, which the batching strategies run fused with both
    /// products).
    fn matrix_product(&mut self, matrix: Ty, sub: u32) -> Expr {
        let ty = matrix.element();
        let static_m = self.statics.iter().any(|s| s.name == "M");
        if matrix == Ty::Matrix && static_m && self.chance(0.5) {
            return self.between_products(sub);
        }
        let m = self.expr(matrix, sub);
        match self.rng.gen_range(0..3) {
            0 => {
                let v = self.expr(ty, sub);
                self.builtin(ty, Builtin::Matvec, vec![m, v])
            }
            1 => {
                let v = self.expr(ty, sub);
                self.builtin(ty, Builtin::Vecmat, vec![v, m])
            }
            _ => {
                let index = Box::new(self.index(ty, sub));
                Expr::new(
                    ty,
                    ExprKind::Index {
                        array: Box::new(m),
                        index,
                    },
                )
            }
        }
    }

    /// `vecmat(f(matvec(M, v * d)) op u, M)` with `f` `sigmoid`, `softplus`
    /// or `tanh`, of the static `M`.
    fn between_products(&mut self, sub: u32) -> Expr {
        let ty = Ty::FloatArray;
        let m = || Expr::var("M", Ty::Matrix);
        // Scaled by the member's `d`, so that `v` is not the same for
        // every member (a product of invariant operands runs once).
        let d = Expr::new(
            Ty::Float,
            ExprKind::Cast {
                operand: Box::new(Expr::var("d", Ty::Int)),
            },
        );
        let v = Expr::binary(ty, BinOp::Mul, self.expr(ty, sub), d);
        let z = self.builtin(ty, Builtin::Matvec, vec![m(), v]);
        let f = *[Builtin::Sigmoid, Builtin::Softplus, Builtin::Tanh]
            .choose(&mut self.rng)
            .unwrap_or(&Builtin::Sigmoid);
        let fz = self.builtin(ty, f, vec![z]);
        let op = *[BinOp::Mul, BinOp::Sub]
            .choose(&mut self.rng)
            .unwrap_or(&BinOp::Mul);
        let u = self.expr(ty, sub);
        let r = Expr::binary(ty, op, fz, u);
        self.builtin(ty, Builtin::Vecmat, vec![r, m()])
    }

    /// A `[[f64; 3]; 3]` or `[[f32; 3]; 3]`: the static `M` or a literal,
    /// `outer` of two vectors, `transpose`, `matmul`, elementwise with
    /// another; an `f32` one also `M` cast.
    fn matrix_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        let row = ty.element();
        let stack = self.statics.iter().any(|s| s.name == "MS");
        if ty == Ty::Matrix && stack && self.chance(0.3) {
            // An item of the static `MS` picked by the member's own index.
            return Some(self.index_expr(Ty::MatrixStack, sub));
        }
        let e = match self.rng.gen_range(0..7) {
            0 => {
                let (a, b) = (self.expr(row, sub), self.expr(row, sub));
                self.builtin(ty, Builtin::Outer, vec![a, b])
            }
            6 if ty == Ty::F32Matrix => {
                let operand = Box::new(self.expr(Ty::Matrix, sub));
                Expr::new(ty, ExprKind::Cast { operand })
            }
            1 if self.chance(0.5) => {
                let m = self.expr(ty, sub);
                self.builtin(ty, Builtin::Transpose, vec![m])
            }
            1 => self.factor_expr(ty, sub)?,
            2 => {
                let (a, b) = (self.expr(ty, sub), self.expr(ty, sub));
                self.builtin(ty, Builtin::Matmul, vec![a, b])
            }
            3 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// `cholesky_decompose(m)` (a `domain_error` unless symmetric positive
    /// definite), `mdivide_left_tri_low(l, m)` or `diag_matrix(diagonal(m))`.
    fn factor_expr(&mut self, ty: Ty, sub: u32) -> Option<Expr> {
        let m = self.expr(ty, sub);
        Some(match self.rng.gen_range(0..3) {
            0 => self.builtin(ty, Builtin::Cholesky, vec![m]),
            1 => {
                let l = self.expr(ty, sub);
                self.builtin(ty, Builtin::TriSolve, vec![l, m])
            }
            _ => {
                let d = self.builtin(ty.element(), Builtin::Diagonal, vec![m]);
                self.builtin(ty, Builtin::DiagMatrix, vec![d])
            }
        })
    }

    fn pair_expr(&mut self, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        let (a, b) = (self.expr(Ty::Int, sub), self.expr(Ty::Float, sub));
        Some(Expr::new(
            Ty::Pair,
            ExprKind::Pair(Box::new(a), Box::new(b)),
        ))
    }

    /// An index into an array of type `array`: mostly in bounds
    /// (`e & 3` into `[i64; 4]`, `e & 1` into `[f64; 3]`), sometimes not;
    /// into a ragged array see [`Self::ragged_index`].
    fn index(&mut self, array: Ty, depth: u32) -> Expr {
        if let Some(dim) = array.outer_dim() {
            return self.ragged_index(dim, depth);
        }
        let e = self.expr(Ty::Int, depth);
        let mask = match (array, self.rng.gen_range(0..10)) {
            (_, 0) => return e,
            (Ty::IntArray, _) => 3,
            (_, 1..=2) => 3,
            _ => 1,
        };
        Expr::binary(Ty::Int, BinOp::BitAnd, e, Expr::int(mask))
    }

    fn index_expr(&mut self, array_ty: Ty, depth: u32) -> Expr {
        let element = array_ty.element();
        let array = Box::new(self.expr(array_ty, depth));
        let index = Box::new(self.index(array_ty, depth));
        Expr::new(element, ExprKind::Index { array, index })
    }

    /// An index into an array whose outer length is the ragged dimension
    /// `dim` (`L` or `D`), against each member's own length: the counter
    /// of an enclosing loop over `dim` (always in bounds), or `e & 1`,
    /// `e & 3`, `e`, `dim - 1` (out of bounds for some members).
    fn ragged_index(&mut self, dim: &'static str, depth: u32) -> Expr {
        let counters: Vec<String> = self
            .scope
            .vars
            .iter()
            .filter(|v| v.in_dim == Some(dim))
            .map(|v| v.name.clone())
            .collect();
        if let Some(name) = counters.choose(&mut self.rng) {
            if self.chance(0.6) {
                return Expr::var(name, Ty::Int);
            }
        }
        match self.rng.gen_range(0..6) {
            0 => self.expr(Ty::Int, depth),
            1 => Expr::binary(
                Ty::Int,
                BinOp::Sub,
                Expr::new(Ty::Int, ExprKind::Dim(dim)),
                Expr::int(1),
            ),
            k => {
                let mask = if k < 4 { 1 } else { 3 };
                let e = self.expr(Ty::Int, depth);
                Expr::binary(Ty::Int, BinOp::BitAnd, e, Expr::int(mask))
            }
        }
    }

    /// The member's own `D` as an `i64`: `(c.len() as i64)` of a
    /// `[f64; D]` in scope, or `(D as i64)`.
    fn inner_length(&mut self) -> Expr {
        let arrays: Vec<String> = self
            .scope
            .vars
            .iter()
            .filter(|v| v.ty == Ty::ColsRagged)
            .map(|v| v.name.clone())
            .collect();
        match arrays.choose(&mut self.rng) {
            Some(name) if self.chance(0.6) => Expr::new(
                Ty::Int,
                ExprKind::Len(Box::new(Expr::var(name, Ty::ColsRagged))),
            ),
            _ => Expr::new(Ty::Int, ExprKind::Dim(INNER_RAGGED_DIM)),
        }
    }

    /// The member's own `L` as an `i64`: `(xs.len() as i64)` of a ragged
    /// array in scope, or `(L as i64)`.
    fn length(&mut self) -> Expr {
        let arrays: Vec<(String, Ty)> = self
            .scope
            .vars
            .iter()
            .filter(|v| v.ty.is_ragged())
            .map(|v| (v.name.clone(), v.ty))
            .collect();
        match arrays.choose(&mut self.rng) {
            Some((name, ty)) if self.chance(0.7) => {
                Expr::new(Ty::Int, ExprKind::Len(Box::new(Expr::var(name, *ty))))
            }
            _ => Expr::new(Ty::Int, ExprKind::Dim(RAGGED_DIM)),
        }
    }

    /// A scalar of type `ty` (`i64` or `f64`) made of ragged arrays: the
    /// length, a reduction (`sum`, `max`, `min`; `mean`, `logsumexp`,
    /// `dot` of floats), an element.
    fn ragged_scalar(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        if self.inner && self.chance(0.4) {
            return self.inner_scalar(ty, depth);
        }
        let array_ty = if ty == Ty::Int {
            Ty::IntRagged
        } else {
            Ty::FloatRagged
        };
        let e = match self.rng.gen_range(0..6) {
            0 if ty == Ty::Int => {
                let array_ty = self.ragged_type();
                let array = self.expr(array_ty, depth.min(1));
                Expr::new(Ty::Int, ExprKind::Len(Box::new(array)))
            }
            1 if ty == Ty::Int => Expr::new(Ty::Int, ExprKind::Dim(RAGGED_DIM)),
            0 | 1 => {
                let (a, b) = (self.expr(array_ty, depth), self.expr(array_ty, depth));
                self.builtin(ty, Builtin::Dot, vec![a, b])
            }
            2 | 3 => {
                let mut builtins = vec![Builtin::Sum, Builtin::ReduceMax, Builtin::ReduceMin];
                if ty == Ty::Float {
                    builtins.extend([Builtin::Mean, Builtin::LogSumExp]);
                }
                let builtin = *builtins.choose(&mut self.rng)?;
                let array = self.expr(array_ty, depth);
                self.builtin(ty, builtin, vec![array])
            }
            _ => self.index_expr(array_ty, depth),
        };
        Some(e)
    }

    /// A scalar made of `[f64; D]` arrays: `D`, a length, a reduction, a
    /// `dot`, an element; of a `[[f64; D]; L]`, its length.
    fn inner_scalar(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let e = match self.rng.gen_range(0..5) {
            0 if ty == Ty::Int => Expr::new(Ty::Int, ExprKind::Dim(INNER_RAGGED_DIM)),
            1 if ty == Ty::Int => {
                let array_ty = *INNER_RAGGED_TYPES.choose(&mut self.rng)?;
                let array = self.expr(array_ty, depth.min(1));
                Expr::new(Ty::Int, ExprKind::Len(Box::new(array)))
            }
            _ if ty == Ty::Int => self.inner_length(),
            0 | 1 => {
                let (a, b) = (
                    self.expr(Ty::ColsRagged, depth),
                    self.expr(Ty::ColsRagged, depth),
                );
                self.builtin(ty, Builtin::Dot, vec![a, b])
            }
            2 | 3 => {
                let builtin = *[
                    Builtin::Sum,
                    Builtin::ReduceMax,
                    Builtin::ReduceMin,
                    Builtin::Mean,
                    Builtin::LogSumExp,
                ]
                .choose(&mut self.rng)?;
                let array = self.expr(Ty::ColsRagged, depth);
                self.builtin(ty, builtin, vec![array])
            }
            _ => self.index_expr(Ty::ColsRagged, depth),
        };
        Some(e)
    }

    /// An expression of type `[f64; D]`: `[x; D]`, elementwise with
    /// another or a scalar, `softmax`/`tanh`, `select`, a row of a
    /// `[[f64; D]; L]`, `vecmat` of one.
    fn cols_expr(&mut self, depth: u32) -> Option<Expr> {
        let (ty, sub) = (Ty::ColsRagged, depth - 1);
        let e = match self.rng.gen_range(0..9) {
            0 => Expr::new(ty, ExprKind::Fill(Box::new(self.expr(Ty::Float, sub)))),
            1 | 2 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => {
                let op = *[BinOp::Add, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(Ty::Float, sub))
            }
            4 => {
                let builtin = *[Builtin::Softmax, Builtin::Tanh].choose(&mut self.rng)?;
                let array = self.expr(ty, sub);
                self.builtin(ty, builtin, vec![array])
            }
            5 => self.index_expr(Ty::GridRagged, sub),
            6 => {
                let (v, m) = (
                    self.expr(Ty::FloatRagged, sub),
                    self.expr(Ty::GridRagged, sub),
                );
                self.builtin(ty, Builtin::Vecmat, vec![v, m])
            }
            7 => {
                let args = vec![self.bool_expr(sub), self.expr(ty, sub), self.expr(ty, sub)];
                self.builtin(ty, Builtin::Select, args)
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// An expression of a ragged array type: `[x; L]`, elementwise with
    /// another such array or a scalar, `softmax`/`tanh`, `select`.
    fn ragged_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        let element = ty.element();
        let e = match self.rng.gen_range(0..8) {
            0 => Expr::new(ty, ExprKind::Fill(Box::new(self.expr(element, sub)))),
            // The other ragged array cast element by element (`xs as f64`).
            7 => {
                let from = match ty {
                    Ty::FloatRagged => *[Ty::IntRagged, Ty::F32Ragged].choose(&mut self.rng)?,
                    _ => Ty::FloatRagged,
                };
                let operand = Box::new(self.expr(from, sub));
                Expr::new(ty, ExprKind::Cast { operand })
            }
            1 | 2 => {
                let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul];
                if ty != Ty::IntRagged {
                    ops.push(BinOp::Div);
                }
                let op = *ops.choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => {
                let op = *[BinOp::Add, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(element, sub))
            }
            4 if ty != Ty::IntRagged => {
                let builtin = *[Builtin::Softmax, Builtin::Tanh].choose(&mut self.rng)?;
                let array = self.expr(ty, sub);
                self.builtin(ty, builtin, vec![array])
            }
            5 if ty == Ty::FloatRagged && self.inner && self.chance(0.3) => {
                let (m, v) = (
                    self.expr(Ty::GridRagged, sub),
                    self.expr(Ty::ColsRagged, sub),
                );
                self.builtin(ty, Builtin::Matvec, vec![m, v])
            }
            5 if ty == Ty::FloatRagged && self.chance(0.5) => {
                let (m, v) = (
                    self.expr(Ty::RowsRagged, sub),
                    self.expr(Ty::FloatArray, sub),
                );
                self.builtin(ty, Builtin::Matvec, vec![m, v])
            }
            4 | 5 => {
                let args = vec![self.bool_expr(sub), self.expr(ty, sub), self.expr(ty, sub)];
                self.builtin(ty, Builtin::Select, args)
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    /// An expression of a ragged number of rows, `[[f64; 3]; L]` or
    /// `[[f64; D]; L]`: `[row; L]`, elementwise with another or with a
    /// scalar, `select`.
    fn rows_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let sub = depth - 1;
        let e = match self.rng.gen_range(0..6) {
            0 => Expr::new(ty, ExprKind::Fill(Box::new(self.expr(ty.element(), sub)))),
            1 | 2 => {
                let op = *[BinOp::Add, BinOp::Sub, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(ty, sub))
            }
            3 => {
                let op = *[BinOp::Add, BinOp::Mul].choose(&mut self.rng)?;
                Expr::binary(ty, op, self.expr(ty, sub), self.expr(Ty::Float, sub))
            }
            4 => {
                let args = vec![self.bool_expr(sub), self.expr(ty, sub), self.expr(ty, sub)];
                self.builtin(ty, Builtin::Select, args)
            }
            _ => self.leaf(ty),
        };
        Some(e)
    }

    fn if_expr(&mut self, ty: Ty, depth: u32) -> Expr {
        let cond = Box::new(self.bool_expr(depth - 1));
        let count = if self.scope.nesting < 2 { 0..2 } else { 0..0 };
        self.scope.nesting += 1;
        let then = Box::new(self.block(ty, depth - 1, count.clone()));
        let otherwise = Box::new(self.block(ty, depth - 1, count));
        self.scope.nesting -= 1;
        Expr::new(
            ty,
            ExprKind::If {
                cond,
                then,
                otherwise,
            },
        )
    }

    fn loop_expr(&mut self, ty: Ty, depth: u32) -> Expr {
        let limit = Box::new(self.outside_loops(Self::loop_bound));
        let counter = self.fresh("c");
        let mark = self.scope.vars.len();
        self.scope.vars.push(Var::new(&counter, Ty::Int, false));
        self.scope.nesting += 1;
        let body = self.loop_body(LoopKind::Value(ty), depth - 1);
        self.scope.nesting -= 1;
        let exit = Box::new(self.outside_loops(|g| g.expr(ty, depth - 1)));
        self.scope.vars.truncate(mark);
        Expr::new(
            ty,
            ExprKind::Loop {
                counter,
                limit,
                body,
                exit,
            },
        )
    }

    /// What one call costs of the body's budget (more inside loops).
    fn call_cost(&self) -> i32 {
        1 + 2 * self.scope.loops.len() as i32
    }

    /// A call of a function returning `ty`: of a later function with `d`
    /// (sometimes), else with `d - 1` or `d - 2`, guarded by `if d > 0`
    /// where `d > 0` is not known. `None` when no function returns `ty` or
    /// the body has made enough calls.
    fn call(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let (mut call, lowers_depth) = self.call_parts(ty, depth)?;
        if !self.scalar && self.chance(0.2) {
            // Members that fault inside the call go on with a fallback.
            let fallback = self.literal(ty);
            call = Expr::new(
                ty,
                ExprKind::Catch {
                    call: Box::new(call),
                    fallback: Box::new(fallback),
                },
            );
        }
        let guard = (lowers_depth && !self.scope.guarded).then_some(1);
        Some(self.guarded(call, guard))
    }

    /// A call of a function returning `ty` (its cost paid), and whether its
    /// depth argument is `d - 1` or `d - 2` (so that it needs `d > 0`).
    fn call_parts(&mut self, ty: Ty, depth: u32) -> Option<(Expr, bool)> {
        let cost = self.call_cost();
        if self.scope.calls_left < cost {
            return None;
        }
        let callees: Vec<usize> = (0..self.signatures.len())
            .filter(|&i| self.signatures[i].ret == ty)
            .collect();
        let callee = *callees.choose(&mut self.rng)?;
        self.scope.calls_left -= cost;
        let same_depth = callee > self.scope.function && self.chance(0.7);
        let depth_arg = if same_depth {
            Expr::var("d", Ty::Int)
        } else {
            Expr::new(Ty::Int, ExprKind::DepthStep(self.rng.gen_range(1..=2)))
        };
        let mut args = vec![depth_arg];
        args.extend(self.extra_args(callee, depth));
        let call = Expr::new(
            ty,
            ExprKind::Call {
                callee: self.signatures[callee].name.clone(),
                args,
            },
        );
        Some((call, !same_depth))
    }

    /// `e + self(d - k, ..)` or `e * self(d - k, ..)` where `d > 0` holds
    /// (its cost paid), or `e` when the body has made enough calls.
    fn folded_self_call(&mut self, e: Expr) -> Expr {
        let cost = self.call_cost();
        if self.scope.calls_left < cost {
            return e;
        }
        self.scope.calls_left -= cost;
        let callee = self.scope.function;
        let op = if self.folds.gen_bool(0.5) {
            BinOp::Add
        } else {
            BinOp::Mul
        };
        let step = self.folds.gen_range(1..=2);
        let mut args = vec![Expr::new(Ty::Int, ExprKind::DepthStep(step))];
        args.extend(self.extra_args(callee, 2));
        let call = Expr::new(
            Ty::Int,
            ExprKind::Call {
                callee: self.signatures[callee].name.clone(),
                args,
            },
        );
        Expr::binary(Ty::Int, op, e, call)
    }

    /// Arguments for the parameters of `callee` after its depth.
    fn extra_args(&mut self, callee: usize, depth: u32) -> Vec<Expr> {
        let params: Vec<(Ty, bool)> = self.signatures[callee].params[1..]
            .iter()
            .zip(&self.signatures[callee].weights[1..])
            .map(|(p, w)| (p.ty, *w))
            .collect();
        params
            .into_iter()
            .map(|(t, weight)| {
                // Mostly the static itself; sometimes another value, so
                // that the parameter is per-member after all.
                if weight && self.chance(0.9) {
                    Expr::var("W", t)
                } else {
                    self.expr(t, depth - 1)
                }
            })
            .collect()
    }

    /// `e`, or `(if d >= at_least { e } else { constant })` when `at_least`
    /// is given.
    fn guarded(&mut self, e: Expr, at_least: Option<i64>) -> Expr {
        let Some(at_least) = at_least else {
            return e;
        };
        let cond = if at_least == 1 {
            Expr::binary(Ty::Bool, BinOp::Gt, Expr::var("d", Ty::Int), Expr::int(0))
        } else {
            Expr::binary(
                Ty::Bool,
                BinOp::Ge,
                Expr::var("d", Ty::Int),
                Expr::int(at_least),
            )
        };
        self.guarded_by(e, cond)
    }

    /// `(if cond { e } else { constant })`.
    fn guarded_by(&mut self, e: Expr, cond: Expr) -> Expr {
        let ty = e.ty;
        let then = Block {
            stmts: Vec::new(),
            tail: e,
        };
        let otherwise = Block {
            stmts: Vec::new(),
            tail: self.literal(ty),
        };
        Expr::new(
            ty,
            ExprKind::If {
                cond: Box::new(cond),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            },
        )
    }

    /// `join` of two or three calls (as [`Self::call`] makes them, the first
    /// returning `ty`, the others sometimes another type), adding up the
    /// results of type `ty`; guarded by `if d > 0` if a call lowers the depth.
    fn join_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let n = self.rng.gen_range(2..=3);
        if self.scope.calls_left < n * self.call_cost() {
            return None;
        }
        let (first, mut lowers_depth) = self.call_parts(ty, depth)?;
        let mut calls = vec![first];
        for _ in 1..n {
            let other = if self.chance(0.5) {
                ty
            } else {
                self.value_type()
            };
            let part = match self.call_parts(other, depth) {
                Some(part) => part,
                None => self.call_parts(ty, depth)?,
            };
            lowers_depth |= part.1;
            calls.push(part.0);
        }
        let picks = (0..calls.len()).filter(|&i| calls[i].ty == ty).collect();
        let join = Expr::new(ty, ExprKind::Join { calls, picks });
        let guard = (lowers_depth && !self.scope.guarded).then_some(1);
        Some(self.guarded(join, guard))
    }

    /// `map` of a function over an array of depth arguments, or
    /// `pfor::<N>` of a function (a number or a constant `FAN<N>`), with
    /// arguments for its other parameters; the result made into a `ty` by
    /// an [`InstanceUse`]. Guarded so that every instance gets a depth the
    /// termination rule allows (see the module doc).
    fn instances_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        let ragged = self.ragged;
        let options: Vec<(usize, InstanceUse, bool)> = (0..self.signatures.len())
            .flat_map(|i| {
                let ret = self.signatures[i].ret;
                let fixed = instance_uses(ret, ty)
                    .into_iter()
                    .map(move |u| (i, u, false));
                let by_l = ragged_instance_uses(ret, ty)
                    .into_iter()
                    .filter(move |_| ragged)
                    .map(move |u| (i, u, true));
                fixed.chain(by_l)
            })
            .collect();
        let (callee, use_, by_l) = *options.choose(&mut self.rng)?;
        if by_l {
            return self.ragged_instances(ty, callee, use_, depth);
        }
        let pfor = self.chance(0.5);
        let count = match (use_, self.signatures[callee].ret) {
            (InstanceUse::Whole, Ty::Int) => INT_ARRAY_LEN,
            (InstanceUse::Whole, _) => FLOAT_ARRAY_LEN,
            _ if pfor => self.rng.gen_range(1..=3),
            _ => self.rng.gen_range(1..=4),
        };
        let use_ = match use_ {
            InstanceUse::Index(_) => InstanceUse::Index(self.rng.gen_range(0..count)),
            other => other,
        };
        let cost = count as i32 * self.call_cost();
        if self.scope.calls_left < cost {
            return None;
        }
        self.scope.calls_left -= cost;
        let later = callee > self.scope.function;
        let (form, guard) = if pfor {
            let name = self.chance(0.5).then(|| self.count_const(count));
            let at_least = count as i64 - i64::from(later);
            (InstanceForm::Pfor { count, name }, Some(at_least))
        } else {
            let depths: Vec<Expr> = (0..count)
                .map(|_| {
                    if later && self.chance(0.5) {
                        Expr::var("d", Ty::Int)
                    } else {
                        Expr::new(Ty::Int, ExprKind::DepthStep(self.rng.gen_range(1..=2)))
                    }
                })
                .collect();
            let lowers_depth = depths
                .iter()
                .any(|d| matches!(d.kind, ExprKind::DepthStep(_)));
            let guard = (lowers_depth && !self.scope.guarded).then_some(1);
            (InstanceForm::Map { depths }, guard)
        };
        let args = self.extra_args(callee, depth);
        let e = Expr::new(
            ty,
            ExprKind::Instances {
                callee: self.signatures[callee].name.clone(),
                form,
                args,
                use_,
            },
        );
        Some(self.guarded(e, guard))
    }

    /// `map` of `callee` over `[depth; L]` or `pfor::<L>` of it: as many
    /// instances as the member's own `L`. `pfor::<L>` gives instance `k`
    /// the depth `k < L`, so it runs where `d >= L` (`d >= L - 1` for a
    /// later function), as [`Self::instances_expr`] does for a number.
    fn ragged_instances(
        &mut self,
        ty: Ty,
        callee: usize,
        use_: InstanceUse,
        depth: u32,
    ) -> Option<Expr> {
        // Most members are short: priced as three instances.
        let cost = 3 * self.call_cost();
        if self.scope.calls_left < cost {
            return None;
        }
        self.scope.calls_left -= cost;
        let later = callee > self.scope.function;
        let d = Expr::var("d", Ty::Int);
        let (form, guard) = if self.chance(0.5) {
            let dim = Expr::new(Ty::Int, ExprKind::Dim(RAGGED_DIM));
            let at_least = if later {
                Expr::binary(Ty::Int, BinOp::Sub, dim, Expr::int(1))
            } else {
                dim
            };
            let guard = Expr::binary(Ty::Bool, BinOp::Ge, d, at_least);
            (InstanceForm::PforRagged, Some(guard))
        } else if later && self.chance(0.5) {
            let form = InstanceForm::MapRagged { depth: Box::new(d) };
            (form, None)
        } else {
            let step = Expr::new(Ty::Int, ExprKind::DepthStep(self.rng.gen_range(1..=2)));
            let form = InstanceForm::MapRagged {
                depth: Box::new(step),
            };
            let guard =
                (!self.scope.guarded).then(|| Expr::binary(Ty::Bool, BinOp::Gt, d, Expr::int(0)));
            (form, guard)
        };
        let args = self.extra_args(callee, depth);
        let e = Expr::new(
            ty,
            ExprKind::Instances {
                callee: self.signatures[callee].name.clone(),
                form,
                args,
                use_,
            },
        );
        Some(match guard {
            Some(cond) => self.guarded_by(e, cond),
            None => e,
        })
    }

    /// A row of the Jacobian of a differentiable helper, at a point of
    /// type `[f64; 3]`, with a data argument of that type if the helper
    /// takes one; or, for type `f64`, `grad(ds, a, c)` of the scalar helper
    /// (or a field of `value_and_grad(ds, a, c)`) with `c` a data argument (see [`differentiable`]). Only in programs
    /// that have helpers.
    fn jacobian_expr(&mut self, ty: Ty, depth: u32) -> Option<Expr> {
        if ty == Ty::Float {
            let function = self.grad_target.clone()?;
            let point = Box::new(self.expr(ty, depth - 1));
            let data = vec![self.expr(ty, depth - 1)];
            let field = self.chance(0.3).then(|| self.rng.gen_range(0..2));
            return Some(Expr::new(
                ty,
                ExprKind::Grad {
                    function,
                    point,
                    data,
                    field,
                },
            ));
        }
        if ty != Ty::FloatArray {
            return None;
        }
        let target = self.jacobian_targets.choose(&mut self.rng)?.clone();
        let point = Box::new(self.expr(ty, depth - 1));
        let data = if target.data {
            vec![self.expr(ty, depth - 1)]
        } else {
            Vec::new()
        };
        let row = self.rng.gen_range(0..FLOAT_ARRAY_LEN);
        Some(Expr::new(
            ty,
            ExprKind::Jacobian {
                function: target.name,
                point,
                data,
                row,
            },
        ))
    }

    /// The name of the constant `FAN<count>`, declared once.
    fn count_const(&mut self, count: usize) -> String {
        let name = format!("FAN{count}");
        if !self.consts.iter().any(|(n, _)| *n == name) {
            self.consts.push((name.clone(), count));
        }
        name
    }

    // ---- inputs and limits ----

    /// A gradient of the loss with respect to `W`, if the program has one:
    /// 1 to 6 members, each with its own point.
    fn gradient(&mut self, program: &Program) -> Option<GradientCase> {
        program
            .functions
            .iter()
            .find(|f| f.name == differentiable::LOSS)?;
        let members = self.rng.gen_range(1..=6);
        let points = (0..members)
            .map(|_| {
                let point: Vec<f64> = (0..FLOAT_ARRAY_LEN)
                    .map(|_| f64::from(self.rng.gen_range(-8..=8)) * 0.125)
                    .collect();
                Json::from(point)
            })
            .collect();
        Some(GradientCase {
            entry: differentiable::LOSS.into(),
            statics: vec!["W".into(), "M".into()],
            points,
        })
    }

    /// The entry's arguments, each shared or batched, and the statics.
    /// Ragged arguments follow [`RaggedLengths`], one for `L` and one for
    /// `D`: each member's own length (every ragged argument of a member
    /// has it), or one length for all, and then an argument ragged in that
    /// dimension only may be shared.
    fn inputs(&mut self, program: &Program) -> Inputs {
        let members = self.rng.gen_range(1..=8);
        let mut lengths = self.ragged_lengths(members);
        let inner = self.ragged_lengths(members);
        let params = program.functions.first().map(|f| f.params.as_slice());
        let has = |ty: Ty| params.unwrap_or(&[]).iter().any(|p| p.ty == ty);
        if has(Ty::GridRagged) && !has(Ty::ColsRagged) {
            // `D` is fixed by the rows of a `[[f64; D]; L]` alone: a member
            // with no rows would leave it undetermined (an input error).
            lengths.at_least_one();
        }
        let mut args = Vec::new();
        for param in program
            .functions
            .first()
            .map(|f| f.params.as_slice())
            .unwrap_or(&[])
        {
            let batched = if param.name == "d" {
                self.chance(0.85)
            } else if (param.ty.is_ragged() && lengths.shared.is_none())
                || (INNER_RAGGED_TYPES.contains(&param.ty) && inner.shared.is_none())
            {
                true
            } else {
                self.chance(0.6)
            };
            let value = if batched {
                InputValue::Batched(
                    (0..members)
                        .map(|m| self.input_value(param, lengths.of(m), inner.of(m)))
                        .collect(),
                )
            } else {
                InputValue::Shared(self.input_value(param, lengths.of(0), inner.of(0)))
            };
            args.push(InputArg {
                name: param.name.clone(),
                ty: param.ty,
                value,
            });
        }
        for s in &program.statics {
            let value = InputValue::Shared(self.input_value(s, 0, 0));
            args.push(InputArg {
                name: s.name.clone(),
                ty: s.ty,
                value,
            });
        }
        Inputs { members, args }
    }

    /// Each member's `L`: most often its own, from 0 to 6 and mostly
    /// short; in a quarter of the cases one for all members.
    fn ragged_lengths(&mut self, members: usize) -> RaggedLengths {
        // Lengths 0..=6, weighted towards short arrays.
        const WEIGHTS: [u32; 7] = [3, 4, 4, 3, 2, 1, 1];
        let draw = |rng: &mut ChaCha8Rng| {
            let total: u32 = WEIGHTS.iter().sum();
            let mut pick = rng.gen_range(0..total);
            WEIGHTS
                .iter()
                .position(|&w| {
                    let hit = pick < w;
                    pick = pick.saturating_sub(w);
                    hit
                })
                .unwrap_or(0)
        };
        if self.chance(0.25) {
            let length = draw(&mut self.rng);
            RaggedLengths {
                members: vec![length; members],
                shared: Some(length),
            }
        } else {
            let members = (0..members).map(|_| draw(&mut self.rng)).collect();
            RaggedLengths {
                members,
                shared: None,
            }
        }
    }

    /// A value of `param`'s type; a ragged array of `length` elements
    /// (`L`), of `width` elements (`D`).
    fn input_value(&mut self, param: &Param, length: usize, width: usize) -> Json {
        if param.name == "d" {
            return json!(self.rng.gen_range(0..=5));
        }
        let int = |rng: &mut ChaCha8Rng| json!(rng.gen_range(-4..=9));
        let float = |rng: &mut ChaCha8Rng| json!(f64::from(rng.gen_range(-12..=12)) * 0.25);
        match param.ty {
            Ty::Int | Ty::I32 => int(&mut self.rng),
            Ty::Usize => json!(self.rng.gen_range(0..=9)),
            Ty::Float | Ty::F32 => float(&mut self.rng),
            Ty::F32Array => {
                Json::Array((0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng)).collect())
            }
            Ty::F32Matrix => Json::Array(
                (0..FLOAT_ARRAY_LEN)
                    .map(|_| {
                        Json::Array((0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng)).collect())
                    })
                    .collect(),
            ),
            Ty::BoolArray => Json::Array(
                (0..FLOAT_ARRAY_LEN)
                    .map(|_| json!(self.chance(0.5)))
                    .collect(),
            ),
            Ty::Bool => json!(self.chance(0.5)),
            Ty::IntArray => Json::Array((0..INT_ARRAY_LEN).map(|_| int(&mut self.rng)).collect()),
            Ty::FloatArray => {
                Json::Array((0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng)).collect())
            }
            Ty::Pair => json!([int(&mut self.rng), float(&mut self.rng)]),
            Ty::IntRagged => Json::Array((0..length).map(|_| int(&mut self.rng)).collect()),
            Ty::FloatRagged | Ty::F32Ragged => {
                Json::Array((0..length).map(|_| float(&mut self.rng)).collect())
            }
            Ty::ColsRagged => Json::Array((0..width).map(|_| float(&mut self.rng)).collect()),
            Ty::GridRagged => Json::Array(
                (0..length)
                    .map(|_| Json::Array((0..width).map(|_| float(&mut self.rng)).collect()))
                    .collect(),
            ),
            Ty::MatrixStack => Json::Array(
                (0..MATRIX_STACK_LEN)
                    .map(|_| {
                        let rows = (0..FLOAT_ARRAY_LEN).map(|_| {
                            Json::Array(
                                (0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng)).collect(),
                            )
                        });
                        Json::Array(rows.collect())
                    })
                    .collect(),
            ),
            Ty::Matrix | Ty::RowsRagged => Json::Array(
                (0..if param.ty == Ty::Matrix {
                    FLOAT_ARRAY_LEN
                } else {
                    length
                })
                    .map(|_| {
                        let row = (0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng));
                        Json::Array(row.collect())
                    })
                    .collect(),
            ),
            Ty::TwoRows => Json::Array(
                (0..ODE_ROWS)
                    .map(|_| {
                        let row = (0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng));
                        Json::Array(row.collect())
                    })
                    .collect(),
            ),
            Ty::ScaledArray => {
                let scale = float(&mut self.rng);
                let row = (0..FLOAT_ARRAY_LEN).map(|_| float(&mut self.rng));
                json!([scale, Json::Array(row.collect())])
            }
        }
    }

    fn limits(&mut self) -> Limits {
        let max_stack_depth = if self.chance(0.25) {
            self.rng.gen_range(2..=6)
        } else {
            USUAL_LIMITS.max_stack_depth
        };
        let max_steps = if self.chance(0.2) {
            self.rng.gen_range(20..=2000)
        } else {
            USUAL_LIMITS.max_steps
        };
        Limits {
            max_stack_depth,
            max_steps,
            seed: self.rng.gen_range(0..1000),
        }
    }
}

/// The length `L` of each member's ragged arguments.
struct RaggedLengths {
    members: Vec<usize>,
    /// The length of every member when all share one (so that a ragged
    /// argument may be given in `shared`).
    shared: Option<usize>,
}

impl RaggedLengths {
    fn of(&self, member: usize) -> usize {
        self.members.get(member).copied().unwrap_or(0)
    }

    /// Lengths of 0 made 1.
    fn at_least_one(&mut self) {
        self.members.iter_mut().for_each(|l| *l = (*l).max(1));
        if let Some(l) = &mut self.shared {
            *l = (*l).max(1);
        }
    }
}

/// Inputs that bind a ragged length both in `shared` and, with other
/// lengths, in `batch`: the first ragged argument of the entry shared with
/// one element, the others batched with two or three (the binder must
/// refuse them with an input error). `None` if the entry has fewer than
/// two ragged parameters.
pub fn conflicting_inputs(case: &Case) -> Option<Inputs> {
    let mut inputs = case.inputs.clone();
    // Arrays ragged in `L` alone: a `[[f64; D]; L]` keeps its values
    // (and so disagrees on `L` too).
    let ragged: Vec<usize> = (0..inputs.args.len())
        .filter(|&a| inputs.args[a].ty.is_ragged() && inputs.args[a].ty != Ty::GridRagged)
        .collect();
    let (&first, rest) = ragged.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let zeros = |ty: Ty, n: usize| {
        let zero = match ty {
            Ty::IntRagged => json!(0),
            Ty::RowsRagged => Json::Array(vec![json!(0.0); FLOAT_ARRAY_LEN]),
            _ => json!(0.0),
        };
        Json::Array(vec![zero; n])
    };
    let arg = &mut inputs.args[first];
    arg.value = InputValue::Shared(zeros(arg.ty, 1));
    for &a in rest {
        let arg = &mut inputs.args[a];
        let values = (0..inputs.members)
            .map(|m| zeros(arg.ty, 2 + m % 2))
            .collect();
        arg.value = InputValue::Batched(values);
    }
    Some(inputs)
}

/// How the results of instances of a function returning `ret` make a value
/// of type `ty` (the index of `Index` is chosen later).
fn instance_uses(ret: Ty, ty: Ty) -> Vec<InstanceUse> {
    match (ret, ty) {
        (Ty::Int, Ty::IntArray) | (Ty::Float, Ty::FloatArray) => vec![InstanceUse::Whole],
        (Ty::Int, Ty::Int) | (Ty::Float, Ty::Float) => {
            vec![InstanceUse::Sum, InstanceUse::Index(0)]
        }
        (Ty::IntArray, Ty::IntArray) | (Ty::FloatArray, Ty::FloatArray) => {
            vec![InstanceUse::Index(0)]
        }
        (Ty::IntRagged, Ty::IntRagged)
        | (Ty::FloatRagged, Ty::FloatRagged)
        | (Ty::F32Ragged, Ty::F32Ragged)
        | (Ty::ColsRagged, Ty::ColsRagged)
        | (Ty::GridRagged, Ty::GridRagged) => vec![InstanceUse::Index(0)],
        (Ty::Pair, Ty::Int) => vec![InstanceUse::SumField(0)],
        (Ty::Pair, Ty::Float) => vec![InstanceUse::SumField(1)],
        _ => Vec::new(),
    }
}

/// How the results of `L` instances (`map` over `[depth; L]`, `pfor::<L>`)
/// of a function returning `ret` make a value of type `ty`.
fn ragged_instance_uses(ret: Ty, ty: Ty) -> Vec<InstanceUse> {
    match (ret, ty) {
        (Ty::Int, Ty::IntRagged)
        | (Ty::Float, Ty::FloatRagged)
        | (Ty::F32, Ty::F32Ragged)
        | (Ty::FloatArray, Ty::RowsRagged)
        | (Ty::ColsRagged, Ty::GridRagged) => vec![InstanceUse::Whole],
        (Ty::Int, Ty::Int) | (Ty::Float, Ty::Float) => vec![InstanceUse::Sum],
        (Ty::Pair, Ty::Int) => vec![InstanceUse::SumField(0)],
        (Ty::Pair, Ty::Float) => vec![InstanceUse::SumField(1)],
        _ => Vec::new(),
    }
}
