//! Shape functions: `expand_dims`, `reshape`, `broadcast_to`, `trans`, `split` and `join`.

use super::{Checker, ConstExpr, Val, Weak};
use crate::ast;
use crate::diag::Sp;
use fuse_ir::{Expr, Len, Shape, Ty, VarId};

impl Checker<'_> {
    /// A tile argument of a shape function (`expand_dims`, `reshape`, `trans`, ...).
    pub(super) fn tile_arg(&mut self, v: Val, sp: Sp, name: &str) -> Option<VarId> {
        match v {
            Val::Err => None,
            Val::Var { id, .. } if !self.ty(id).shape.is_scalar() => Some(id),
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    sp,
                    format!("`{name}` takes a tile, found {d}"),
                    "a scalar broadcasts by itself; make a tile with `full([M, N], x)`",
                );
                None
            }
        }
    }

    /// `expand_dims(x, axis)`: a unit dim inserted before dim `axis` (Triton's `x[None, :]` is
    /// axis 0, `x[:, None]` axis 1). Lanes keep their order: a [`Expr::Reshape`].
    pub(super) fn expand_dims(&mut self, x: Val, x_sp: Sp, axis: Val, axis_sp: Sp) -> Val {
        let Some(id) = self.tile_arg(x, x_sp, "expand_dims") else { return Val::Err };
        let ty = self.ty(id);
        let Shape::Tile(len) = &ty.shape else {
            self.diags.error_help(
                x_sp,
                format!("`expand_dims` of {} would make a 3-D tile", self.describe_ty(&ty)),
                "tiles have one or two dims",
            );
            return Val::Err;
        };
        let unit = Len::literal_log2(0);
        let shape = match axis {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(0))) => Shape::Tile2(unit, len.clone()),
            Val::Weak(Weak::Int(ConstExpr::Lit(1))) => Shape::Tile2(len.clone(), unit),
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    axis_sp,
                    format!("the axis of `expand_dims` of a 1-D tile must be the literal 0 or 1, found {d}"),
                    "`expand_dims(x, 0)` is `[1, N]` (Triton's `x[None, :]`), `expand_dims(x, 1)` is `[N, 1]` (`x[:, None]`)",
                );
                return Val::Err;
            }
        };
        self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Reshape(id))
    }

    /// `reshape(x, shape)` (same lane count, row-major order kept) or `broadcast_to(x, shape)`.
    pub(super) fn reshape_or_broadcast(
        &mut self,
        name: &str,
        x: Val,
        x_sp: Sp,
        dims: Option<Vec<Len>>,
        sp: Sp,
    ) -> Val {
        let id = match x {
            // `broadcast_to` of a scalar is `full`.
            v @ (Val::Weak(_) | Val::Var { .. }) if name == "broadcast_to" => {
                self.strong(v, x_sp, "the value of `broadcast_to`")
            }
            other => self.tile_arg(other, x_sp, name),
        };
        let (Some(id), Some(dims)) = (id, dims) else { return Val::Err };
        let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
        let ty = self.ty(id);
        if name == "reshape" {
            let (from, to) = (ty.shape.len(), shape.len());
            if from != to {
                let (a, b) = (self.shape_text(&ty.shape), self.shape_text(&shape));
                self.diags.error_help(
                    sp,
                    format!("`reshape` keeps the number of lanes: {a} cannot become {b}"),
                    "the product of the dims must stay the same",
                );
                return Val::Err;
            }
            return self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Reshape(id));
        }
        if ty.shape.is_scalar() {
            return self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Splat(id));
        }
        if Self::broadcast_shape(&ty.shape, &shape).as_ref() != Some(&shape) {
            let (a, b) = (self.shape_text(&ty.shape), self.shape_text(&shape));
            self.diags.error_help(
                sp,
                format!("cannot broadcast {} of shape {a} to {b}", ty.dtype),
                "dims aligned at the right must be equal, or 1 in the source",
            );
            return Val::Err;
        }
        let id = self.broadcast_var(id, &shape);
        Val::Var { id, fresh: true }
    }

    /// The two values of `let (even, odd) = init;`: `init` must be `split(x)` (or `x.split()`).
    pub(super) fn split_pair(&mut self, init: &ast::Expr) -> [Val; 2] {
        let ast::ExprKind::Call { func, args, .. } = &init.kind else {
            if !matches!(init.kind, ast::ExprKind::Error) {
                self.expr(init);
                self.diags.error_help(
                    init.sp,
                    "a tuple `let` takes the two halves of `split(x)`",
                    "bind other values one per `let`",
                );
            }
            return [Val::Err, Val::Err];
        };
        if func != "split" || args.len() != 1 {
            self.expr(init);
            self.diags.error_help(
                init.sp,
                format!("a tuple `let` takes the two halves of `split(x)`, not `{func}(..)`"),
                "bind other values one per `let`",
            );
            return [Val::Err, Val::Err];
        }
        let x_sp = args[0].sp;
        let x = self.expr(&args[0]);
        let Some(id) = self.tile_arg(x, x_sp, "split") else { return [Val::Err, Val::Err] };
        let ty = self.ty(id);
        let dims = ty.shape.dims();
        let last = dims.last().expect("a tile has dims");
        if *last == Len::literal_log2(0) {
            self.diags.error_help(
                x_sp,
                format!("`split` halves the last dim, which is 1 in {}", self.describe_ty(&ty)),
                "the last dim must be even: `split` of `[M, 2 * N]` gives two `[M, N]` tiles",
            );
            return [Val::Err, Val::Err];
        }
        let shape = last_dim_times(&ty.shape, -1);
        [0, 1].map(|half| {
            self.fresh(Ty { dtype: ty.dtype, shape: shape.clone() }, Expr::Split { src: id, half })
        })
    }

    /// `join(even, odd)`: two tiles of one shape and dtype interleaved along the last dim.
    pub(super) fn join(&mut self, a: Val, a_sp: Sp, b: Val, b_sp: Sp, sp: Sp) -> Val {
        let (Some(ia), Some(ib)) = (self.tile_arg(a, a_sp, "join"), self.tile_arg(b, b_sp, "join")) else {
            return Val::Err;
        };
        let (ta, tb) = (self.ty(ia), self.ty(ib));
        if ta != tb {
            let (x, y) = (self.describe_ty(&ta), self.describe_ty(&tb));
            self.diags.error_help(
                sp,
                format!("`join` interleaves two tiles of one shape and type: {x} and {y}"),
                "convert with `.to(T)`; broadcast with `broadcast_to(x, [M, N])`",
            );
            return Val::Err;
        }
        self.fresh(Ty { dtype: ta.dtype, shape: last_dim_times(&ta.shape, 1) }, Expr::Join(ia, ib))
    }

    /// `trans(x)` of a 2-D tile.
    pub(super) fn trans(&mut self, x: Val, x_sp: Sp) -> Val {
        let Some(id) = self.tile_arg(x, x_sp, "trans") else { return Val::Err };
        let ty = self.ty(id);
        let Shape::Tile2(r, c) = &ty.shape else {
            self.diags.error_help(
                x_sp,
                format!("`trans` takes a 2-D tile, found {}", self.describe_ty(&ty)),
                "make it 2-D first: `expand_dims(x, 0)` is `[1, N]`",
            );
            return Val::Err;
        };
        self.fresh(Ty::tile2(ty.dtype, c.clone(), r.clone()), Expr::Trans(id))
    }
}

/// `shape` (a tile) with its last dim multiplied by `2^log2` (`split` halves it, `join` doubles it).
fn last_dim_times(shape: &Shape, log2: i32) -> Shape {
    let mut dims = shape.dims();
    let last = dims.pop().expect("a tile has dims");
    dims.push(last.mul(&Len::literal_log2(log2)));
    Shape::from_dims(&dims).expect("the same rank")
}
