//! Builtin methods and functions: the name's row of the table of
//! operations (`autobatch_ops`), the operand count, then one typing rule per
//! signature class, with the diagnostics the user sees.

use autobatch_ops::Signature as OpSignature;
use autobatch_types::{Loc, ScalarType};

use crate::hir::{Builtin, Expr, ExprKind, TensorTy, Ty};
use crate::items::{error, CheckResult, MapNote};
use crate::location::{end_of, expr_end, start_of};
use crate::Diagnostic;

use super::infer::{Class, Elem};
use super::{bool_ty, mk, usize_ty, FunctionChecker, SignedCheck};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_method(
        &mut self,
        m: &syn::ExprMethodCall,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let name = m.method.to_string();
        let (ml, me) = (start_of(m.method.span()), end_of(m.method.span()));
        if let Some(t) = &m.turbofish {
            return Err(error(
                "methods take no generic arguments",
                start_of(t.lt_token.span),
                end_of(t.gt_token.span),
                "unexpected `::<...>`",
            ));
        }
        let receiver = self.check_expr(&m.receiver)?;
        let receiver_end = expr_end(&m.receiver);
        let args = self.check_args(&m.args)?;
        if name == "len" {
            return self.check_len(receiver, receiver_end, args.len(), loc, end);
        }
        let Some(builtin) = Builtin::method(&name) else {
            return Err(error(
                format!("the method `{name}` is not supported by autobatch"),
                ml,
                me,
                "unknown method",
            )
            .map_note(method_list()));
        };
        let mut operands = vec![(receiver, receiver_end)];
        operands.extend(args);
        self.check_builtin(BuiltinCall {
            builtin,
            name: &name,
            method: true,
            operands,
            loc,
            end,
        })
    }

    /// `name(args)`, a call of the builtin function `builtin`.
    pub(super) fn check_builtin_function(
        &mut self,
        builtin: Builtin,
        name: &str,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let operands = self.check_args(args)?;
        self.check_builtin(BuiltinCall {
            builtin,
            name,
            method: false,
            operands,
            loc,
            end,
        })
    }

    /// `array.len()`.
    fn check_len(
        &mut self,
        receiver: Expr,
        receiver_end: Loc,
        args: usize,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if args != 0 {
            return Err(error(
                format!("`.len()` takes 0 argument(s), but {args} were given"),
                loc,
                end,
                "expected 0 argument(s)",
            ));
        }
        let len = match &receiver.ty {
            Ty::Tensor(t) if !t.is_scalar() => t.dims[0],
            other => {
                return Err(error(
                    format!(
                        "`.len()` needs an array, but this is `{}`",
                        self.show(other)
                    ),
                    receiver.loc,
                    receiver_end,
                    "not an array",
                ))
            }
        };
        Ok(mk(
            ExprKind::Len {
                array: Box::new(receiver),
                len,
            },
            usize_ty(),
            loc,
        ))
    }

    /// A call of a builtin (method or function): the operand count, then the
    /// rule of its signature class.
    fn check_builtin(&mut self, call: BuiltinCall) -> CheckResult<Expr> {
        let never = if call.method {
            // A method's receiver is checked before its arguments are counted.
            let never = call.operands[0].0.ty == Ty::Never;
            if !never {
                self.operand(&call, 0)?;
                self.check_builtin_arity(&call)?;
            }
            never
        } else {
            self.check_builtin_arity(&call)?;
            let never = call.operands.iter().any(|(a, _)| a.ty == Ty::Never);
            if !never {
                for k in 0..call.operands.len() {
                    self.operand(&call, k)?;
                }
            }
            never
        };
        let ty = if never {
            Ty::Never
        } else {
            self.builtin_type(&call)?
        };
        let args = call.operands.into_iter().map(|(a, _)| a).collect();
        Ok(mk(
            ExprKind::Builtin {
                builtin: call.builtin,
                args,
            },
            ty,
            call.loc,
        ))
    }

    fn check_builtin_arity(&self, call: &BuiltinCall) -> CheckResult<()> {
        // A method's receiver is not one of the arguments the user counts.
        let skip = usize::from(call.method);
        let (want, given) = (call.builtin.arity() - skip, call.operands.len() - skip);
        if want == given {
            return Ok(());
        }
        let mut d = error(
            format!(
                "{} takes {want} argument(s), but {given} were given",
                call.shown()
            ),
            call.loc,
            call.end,
            format!("expected {want} argument(s)"),
        );
        let reduces = matches!(
            call.builtin.signature(),
            OpSignature::Reduce | OpSignature::FloatReduce | OpSignature::ArgReduce
        );
        let method = Builtin::method(call.name).map(Builtin::arity);
        if !call.method && reduces && method == Some(given) {
            let name = call.name;
            d = d.map_note(format!(
                "`{name}(a)` reduces an array; for two values write `x.{name}(y)`"
            ));
        }
        Err(d)
    }

    /// Operand `k` of a builtin as an array or scalar (else an error naming the builtin).
    fn operand(&self, call: &BuiltinCall, k: usize) -> CheckResult<TensorTy> {
        let (a, end) = &call.operands[k];
        self.tensor_of(a, *end, &call.shown())
    }

    /// Operand `k` of a builtin is not `need`: for a method's receiver,
    /// "is a method of {need}"; for an argument, "needs {need}".
    fn operand_error(&self, call: &BuiltinCall, k: usize, need: &str) -> Box<Diagnostic> {
        let (a, end) = &call.operands[k];
        if call.method && k == 0 {
            let note = match &a.ty {
                Ty::Tensor(t) if self.class(t) == Class::Int => {
                    "convert first, e.g. `(x as f64).sqrt()`"
                }
                _ => "check the type of the receiver",
            };
            return error(
                format!(
                    "{} is a method of {need}, but this is `{}`",
                    call.shown(),
                    self.show(&a.ty)
                ),
                a.loc,
                *end,
                format!("not {need}"),
            )
            .map_note(note);
        }
        let number = if call.method { k } else { k + 1 };
        error(
            format!(
                "{} needs {need}, but argument {number} is `{}`",
                call.shown(),
                self.show(&a.ty)
            ),
            a.loc,
            *end,
            format!("expected {need}"),
        )
    }

    /// Operand `k`, whose element type the class must accept (else
    /// `operand_error` with `need`).
    fn operand_of(&self, call: &BuiltinCall, k: usize, need: &str) -> CheckResult<TensorTy> {
        let t = self.operand(call, k)?;
        if !accepts(call.builtin.signature(), self.class(&t)) {
            return Err(self.operand_error(call, k, need));
        }
        Ok(t)
    }

    /// The type of a builtin call whose operands are counted and are not
    /// `!`: one rule per signature class.
    fn builtin_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        use OpSignature as S;
        let signature = call.builtin.signature();
        Ok(match signature {
            S::FloatMap => Ty::Tensor(self.operand_of(call, 0, "floats")?),
            S::FloatPredicate => {
                let t = self.operand_of(call, 0, "floats")?;
                Ty::Tensor(TensorTy::new(ScalarType::Bool, t.dims))
            }
            S::SignedMap => self.signed_map_type(call)?,
            S::Arithmetic | S::FloatBinary => self.same_type_binary(call, signature)?,
            S::FloatPowi => self.powi_type(call)?,
            S::IntPower => self.int_power_type(call)?,
            S::Reduce | S::ArgReduce | S::FloatReduce => self.reduce_type(call, signature)?,
            S::FloatVectorMap => {
                let t = self.operand(call, 0)?;
                if !accepts(signature, self.class(&t)) || t.dims.len() != 1 {
                    return Err(self.operand_error(call, 0, "a 1-D float array"));
                }
                Ty::Tensor(t)
            }
            S::Transpose => self.transpose_type(call, signature)?,
            S::Product {
                left,
                right,
                contract,
                lengths,
            } => self.product_type(call, [left, right], contract, lengths)?,
            S::SquareMap => Ty::Tensor(self.square_operand(call)?),
            S::Diagonal => {
                let t = self.square_operand(call)?;
                Ty::Tensor(TensorTy {
                    dims: vec![t.dims[0]],
                    ..t
                })
            }
            S::DiagMatrix => {
                let t = self.operand(call, 0)?;
                if t.dims.len() != 1 || self.class(&t) != Class::Float {
                    return Err(self.operand_error(call, 0, "a 1-D float array"));
                }
                Ty::Tensor(TensorTy {
                    dims: vec![t.dims[0], t.dims[0]],
                    ..t
                })
            }
            S::TriangularSolve => self.triangular_solve_type(call)?,
            S::Select => self.select_type(call)?,
            S::Draw => Ty::scalar(ScalarType::F64),
            S::DrawLike => {
                let t = self.operand(call, 0)?;
                if self.class(&t) == Class::Float {
                    Ty::Tensor(t)
                } else {
                    Ty::Tensor(TensorTy::new(ScalarType::F64, t.dims))
                }
            }
            S::Bernoulli => {
                if !self.unify(&Ty::scalar(ScalarType::F64), &call.operands[0].0.ty) {
                    return Err(self.operand_error(call, 0, "an `f64` probability"));
                }
                bool_ty()
            }
            // Operators, syntax and internal operations: the table has no
            // builtin of these classes.
            S::LogicMap
            | S::Bitwise
            | S::FloatTernary
            | S::Shift
            | S::Compare
            | S::Copy
            | S::Value
            | S::Cast
            | S::Fill
            | S::Stack
            | S::Index
            | S::IndexSet
            | S::Slice
            | S::SliceSet
            | S::Assert
            | S::Host
            | S::StaticAdjoint
            | S::TapePush => {
                return Err(error(
                    format!("{} cannot be called", call.shown()),
                    call.loc,
                    call.end,
                    "not a builtin",
                ))
            }
        })
    }

    /// `Transpose`: a matrix of numbers; its axes swapped.
    fn transpose_type(&mut self, call: &BuiltinCall, signature: OpSignature) -> CheckResult<Ty> {
        let t = self.operand(call, 0)?;
        if t.dims.len() != 2 || !accepts(signature, self.class(&t)) {
            return Err(self.operand_error(call, 0, "a matrix (a 2-D array of numbers)"));
        }
        Ok(Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: vec![t.dims[1], t.dims[0]],
            var: t.var,
        }))
    }

    /// `SignedMap` (`x.abs()`): numbers, not `usize`; the same type.
    fn signed_map_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand_of(call, 0, "numbers")?;
        if self.class(&t) == Class::Int {
            let (a, end) = &call.operands[0];
            if self.elem(&t) == Elem::Known(ScalarType::Usize) {
                return Err(error(
                    format!(
                        "{} does not apply to a `usize`, which has no sign",
                        call.shown()
                    ),
                    a.loc,
                    *end,
                    "unsigned value",
                ));
            }
            self.signed_checks.push(SignedCheck {
                ty: t.clone(),
                loc: call.loc,
                end: call.end,
                what: call.shown(),
            });
        }
        Ok(Ty::Tensor(t))
    }

    /// `Arithmetic` and `FloatBinary` (`x.max(y)`, `x.powf(y)`): the argument
    /// has the receiver's type, or is a scalar of its element type.
    fn same_type_binary(&mut self, call: &BuiltinCall, signature: OpSignature) -> CheckResult<Ty> {
        let need = if signature == OpSignature::FloatBinary {
            "floats"
        } else {
            "numbers"
        };
        let t = self.operand_of(call, 0, need)?;
        let (x, (arg, arg_end)) = (&call.operands[0].0, &call.operands[1]);
        let symbol = format!(".{}", call.name);
        match self.binary_result(signature, &symbol, x, arg, call.loc, *arg_end) {
            Ok(ty) => Ok(ty),
            Err(_) if signature == OpSignature::FloatBinary => Err(error(
                format!(
                    "mismatched types: {} of `{}` needs a float exponent of the same type, found `{}`",
                    call.shown(),
                    self.show_tensor(&t),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "wrong exponent type",
            )),
            Err(_) => {
                let elem = TensorTy {
                    elem: t.elem,
                    dims: Vec::new(),
                    var: t.var,
                };
                Err(error(
                    format!(
                        "mismatched types: {} of `{}` needs an argument of the same type (or a scalar), found `{}`",
                        call.shown(),
                        self.show_tensor(&t),
                        self.show(&arg.ty)
                    ),
                    arg.loc,
                    *arg_end,
                    format!("expected `{}`", self.show_tensor(&elem)),
                ))
            }
        }
    }

    /// `FloatPowi` (`x.powi(n)`): a float and an `i32` scalar.
    fn powi_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand_of(call, 0, "floats")?;
        let (arg, arg_end) = &call.operands[1];
        if !self.unify(&Ty::scalar(ScalarType::I32), &arg.ty) {
            return Err(error(
                format!(
                    "{} needs an `i32` exponent, but this is `{}`",
                    call.shown(),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "expected `i32`",
            ));
        }
        Ok(Ty::Tensor(t))
    }

    /// `IntPower` (`n.pow(k)`): an integer and an integer scalar.
    fn int_power_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand(call, 0)?;
        if !accepts(OpSignature::IntPower, self.class(&t)) {
            let (a, end) = &call.operands[0];
            return Err(error(
                format!(
                    "{} is a method of integers, but this is `{}`",
                    call.shown(),
                    self.show_tensor(&t)
                ),
                a.loc,
                *end,
                "not an integer",
            )
            .map_note("for floats use `.powi(n)` or `.powf(x)`"));
        }
        let (arg, arg_end) = &call.operands[1];
        let ok = matches!(&arg.ty, Ty::Tensor(t) if t.is_scalar() && self.class(t) == Class::Int)
            || arg.ty == Ty::Never;
        if !ok {
            return Err(error(
                format!(
                    "{} needs an integer exponent, but this is `{}`",
                    call.shown(),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "expected an integer",
            ));
        }
        Ok(Ty::Tensor(t))
    }

    /// `Reduce`, `ArgReduce`, `FloatReduce` (`sum(a)`, `argmax(a)`,
    /// `mean(a)`): a 1-D array; its element, or its index.
    fn reduce_type(&mut self, call: &BuiltinCall, signature: OpSignature) -> CheckResult<Ty> {
        let t = self.operand(call, 0)?;
        if t.dims.len() != 1 || !accepts(signature, self.class(&t)) {
            let need = if signature == OpSignature::FloatReduce {
                "a 1-D float array"
            } else {
                "a 1-D array of numbers"
            };
            return Err(self.operand_error(call, 0, need));
        }
        if signature == OpSignature::ArgReduce {
            return Ok(usize_ty());
        }
        Ok(Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: Vec::new(),
            var: t.var,
        }))
    }

    /// `Product` (`dot`, `matvec`, `vecmat`, `matmul`, `outer`): arrays of
    /// numbers of ranks `ranks`, of one element type; with `contract`, the
    /// left's last axis against the right's first.
    /// The first operand of a call that takes a square float matrix.
    fn square_operand(&mut self, call: &BuiltinCall) -> CheckResult<TensorTy> {
        let t = self.operand(call, 0)?;
        let square = t.dims.len() == 2 && t.dims[0] == t.dims[1];
        if !square || self.class(&t) != Class::Float {
            return Err(self.operand_error(call, 0, "a square matrix of floats (`[[f64; K]; K]`)"));
        }
        Ok(t)
    }

    /// `mdivide_left_tri_low(l, b)`: `l` square, `b` a vector or matrix of
    /// its element type whose length is `l`'s order; `b`'s type.
    fn triangular_solve_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let l = self.square_operand(call)?;
        let b = self.operand(call, 1)?;
        let (el, eb) = (self.elem(&l), self.elem(&b));
        let rank_ok = matches!(b.dims.len(), 1 | 2);
        if !rank_ok || !self.unify_elem(el, eb) || b.dims.first() != l.dims.first() {
            let need = format!(
                "a vector or matrix of `{}` of length {} (the order of the matrix)",
                self.show_tensor(&TensorTy {
                    dims: Vec::new(),
                    ..l.clone()
                }),
                self.show_shape(&TensorTy {
                    dims: vec![l.dims[0]],
                    ..l.clone()
                })
            );
            return Err(self.operand_error(call, 1, &need));
        }
        Ok(Ty::Tensor(b))
    }

    fn product_type(
        &mut self,
        call: &BuiltinCall,
        ranks: [usize; 2],
        contract: bool,
        lengths: &str,
    ) -> CheckResult<Ty> {
        let describe = |r: usize| {
            if r == 1 {
                "a vector (a 1-D array of numbers)"
            } else {
                "a matrix (a 2-D array of numbers)"
            }
        };
        let mut operands = Vec::new();
        for (k, rank) in ranks.into_iter().enumerate() {
            let t = self.operand(call, k)?;
            if t.dims.len() != rank || !accepts(call.builtin.signature(), self.class(&t)) {
                return Err(self.operand_error(call, k, describe(rank)));
            }
            operands.push(t);
        }
        let (a, b) = (&operands[0], &operands[1]);
        let (ea, eb) = (self.elem(a), self.elem(b));
        if !self.unify_elem(ea, eb) {
            return Err(error(
                format!(
                    "mismatched types: {} of `{}` and `{}`",
                    call.shown(),
                    self.show_tensor(a),
                    self.show_tensor(b)
                ),
                call.loc,
                call.end,
                "element types differ",
            )
            .map_note("convert one side with `as`"));
        }
        let mut dims = a.dims.clone();
        let mut rest = &b.dims[..];
        if contract {
            if dims.pop() != b.dims.first().copied() {
                return Err(error(
                    format!(
                        "shape mismatch: {} of `{}` and `{}`",
                        call.shown(),
                        self.show_shape(a),
                        self.show_shape(b)
                    ),
                    call.loc,
                    call.end,
                    "the lengths do not agree",
                )
                .map_note(lengths));
            }
            rest = &b.dims[1..];
        }
        dims.extend_from_slice(rest);
        Ok(Ty::Tensor(TensorTy {
            elem: a.elem,
            dims,
            var: a.var,
        }))
    }

    /// `Select` (`select(c, a, b)`).
    fn select_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let (c, a, b) = (
            self.operand(call, 0)?,
            self.operand(call, 1)?,
            self.operand(call, 2)?,
        );
        let cond_ok = self.class(&c) == Class::Bool && (c.is_scalar() || c.dims == a.dims);
        if !cond_ok {
            return Err(self.operand_error(
                call,
                0,
                "a `bool` (or a `bool` array shaped like the alternatives)",
            ));
        }
        if !self.unify_tensor(&a, &b) {
            let (b_expr, b_end) = &call.operands[2];
            return Err(error(
                format!(
                    "the alternatives of {} must have one type, found `{}` and `{}`",
                    call.shown(),
                    self.show_tensor(&a),
                    self.show_tensor(&b)
                ),
                b_expr.loc,
                *b_end,
                format!("expected `{}`", self.show_tensor(&a)),
            ));
        }
        Ok(Ty::Tensor(a))
    }
}

/// A call of a builtin as the user wrote it.
struct BuiltinCall<'n> {
    builtin: Builtin,
    /// The name as written.
    name: &'n str,
    /// Written as a method: the receiver is the first operand.
    method: bool,
    /// The operands (a method's receiver first), each with where it ends.
    operands: Vec<(Expr, Loc)>,
    loc: Loc,
    end: Loc,
}

impl BuiltinCall<'_> {
    /// The builtin as messages name it: `` `.exp()` `` or `` `softmax` ``.
    fn shown(&self) -> String {
        if self.method {
            format!("`.{}()`", self.name)
        } else {
            format!("`{}`", self.name)
        }
    }
}

/// Whether the first operand of a builtin of class `signature` may have
/// element type class `class` (the receivers the unknown-method note lists).
pub(super) fn accepts(signature: OpSignature, class: Class) -> bool {
    use OpSignature as S;
    match signature {
        S::FloatMap
        | S::FloatPredicate
        | S::FloatBinary
        | S::FloatTernary
        | S::FloatPowi
        | S::FloatReduce
        | S::FloatVectorMap
        | S::Bernoulli => class == Class::Float,
        S::SignedMap
        | S::Arithmetic
        | S::Reduce
        | S::ArgReduce
        | S::Transpose
        | S::Product { .. } => class != Class::Bool,
        S::SquareMap | S::TriangularSolve | S::Diagonal | S::DiagMatrix => class == Class::Float,
        S::IntPower | S::Shift => class == Class::Int,
        S::LogicMap | S::Bitwise => class != Class::Float,
        S::Select => class == Class::Bool,
        S::Compare
        | S::DrawLike
        | S::Copy
        | S::Cast
        | S::Fill
        | S::Stack
        | S::Index
        | S::IndexSet
        | S::Slice
        | S::SliceSet
        | S::Assert
        | S::Host => true,
        S::Draw | S::Value | S::StaticAdjoint | S::TapePush => false,
    }
}

/// The note of an unknown method: the methods, by receiver.
fn method_list() -> String {
    let methods = |class: Class| {
        let names: Vec<&str> = Builtin::ALL
            .iter()
            .filter(|b| b.spelling().method().is_some() && accepts(b.signature(), class))
            .map(|b| b.name())
            .collect();
        names.join(" ")
    };
    format!(
        "methods: {} (floats); {} (integers); len (arrays)",
        methods(Class::Float),
        methods(Class::Int)
    )
}
