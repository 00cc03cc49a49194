//! Pointers and memory: `ptr + offsets` (folded into the access), and `load`/`store` with their
//! masks, `other` values and stored values.

use super::describe::op_symbol;
use super::{Checker, Val};
use crate::ast::{BinaryKind, UnaryKind};
use crate::diag::Sp;
use fuse_ir::{BinaryOp, DType, Expr, Literal, Shape, Stmt, Ty, VarId};

impl Checker<'_> {
    /// `ptr + offset`, `offset + ptr`, `ptr - offset`: the offset accumulates; nothing is emitted
    /// until a load or store uses the pointer. `sym` spells the operator in messages (`+=`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pointer_arith(
        &mut self,
        op: BinaryOp,
        sym: &str,
        a: Val,
        b: Val,
        op_sp: Sp,
        a_sp: Sp,
        b_sp: Sp,
    ) -> Val {
        let (param, offset, delta, delta_sp, negate) = match (op, a, b) {
            (BinaryOp::Add, Val::Ptr { param, offset }, d) => (param, offset, d, b_sp, false),
            (BinaryOp::Add, d, Val::Ptr { param, offset }) if !matches!(d, Val::Ptr { .. }) => {
                (param, offset, d, a_sp, false)
            }
            (BinaryOp::Sub, Val::Ptr { param, offset }, d) if !matches!(d, Val::Ptr { .. }) => {
                (param, offset, d, b_sp, true)
            }
            (op, a, b) => {
                let both = matches!(a, Val::Ptr { .. }) && matches!(b, Val::Ptr { .. });
                let (msg, help) = if both {
                    (
                        "two pointers cannot be combined".to_string(),
                        "add an integer offset to one pointer: `x + offs`".to_string(),
                    )
                } else {
                    (
                        format!("`{}` is not defined on pointers", op_symbol(BinaryKind::Op(op))),
                        "pointers support `ptr + offset` and `ptr - offset`; read values with `load(ptr, mask)`".to_string(),
                    )
                };
                self.diags.error_help(op_sp, msg, help);
                return Val::Err;
            }
        };
        // The offset must be an integer.
        let help = "offsets count elements; convert with `.to(i32)`";
        if matches!(delta, Val::Err)
            || !self.integer_or_report(&delta, delta_sp, "pointer offsets must be integers", help)
        {
            return Val::Err;
        }
        // Offsets are carried in their compute type (an i8/u8 load widens to i32), so a pointer
        // variable's offsets take any integer advance of that type.
        let delta = match delta {
            Val::Var { id, fresh } if !self.ty(id).dtype.is_compute() => {
                let wide = self.widen(id);
                Val::Var { id: wide, fresh: fresh || wide != id }
            }
            other => other,
        };
        let new_offset = match offset {
            None if negate => self.unary(UnaryKind::Neg, delta, delta_sp),
            None => delta,
            Some(o) => {
                let kind = BinaryKind::Op(if negate { BinaryOp::Sub } else { BinaryOp::Add });
                self.binary_as(kind, sym, *o, delta, op_sp, a_sp, delta_sp)
            }
        };
        if matches!(new_offset, Val::Err) {
            return Val::Err;
        }
        Val::Ptr { param, offset: Some(Box::new(new_offset)) }
    }

    /// The pointer argument of `load`/`store` as `(param, offset var)`.
    pub(super) fn pointer(&mut self, ptr: Val, sp: Sp, func: &str) -> Option<(u32, VarId)> {
        match ptr {
            Val::Err => None,
            Val::Ptr { param, offset } => {
                let off = match offset.map(|b| *b) {
                    None => self.emit(Ty::scalar(DType::I32), Expr::Lit(Literal::Int(0))),
                    Some(v) => {
                        let id = self.strong(v, sp, "a pointer offset")?;
                        self.widen(id)
                    }
                };
                Some((param, off))
            }
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    sp,
                    format!("`{func}` expects a pointer, found {d}"),
                    "pass a pointer parameter plus offsets, like `x + offs`",
                );
                None
            }
        }
    }

    /// Checks that a mask is bool (reporting it otherwise), giving its var and span.
    pub(super) fn bool_mask(&mut self, m: Option<(Val, Sp)>, func: &str) -> Result<Option<(VarId, Sp)>, ()> {
        let Some((v, sp)) = m else { return Ok(None) };
        let id = self.strong(v, sp, &format!("the mask of `{func}`")).ok_or(())?;
        let help = "compare the offsets with the bound: `offs < n`";
        if !self.bool_or_report(id, sp, &format!("the mask of `{func}`"), help) {
            return Err(());
        }
        Ok(Some((id, sp)))
    }

    /// A mask: bool, scalar or a tile of the offset's length.
    pub(super) fn mask(
        &mut self,
        m: Option<(Val, Sp)>,
        param: u32,
        offset: VarId,
        func: &str,
    ) -> Result<Option<VarId>, ()> {
        let Some((id, sp)) = self.bool_mask(m, func)? else { return Ok(None) };
        self.fits_offset(id, param, offset, sp, &format!("the mask of `{func}`"))?;
        Ok(Some(id))
    }

    /// A mask whose shape is not compared with the offsets (they are already reported).
    pub(super) fn mask_dtype_only(&mut self, m: Option<(Val, Sp)>, func: &str) -> Result<Option<VarId>, ()> {
        match self.bool_mask(m, func)? {
            None => Ok(None),
            Some(_) => Err(()),
        }
    }

    /// A mask/value/other must be a scalar or a tile that broadcasts with the offsets.
    pub(super) fn fits_offset(
        &mut self,
        id: VarId,
        param: u32,
        offset: VarId,
        sp: Sp,
        what: &str,
    ) -> Result<(), ()> {
        let (ty, oty) = (self.ty(id), self.ty(offset));
        match (&ty.shape, &oty.shape) {
            (Shape::Scalar, _) => Ok(()),
            (_, Shape::Scalar) => {
                self.diags.error_help(
                    sp,
                    format!("{what} is {}, but the pointer offset is a scalar", self.describe_ty(&ty)),
                    format!("add a tile of offsets to the pointer: `{} + offs`", self.param_name(param)),
                );
                Err(())
            }
            // The same rule as element-wise operations: a `[1]` mask or offset tile broadcasts.
            (a, b) if Self::broadcast_shape(a, b).is_some() => Ok(()),
            (Shape::Tile(a), Shape::Tile(b)) => {
                self.diags.error(
                    sp,
                    format!(
                        "tile lengths differ: {what} has length {}, the offsets {}",
                        self.len_text(a),
                        self.len_text(b)
                    ),
                );
                Err(())
            }
            (a, b) => {
                let (x, y) = (self.shape_text(a), self.shape_text(b));
                self.diags.error_help(
                    sp,
                    format!("cannot broadcast {what} of shape {x} with the offsets' shape {y}"),
                    "dims aligned at the right must be equal or 1",
                );
                Err(())
            }
        }
    }

    /// A value written to (or substituted for) elements of type `elem`: its compute type must be
    /// `elem`'s; the narrowing cast is inserted here.
    pub(super) fn element_value(&mut self, v: Val, elem: DType, sp: Sp, what: &str) -> Option<VarId> {
        let id = match v {
            Val::Weak(w) => self.materialize(&w, elem.compute(), sp)?,
            other => {
                let id = self.strong(other, sp, what)?;
                self.widen(id)
            }
        };
        let ty = self.ty(id);
        if ty.dtype != elem.compute() {
            self.diags.error_help(
                sp,
                format!("mismatched types: {what} must be {elem}, found {}", self.describe_ty(&ty)),
                format!("convert it: `(..).to({elem})`"),
            );
            return None;
        }
        Some(self.cast_to(id, elem))
    }

    pub(super) fn load(
        &mut self,
        ptr: Val,
        ptr_sp: Sp,
        mask: Option<(Val, Sp)>,
        other: Option<(Val, Sp)>,
    ) -> Val {
        let Some((param, offset)) = self.pointer(ptr, ptr_sp, "load") else { return Val::Err };
        let (elem, _) = self.param_elem(param);
        let mask = self.mask(mask, param, offset, "load");
        let other = match other {
            None => Ok(None),
            Some((v, sp)) => match self.element_value(v, elem, sp, "the `other` value of `load`") {
                Some(id) => {
                    self.fits_offset(id, param, offset, sp, "the `other` value of `load`").map(|()| Some(id))
                }
                None => Err(()),
            },
        };
        let (Ok(mask), Ok(other)) = (mask, other) else { return Val::Err };
        // Offsets, mask and `other` broadcast together (a `[1, N]` row of offsets under an
        // `[M, N]` mask loads `M` copies).
        let mut ids: Vec<VarId> = [Some(offset), mask, other].into_iter().flatten().collect();
        let Some(shape) = self.broadcast_operands(&mut ids, ptr_sp) else { return Val::Err };
        let mut ids = ids.into_iter();
        let offset = ids.next().unwrap_or(offset);
        let mask = mask.and_then(|_| ids.next());
        let other = other.and_then(|_| ids.next());
        self.fresh(Ty { dtype: elem, shape }, Expr::Load { param, offset, mask, other })
    }

    pub(super) fn store(
        &mut self,
        ptr: Val,
        ptr_sp: Sp,
        value: Val,
        value_sp: Sp,
        mask: Option<(Val, Sp)>,
    ) -> Val {
        let Some((param, offset)) = self.pointer(ptr, ptr_sp, "store") else { return Val::Unit };
        let (elem, mutable) = self.param_elem(param);
        let name = self.param_name(param);
        if !mutable {
            self.diags.error_help(
                ptr_sp,
                format!("cannot store through `{name}`: it is a `*const {elem}` parameter"),
                format!("declare it writable: `{name}: *mut {elem}`"),
            );
        }
        let value = self.element_value(value, elem, value_sp, &format!("the value stored into `{name}`"));
        let value_fits = value.map(|v| self.fits_offset(v, param, offset, value_sp, "the stored value"));
        // A tile stored through a scalar pointer is one mistake: the mask's shape says nothing new.
        let mask = if value_fits == Some(Err(())) {
            self.mask_dtype_only(mask, "store")
        } else {
            self.mask(mask, param, offset, "store")
        };
        let value = value.filter(|_| value_fits == Some(Ok(())));
        if let (true, Some(value), Ok(mask)) = (mutable, value, mask) {
            let mut ids: Vec<VarId> = [Some(offset), Some(value), mask].into_iter().flatten().collect();
            if self.broadcast_operands(&mut ids, ptr_sp).is_some() {
                let (offset, value, mask) = (ids[0], ids[1], mask.map(|_| ids[2]));
                self.out.push(Stmt::Store { param, offset, value, mask });
            }
        }
        Val::Unit
    }
}
