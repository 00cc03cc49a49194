//! Building the IR: vars, temporaries and statements, and the widening and narrowing casts.

use super::{Checker, Val};
use fuse_ir::{DType, Expr, Stmt, Ty, Var, VarId};

impl Checker<'_> {
    pub(super) fn ty(&self, id: VarId) -> Ty {
        self.vars.get(id.0 as usize).map_or(Ty::scalar(DType::I32), |v| v.ty.clone())
    }

    pub(super) fn new_named(&mut self, base: &str, ty: Ty) -> VarId {
        let name = self.unique_name(base);
        self.vars.push(Var { name, ty });
        VarId(self.vars.len() as u32 - 1)
    }

    /// `tN = expr` with a fresh temporary.
    pub(super) fn emit(&mut self, ty: Ty, expr: Expr) -> VarId {
        let name = self.temp_name();
        self.vars.push(Var { name, ty });
        let dst = VarId(self.vars.len() as u32 - 1);
        self.out.push(Stmt::Assign { dst, expr });
        dst
    }

    pub(super) fn fresh(&mut self, ty: Ty, expr: Expr) -> Val {
        Val::Var { id: self.emit(ty, expr), fresh: true }
    }

    /// Gives a fresh temporary the user's name (its `tN` name is free again).
    pub(super) fn rename(&mut self, id: VarId, base: &str) {
        if let Some(v) = self.vars.get(id.0 as usize) {
            self.used_names.remove(&v.name);
        }
        let name = self.unique_name(base);
        if let Some(v) = self.vars.get_mut(id.0 as usize) {
            v.name = name;
        }
    }

    /// `dst = value`, reusing the statement that computed `value` when it is a fresh temporary.
    pub(super) fn assign_into(&mut self, dst: VarId, value: VarId, fresh: bool) {
        if fresh && self.ty(dst) == self.ty(value) {
            if let Some(Stmt::Assign { dst: last, .. }) = self.out.last_mut() {
                if *last == value {
                    *last = dst;
                    return;
                }
            }
        }
        self.out.push(Stmt::Assign { dst, expr: Expr::Copy(value) });
    }

    /// Widens a storage-typed var (f16/bf16 → f32, i8/u8 → i32) before arithmetic.
    pub(super) fn widen(&mut self, id: VarId) -> VarId {
        let ty = self.ty(id);
        if ty.dtype.is_compute() {
            return id;
        }
        self.emit(Ty { dtype: ty.dtype.compute(), shape: ty.shape }, Expr::Cast(id))
    }

    pub(super) fn cast_to(&mut self, id: VarId, dtype: DType) -> VarId {
        let ty = self.ty(id);
        if ty.dtype == dtype {
            return id;
        }
        self.emit(Ty { dtype, shape: ty.shape }, Expr::Cast(id))
    }
}
