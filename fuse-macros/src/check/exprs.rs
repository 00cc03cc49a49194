//! Expressions and their typing: names, casts, unary and binary operators, and bringing two
//! operands to one compute type.

use super::describe::op_symbol;
use super::{Binding, Bound, Checker, ConstExpr, Val, Weak};
use crate::ast::{self, BinaryKind, ExprKind, UnaryKind};
use crate::diag::Sp;
use fuse_ir::{BinaryOp, DType, Expr, Literal, ParamKind, Ty, UnaryOp, VarId};

impl Checker<'_> {
    /// Whether `v` is an integer (a weak integer, or a var whose type computes as one) or an
    /// error already reported; otherwise reports "`what`, found ..." at `sp`, with `help`.
    pub(super) fn integer_or_report(&mut self, v: &Val, sp: Sp, what: &str, help: &str) -> bool {
        let integer = match v {
            Val::Err | Val::Weak(Weak::Int(_)) => true,
            Val::Var { id, .. } => self.ty(*id).dtype.compute().is_int(),
            _ => false,
        };
        if !integer {
            let found = self.describe(v);
            self.diags.error_help(sp, format!("{what}, found {found}"), help);
        }
        integer
    }

    /// Whether var `id` is bool; otherwise reports "`what` must be bool, found ..." at `sp`, with
    /// `help`.
    pub(super) fn bool_or_report(&mut self, id: VarId, sp: Sp, what: &str, help: &str) -> bool {
        let ty = self.ty(id);
        let bool = ty.dtype == DType::Bool;
        if !bool {
            self.diags.error_help(sp, format!("{what} must be bool, found {}", self.describe_ty(&ty)), help);
        }
        bool
    }

    pub(super) fn read(&mut self, b: &Binding) -> Val {
        match &b.bound {
            Bound::Var(id) => Val::Var { id: *id, fresh: false },
            Bound::Ptr { param, offset } => Val::Ptr { param: *param, offset: offset.clone().map(Box::new) },
            Bound::Weak(w) => Val::Weak(w.clone()),
            Bound::ScalarParam(i) => {
                let dtype = match self.params.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(d)) => d,
                    _ => DType::I32,
                };
                self.fresh(Ty::scalar(dtype), Expr::Param(*i))
            }
            Bound::Err => Val::Err,
        }
    }

    pub(super) fn expr(&mut self, e: &ast::Expr) -> Val {
        match &e.kind {
            ExprKind::Error => Val::Err,
            ExprKind::Int { value, suffix: None } => Val::Weak(Weak::Int(ConstExpr::Lit(i128::from(*value)))),
            ExprKind::Int { value, suffix: Some(d) } => self
                .materialize(&Weak::Int(ConstExpr::Lit(i128::from(*value))), *d, e.sp)
                .map_or(Val::Err, |id| Val::Var { id, fresh: true }),
            ExprKind::Float { value, suffix: None } => Val::Weak(Weak::Float(*value)),
            ExprKind::Float { value, suffix: Some(d) } => self
                .materialize(&Weak::Float(*value), *d, e.sp)
                .map_or(Val::Err, |id| Val::Var { id, fresh: true }),
            ExprKind::Bool(b) => self.fresh(Ty::scalar(DType::Bool), Expr::Lit(Literal::Bool(*b))),
            ExprKind::Name(id) => match self.lookup(&id.to_string()).cloned() {
                Some(b) => self.read(&b),
                None => {
                    self.undefined(id);
                    Val::Err
                }
            },
            ExprKind::Cast { expr, to } => {
                let v = self.expr(expr);
                self.cast(v, *to, expr.sp)
            }
            ExprKind::Unary { op, expr } => {
                let v = self.expr(expr);
                self.unary(*op, v, e.sp)
            }
            ExprKind::Binary { op, op_sp, lhs, rhs } => {
                let a = self.expr(lhs);
                let b = self.expr(rhs);
                self.binary(*op, a, b, *op_sp, lhs.sp, rhs.sp)
            }
            ExprKind::Call { func, args, method } => self.call(func, args, *method, e.sp),
            ExprKind::Shape(elems) => self.shape_literal(elems, e.sp),
        }
    }

    pub(super) fn cast(&mut self, v: Val, to: DType, sp: Sp) -> Val {
        match v {
            Val::Err => Val::Err,
            Val::Weak(Weak::Int(ce)) if to.is_int() || to.is_float() => {
                self.materialize(&Weak::Int(ce), to, sp).map_or(Val::Err, |id| Val::Var { id, fresh: true })
            }
            Val::Weak(w @ Weak::Float(_)) if to.is_float() => {
                self.materialize(&w, to, sp).map_or(Val::Err, |id| Val::Var { id, fresh: true })
            }
            Val::Weak(w) => {
                let d = Self::default_dtype(&w);
                match self.materialize(&w, d, sp) {
                    Some(id) => Val::Var { id: self.cast_to(id, to), fresh: true },
                    None => Val::Err,
                }
            }
            Val::Var { id, fresh } => {
                if self.ty(id).dtype == to {
                    Val::Var { id, fresh }
                } else {
                    Val::Var { id: self.cast_to(id, to), fresh: true }
                }
            }
            other => {
                let d = self.describe(&other);
                self.diags.error(sp, format!("cannot convert {d} to {to}"));
                Val::Err
            }
        }
    }

    pub(super) fn unary(&mut self, op: UnaryKind, v: Val, sp: Sp) -> Val {
        match (op, v) {
            (_, Val::Err) => Val::Err,
            (UnaryKind::Neg, Val::Weak(Weak::Float(f))) => Val::Weak(Weak::Float(-f)),
            (UnaryKind::Neg, Val::Weak(Weak::Int(ConstExpr::Lit(v)))) => {
                Val::Weak(Weak::Int(ConstExpr::Lit(-v)))
            }
            (UnaryKind::Neg, Val::Weak(Weak::Int(ce))) => Val::Weak(Weak::Int(ConstExpr::Neg(Box::new(ce)))),
            (op, v) => {
                let what = if op == UnaryKind::Neg { "`-`" } else { "`!`" };
                let Some(id) = self.strong(v, sp, &format!("the operand of {what}")) else { return Val::Err };
                let id = self.widen(id);
                let ty = self.ty(id);
                let ok = match op {
                    UnaryKind::Neg => ty.dtype != DType::Bool,
                    UnaryKind::Not => !ty.dtype.is_float(),
                };
                if !ok {
                    let help = if op == UnaryKind::Neg {
                        "negate numbers; for bools use `!`"
                    } else {
                        "`!` is logical not on bools and bitwise not on integers"
                    };
                    self.diags.error_help(
                        sp,
                        format!("{what} cannot be applied to {}", self.describe_ty(&ty)),
                        help,
                    );
                    return Val::Err;
                }
                let uop = if op == UnaryKind::Neg { UnaryOp::Neg } else { UnaryOp::Not };
                self.fresh(ty, Expr::Unary(uop, id))
            }
        }
    }

    /// Brings two operands to one compute dtype: weak values adapt, storage types widen.
    /// Returns the vars and their common dtype.
    pub(super) fn unify(
        &mut self,
        a: Val,
        b: Val,
        op_sp: Sp,
        a_sp: Sp,
        b_sp: Sp,
        what: &str,
    ) -> Option<(VarId, VarId)> {
        let (a, b) = match (a, b) {
            (Val::Err, _) | (_, Val::Err) => return None,
            (Val::Weak(wa), Val::Weak(wb)) => {
                let d = if matches!(wa, Weak::Float(_)) || matches!(wb, Weak::Float(_)) {
                    DType::F32
                } else {
                    DType::I32
                };
                (self.materialize(&wa, d, a_sp)?, self.materialize(&wb, d, b_sp)?)
            }
            (Val::Weak(wa), b) => {
                let b = self.strong(b, b_sp, what)?;
                let b = self.widen(b);
                let d = self.ty(b).dtype;
                (self.weak_operand(&wa, d, a_sp, b, what)?, b)
            }
            (a, Val::Weak(wb)) => {
                let a = self.strong(a, a_sp, what)?;
                let a = self.widen(a);
                let d = self.ty(a).dtype;
                (a, self.weak_operand(&wb, d, b_sp, a, what)?)
            }
            (a, b) => {
                let a = self.strong(a, a_sp, what);
                let b = self.strong(b, b_sp, what);
                let (a, b) = (a?, b?);
                (self.widen(a), self.widen(b))
            }
        };
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            let target = if tb.dtype.is_float() { tb.dtype } else { ta.dtype };
            self.diags.error_help(
                op_sp,
                format!(
                    "mismatched types in {what}: {} and {}",
                    self.describe_ty(&ta),
                    self.describe_ty(&tb)
                ),
                format!("convert one operand explicitly, e.g. `(..).to({target})`"),
            );
            return None;
        }
        Some((a, b))
    }

    /// A weak operand next to a typed one of dtype `d`.
    pub(super) fn weak_operand(
        &mut self,
        w: &Weak,
        d: DType,
        sp: Sp,
        other: VarId,
        what: &str,
    ) -> Option<VarId> {
        if matches!(w, Weak::Float(_)) && !d.is_float() {
            let t = self.describe_ty(&self.ty(other));
            self.diags.error_help(
                sp,
                format!("mismatched types in {what}: a float literal next to {t}"),
                format!("convert the {d} operand: `(..).to(f32)`"),
            );
            return None;
        }
        if d == DType::Bool {
            self.diags.error(sp, format!("mismatched types in {what}: a number next to a bool"));
            return None;
        }
        self.materialize(w, d, sp)
    }

    pub(super) fn binary(&mut self, op: BinaryKind, a: Val, b: Val, op_sp: Sp, a_sp: Sp, b_sp: Sp) -> Val {
        self.binary_as(op, op_symbol(op), a, b, op_sp, a_sp, b_sp)
    }

    /// `binary`, with the operator spelled `sym` in messages (`+=` for a compound assignment).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn binary_as(
        &mut self,
        op: BinaryKind,
        sym: &str,
        a: Val,
        b: Val,
        op_sp: Sp,
        a_sp: Sp,
        b_sp: Sp,
    ) -> Val {
        let bop = match op {
            BinaryKind::Op(o) => o,
            BinaryKind::LogicalAnd => BinaryOp::And,
            BinaryKind::LogicalOr => BinaryOp::Or,
        };
        if matches!(a, Val::Err) || matches!(b, Val::Err) {
            return Val::Err;
        }
        if matches!(a, Val::Ptr { .. }) || matches!(b, Val::Ptr { .. }) {
            return self.pointer_arith(bop, sym, a, b, op_sp, a_sp, b_sp);
        }
        // Constants fold and stay weak where the result can still adapt.
        if let (Val::Weak(wa), Val::Weak(wb)) = (&a, &b) {
            if op == BinaryKind::Op(bop) {
                if let Some(folded) = self.fold(bop, wa, wb, op_sp) {
                    return folded;
                }
            }
        }
        let what = format!("`{sym}`");
        let Some((x, y)) = self.unify(a, b, op_sp, a_sp, b_sp, &what) else { return Val::Err };
        let dtype = self.ty(x).dtype;
        let logical = matches!(op, BinaryKind::LogicalAnd | BinaryKind::LogicalOr);
        let problem = if logical && dtype != DType::Bool {
            Some(("`&&` and `||` take bools", "compare first, or use `&`/`|` on integers"))
        } else if bop.is_bitwise() && dtype.is_float() {
            Some(("bitwise operators take bools or integers", "compare first, e.g. `x > 0.0`"))
        } else if !bop.is_bitwise() && !matches!(bop, BinaryOp::Eq | BinaryOp::Ne) && dtype == DType::Bool {
            Some((
                "arithmetic and ordering are not defined on bools",
                "use `&`, `|`, `^`, `!` for logic, or `.to(i32)`",
            ))
        } else {
            None
        };
        if let Some((msg, help)) = problem {
            self.diags.error_help(
                op_sp,
                format!("`{sym}` cannot be applied to {}: {msg}", self.describe_ty(&self.ty(x))),
                help,
            );
            return Val::Err;
        }
        let mut ops = [x, y];
        let Some(shape) = self.broadcast_operands(&mut ops, op_sp) else { return Val::Err };
        let [x, y] = ops;
        let rdtype = if bop.is_comparison() { DType::Bool } else { dtype };
        self.fresh(Ty { dtype: rdtype, shape }, Expr::Binary(bop, x, y))
    }
}
