//! NumPy broadcasting: the shape operands broadcast to, the explicit [`Expr::Broadcast`]s that
//! spare the back ends from re-deriving it, and the message when shapes do not fit.

use super::Checker;
use crate::diag::Sp;
use fuse_ir::{Expr, Len, Shape, Ty, VarId};

impl Checker<'_> {
    /// The shape two operands broadcast to (NumPy's rule: dims aligned at the right, each pair
    /// equal or one of them the literal 1); `None` where they do not.
    pub(super) fn broadcast_shape(a: &Shape, b: &Shape) -> Option<Shape> {
        let (da, db) = (a.dims(), b.dims());
        let rank = da.len().max(db.len());
        let unit = Len::literal_log2(0);
        let mut dims = Vec::with_capacity(rank);
        for i in 0..rank {
            let x = (i + da.len()).checked_sub(rank).map(|j| &da[j]);
            let y = (i + db.len()).checked_sub(rank).map(|j| &db[j]);
            dims.push(match (x, y) {
                (Some(x), Some(y)) if x == y => x.clone(),
                (Some(x), Some(y)) if *x == unit => y.clone(),
                (Some(x), Some(y)) if *y == unit => x.clone(),
                (Some(_), Some(_)) => return None,
                (Some(d), None) | (None, Some(d)) => d.clone(),
                (None, None) => unreachable!("i < rank"),
            });
        }
        Shape::from_dims(&dims)
    }

    pub(super) fn report_broadcast(&mut self, a: &Shape, b: &Shape, sp: Sp) {
        if let (Shape::Tile(x), Shape::Tile(y)) = (a, b) {
            let (x, y) = (self.len_text(x), self.len_text(y));
            self.diags.error_help(
                sp,
                format!("tile lengths differ: {x} and {y}"),
                "tiles in one operation must have the same length (scalars broadcast)",
            );
        } else {
            let (x, y) = (self.shape_text(a), self.shape_text(b));
            self.diags.error_help(
                sp,
                format!("cannot broadcast shapes {x} and {y}"),
                "dims aligned at the right must be equal or 1; add a unit axis with `expand_dims(x, axis)`",
            );
        }
    }

    /// Broadcasts operands to their common shape (scalars stay scalars: every back end repeats
    /// them), inserting [`Expr::Broadcast`] for tiles of another shape. `None` after reporting.
    pub(super) fn broadcast_operands(&mut self, ids: &mut [VarId], sp: Sp) -> Option<Shape> {
        let mut shape = Shape::Scalar;
        for &id in ids.iter() {
            let s = self.ty(id).shape;
            match Self::broadcast_shape(&shape, &s) {
                Some(joined) => shape = joined,
                None => {
                    self.report_broadcast(&shape, &s, sp);
                    return None;
                }
            }
        }
        for id in ids.iter_mut() {
            *id = self.broadcast_var(*id, &shape);
        }
        Some(shape)
    }

    /// `id` as a value of `shape` (which it must broadcast to): itself if it is a scalar or
    /// already has that shape, else a [`Expr::Broadcast`].
    pub(super) fn broadcast_var(&mut self, id: VarId, shape: &Shape) -> VarId {
        let ty = self.ty(id);
        if ty.shape.is_scalar() || ty.shape == *shape {
            id
        } else {
            self.emit(Ty { dtype: ty.dtype, shape: shape.clone() }, Expr::Broadcast(id))
        }
    }
}
