//! Reductions: `sum`, `max`, `min`, `argmax` and `argmin`, of a whole tile or along an axis.

use super::{Checker, ConstExpr, Val, Weak};
use crate::diag::Sp;
use fuse_ir::{ArgOp, DType, Expr, ReduceOp, Shape, Ty};

/// What a reduction function computes.
#[derive(Clone, Copy)]
pub(super) enum Reduction {
    Reduce(ReduceOp),
    Arg(ArgOp),
}

impl Checker<'_> {
    /// `sum/max/min/argmax/argmin(x)` (every lane, to a scalar) or `(x, axis)`.
    /// `method`: written `t.max(..)` (for the hint's spelling).
    pub(super) fn reduce(
        &mut self,
        op: Reduction,
        name: &str,
        v: Val,
        sp: Sp,
        axis: Option<(Val, Sp)>,
        method: bool,
    ) -> Val {
        // `max(a, b)` meant `maximum(a, b)`: say so before anything about `a`.
        if let Some((other, axis_sp)) = &axis {
            if !matches!(other, Val::Err | Val::Weak(Weak::Int(ConstExpr::Lit(_)))) {
                let d = self.describe(other);
                let help = match op {
                    Reduction::Reduce(ReduceOp::Max | ReduceOp::Min) if method => format!(
                        "`.{name}()` reduces one tile; for the element-wise {name} of two values use `a.{name}imum(b)`"
                    ),
                    Reduction::Reduce(ReduceOp::Max | ReduceOp::Min) => format!(
                        "`{name}` reduces one tile; for the element-wise {name} of two values use `{name}imum(a, b)`"
                    ),
                    _ => "write the axis as a literal: `x.sum(1)` reduces each row".to_string(),
                };
                self.diags.error_help(
                    *axis_sp,
                    format!("the axis of `{name}` must be the literal 0 or 1, found {d}"),
                    help,
                );
                return Val::Err;
            }
        }
        let id = match v {
            Val::Err => return Val::Err,
            Val::Var { id, .. } if !self.ty(id).shape.is_scalar() => id,
            other => {
                let d = self.describe(&other);
                let help = if axis.is_some() {
                    "a scalar has no axes to reduce along"
                } else {
                    "a scalar needs no reduction"
                };
                self.diags.error_help(sp, format!("`{name}` reduces a tile, found {d}"), help);
                return Val::Err;
            }
        };
        let rank = self.ty(id).shape.rank();
        let axis = match axis {
            None => None,
            Some((Val::Err, _)) => return Val::Err,
            Some((Val::Weak(Weak::Int(ConstExpr::Lit(a))), _)) if (0..rank as i128).contains(&a) => {
                Some(a as u8)
            }
            Some((Val::Weak(Weak::Int(ConstExpr::Lit(a))), axis_sp)) => {
                let t = self.describe_ty(&self.ty(id));
                self.diags.error_help(
                    axis_sp,
                    format!(
                        "axis {a} is out of range: `{name}` of {t} takes axis 0{}",
                        if rank == 2 { " or 1" } else { "" }
                    ),
                    "axis 0 runs down the rows (`[M, N]` → `[N]`), axis 1 along each row (`[M, N]` → `[M]`)",
                );
                return Val::Err;
            }
            Some(_) => return Val::Err,
        };
        let id = self.widen(id);
        let ty = self.ty(id);
        if ty.dtype == DType::Bool {
            self.diags.error_help(
                sp,
                format!("`{name}` cannot reduce a bool tile"),
                "convert it first: `(..).to(i32)`",
            );
            return Val::Err;
        }
        // Along the one axis of a 1-D tile: every lane, as without an axis.
        let axis = axis.filter(|_| rank == 2);
        let kept = match (&ty.shape, axis) {
            (Shape::Tile2(_, cols), Some(0)) => Shape::Tile(cols.clone()),
            (Shape::Tile2(rows, _), Some(_)) => Shape::Tile(rows.clone()),
            _ => Shape::Scalar,
        };
        match (op, axis) {
            (Reduction::Reduce(op), None) => self.fresh(Ty::scalar(ty.dtype), Expr::Reduce(op, id)),
            (Reduction::Reduce(op), Some(axis)) => {
                self.fresh(Ty { dtype: ty.dtype, shape: kept }, Expr::ReduceAxis { op, axis, src: id })
            }
            (Reduction::Arg(op), axis) => {
                self.fresh(Ty { dtype: DType::I32, shape: kept }, Expr::ArgReduce { op, axis, src: id })
            }
        }
    }
}
