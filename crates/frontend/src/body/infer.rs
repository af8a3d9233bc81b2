//! Inference of element types: the union-find of the variables that
//! unsuffixed literals get, unification of types, and showing types in
//! messages (an unresolved variable as `{integer}` / `{float}`).

use autobatch_types::ScalarType;

use crate::hir::{DimExpr, TensorTy, Ty};

use super::FunctionChecker;

/// The state of one element-type inference variable (union-find).
pub(super) struct ElemVar {
    parent: u32,
    float: bool,
    value: Option<ScalarType>,
}

/// An element type during inference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Elem {
    Known(ScalarType),
    /// An unresolved variable (its root) and whether it is of float kind.
    Var(u32, bool),
}

/// The class of an element type, as far as it is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Class {
    Bool,
    Int,
    Float,
}

impl FunctionChecker<'_, '_> {
    pub(super) fn fresh(&mut self, float: bool) -> TensorTy {
        let id = self.vars.len() as u32;
        self.vars.push(ElemVar {
            parent: id,
            float,
            value: None,
        });
        TensorTy {
            elem: if float {
                ScalarType::F64
            } else {
                ScalarType::I64
            },
            dims: Vec::new(),
            var: Some(id),
        }
    }

    pub(super) fn root(&self, mut v: u32) -> u32 {
        while self.vars[v as usize].parent != v {
            v = self.vars[v as usize].parent;
        }
        v
    }

    pub(super) fn elem(&self, t: &TensorTy) -> Elem {
        match t.var {
            None => Elem::Known(t.elem),
            Some(v) => {
                let r = self.root(v);
                let var = &self.vars[r as usize];
                match var.value {
                    Some(s) => Elem::Known(s),
                    None => Elem::Var(r, var.float),
                }
            }
        }
    }

    pub(super) fn class(&self, t: &TensorTy) -> Class {
        match self.elem(t) {
            Elem::Known(ScalarType::Bool) => Class::Bool,
            Elem::Known(s) if s.is_float() => Class::Float,
            Elem::Known(_) => Class::Int,
            Elem::Var(_, true) => Class::Float,
            Elem::Var(_, false) => Class::Int,
        }
    }

    pub(super) fn unify_elem(&mut self, a: Elem, b: Elem) -> bool {
        match (a, b) {
            (Elem::Known(x), Elem::Known(y)) => x == y,
            (Elem::Var(v, float), Elem::Known(s)) | (Elem::Known(s), Elem::Var(v, float)) => {
                let fits = if float { s.is_float() } else { s.is_integer() };
                if fits {
                    self.vars[v as usize].value = Some(s);
                }
                fits
            }
            (Elem::Var(v, fv), Elem::Var(w, fw)) => {
                if fv != fw {
                    return false;
                }
                if v != w {
                    self.vars[v as usize].parent = w;
                }
                true
            }
        }
    }

    pub(super) fn unify_tensor(&mut self, a: &TensorTy, b: &TensorTy) -> bool {
        a.dims == b.dims && {
            let (ea, eb) = (self.elem(a), self.elem(b));
            self.unify_elem(ea, eb)
        }
    }

    /// Makes `a` and `b` the same type if they can be; `Never` fits anything.
    pub(super) fn unify(&mut self, a: &Ty, b: &Ty) -> bool {
        match (a, b) {
            (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Tensor(x), Ty::Tensor(y)) => self.unify_tensor(x, y),
            (Ty::Tuple(xs), Ty::Tuple(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| self.unify(x, y))
            }
            _ => false,
        }
    }

    fn resolve_tensor(&mut self, t: &mut TensorTy) {
        if t.var.is_some() {
            let elem = match self.elem(t) {
                Elem::Known(s) => s,
                Elem::Var(r, float) => {
                    let s = if float {
                        ScalarType::F64
                    } else {
                        ScalarType::I64
                    };
                    self.vars[r as usize].value = Some(s);
                    s
                }
            };
            t.elem = elem;
            t.var = None;
        }
    }

    pub(super) fn resolve_ty(&mut self, ty: &mut Ty) {
        match ty {
            Ty::Tensor(t) => self.resolve_tensor(t),
            Ty::Tuple(items) => items.iter_mut().for_each(|t| self.resolve_ty(t)),
            Ty::Never => {}
        }
    }

    pub(super) fn show(&self, ty: &Ty) -> String {
        self.show_with(ty, &self.const_params)
    }

    pub(super) fn show_with(&self, ty: &Ty, generics: &[String]) -> String {
        match ty {
            Ty::Never => "!".to_string(),
            Ty::Tuple(items) => {
                let parts: Vec<String> =
                    items.iter().map(|t| self.show_with(t, generics)).collect();
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            }
            Ty::Tensor(t) => self.show_tensor_with(t, generics),
        }
    }

    pub(super) fn show_tensor(&self, t: &TensorTy) -> String {
        self.show_tensor_with(t, &self.const_params)
    }

    /// Like `show_tensor`, but an unsuffixed literal's type is shown as the
    /// type it defaults to; for messages about shapes, where the element
    /// type is not the point.
    pub(super) fn show_shape(&self, t: &TensorTy) -> String {
        let mut t = t.clone();
        if let Elem::Var(_, float) = self.elem(&t) {
            t.elem = if float {
                ScalarType::F64
            } else {
                ScalarType::I64
            };
            t.var = None;
        }
        self.show_tensor(&t)
    }

    fn show_tensor_with(&self, t: &TensorTy, generics: &[String]) -> String {
        let elem = match self.elem(t) {
            Elem::Known(s) => s.name().to_string(),
            Elem::Var(_, true) => "{float}".to_string(),
            Elem::Var(_, false) => "{integer}".to_string(),
        };
        let mut out = String::new();
        for _ in &t.dims {
            out.push('[');
        }
        out.push_str(&elem);
        for d in t.dims.iter().rev() {
            out.push_str("; ");
            out.push_str(&self.show_dim(*d, generics));
            out.push(']');
        }
        out
    }

    fn show_dim(&self, d: DimExpr, generics: &[String]) -> String {
        match d {
            DimExpr::Fixed(n) => n.to_string(),
            DimExpr::Symbol(s) => self
                .scope
                .symbols
                .get(s.0 as usize)
                .cloned()
                .unwrap_or_else(|| "?".into()),
            DimExpr::Generic(i) => generics
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| "?".into()),
        }
    }
}
