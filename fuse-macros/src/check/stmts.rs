//! Statements: `let`, assignments (to vars and to pointer variables), `if` and `for`.

use super::describe::op_symbol;
use super::{Binding, Bound, Checker, ConstExpr, Origin, Val, Weak};
use crate::ast::{self, BinaryKind};
use crate::diag::Sp;
use fuse_ir::{BinaryOp, DType, Expr, Literal, Shape, Stmt, Ty, VarId};
use proc_macro2::Ident;
use std::collections::HashMap;

impl Checker<'_> {
    pub(super) fn block_in_scope(&mut self, b: &ast::Block) {
        self.scopes.push(HashMap::new());
        for s in &b.stmts {
            self.stmt(s);
        }
        self.scopes.pop();
    }

    /// Checks `b` in a new scope and returns its statements.
    pub(super) fn nested_body(&mut self, b: &ast::Block) -> Vec<Stmt> {
        let saved = std::mem::take(&mut self.out);
        self.block_in_scope(b);
        std::mem::replace(&mut self.out, saved)
    }

    pub(super) fn stmt(&mut self, s: &ast::Stmt) {
        match s {
            ast::Stmt::Let { name, mutable, init, .. } => {
                let v = self.expr(init);
                self.let_binding(name, *mutable, v, init.sp);
            }
            ast::Stmt::LetPair { names, init } => {
                let halves = self.split_pair(init);
                for ((name, mutable), v) in names.iter().zip(halves) {
                    self.let_binding(name, *mutable, v, init.sp);
                }
            }
            ast::Stmt::Assign { target, op, value, sp } => self.assign(target, *op, value, *sp),
            ast::Stmt::Expr { expr, semi } => {
                let v = self.expr(expr);
                if !semi && !matches!(v, Val::Unit | Val::Err) {
                    self.diags.error_help(
                        expr.sp,
                        "a kernel returns nothing, but this block ends in a value",
                        "add `;` or bind it with `let`",
                    );
                }
            }
            ast::Stmt::If(i) => {
                let stmt = self.if_stmt(i);
                if let Some(stmt) = stmt {
                    self.out.push(stmt);
                }
            }
            ast::Stmt::For { var, start, end, step, body, sp } => {
                self.for_loop(var, start, end, step.as_ref(), body, *sp)
            }
        }
    }

    pub(super) fn let_binding(&mut self, name: &Ident, mutable: bool, v: Val, sp: Sp) {
        let s = name.to_string();
        let bound = match v {
            Val::Err => Bound::Err,
            Val::Unit => {
                self.diags.error(sp, format!("`{s}` would bind nothing: `store(..)` returns no value"));
                Bound::Err
            }
            Val::Shape(dims) => {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot hold the shape {}: shapes are not values", self.dims_text(&dims)),
                    "write the shape where it is used, e.g. `zeros([ROWS, BLOCK])`",
                );
                Bound::Err
            }
            Val::Weak(w) if !mutable => Bound::Weak(w),
            Val::Weak(w) => {
                let d = Self::default_dtype(&w);
                match self.materialize(&w, d, sp) {
                    Some(id) => {
                        self.rename(id, &s);
                        Bound::Var(id)
                    }
                    None => Bound::Err,
                }
            }
            Val::Var { id, fresh: true } => {
                self.rename(id, &s);
                Bound::Var(id)
            }
            Val::Var { id, fresh: false } => {
                let ty = self.ty(id);
                let dst = self.new_named(&s, ty);
                self.out.push(Stmt::Assign { dst, expr: Expr::Copy(id) });
                Bound::Var(dst)
            }
            Val::Ptr { param, offset } => {
                let base = format!("{s}_off");
                let offset = match offset.map(|b| *b) {
                    None if !mutable => None,
                    Some(Val::Weak(w)) if !mutable => Some(Val::Weak(w)),
                    None => {
                        let id = self.new_named(&base, Ty::scalar(DType::I32));
                        self.out.push(Stmt::Assign { dst: id, expr: Expr::Lit(Literal::Int(0)) });
                        Some(Val::Var { id, fresh: false })
                    }
                    Some(Val::Weak(w)) => {
                        let id = self.materialize(&w, DType::I32, sp);
                        id.map(|id| {
                            self.rename(id, &base);
                            Val::Var { id, fresh: false }
                        })
                    }
                    Some(Val::Var { id, fresh: true }) => {
                        self.rename(id, &base);
                        Some(Val::Var { id, fresh: false })
                    }
                    Some(Val::Var { id, fresh: false }) => {
                        let ty = self.ty(id);
                        let dst = self.new_named(&base, ty);
                        self.out.push(Stmt::Assign { dst, expr: Expr::Copy(id) });
                        Some(Val::Var { id: dst, fresh: false })
                    }
                    Some(_) => None,
                };
                Bound::Ptr { param, offset }
            }
        };
        self.bind(s, Binding { bound, mutable, origin: Origin::Local });
    }

    pub(super) fn assign(&mut self, target: &Ident, op: Option<(BinaryOp, Sp)>, value: &ast::Expr, sp: Sp) {
        let name = target.to_string();
        let target_sp = Sp::single(target.span());
        let rhs = self.expr(value);
        let Some(binding) = self.lookup(&name).cloned() else {
            self.undefined(target);
            return;
        };
        if matches!(binding.bound, Bound::Err) {
            return;
        }
        if !binding.mutable {
            match binding.origin {
                Origin::Param => self.diags.error_help(
                    target_sp,
                    format!("cannot assign to the parameter `{name}`"),
                    format!("shadow it with a mutable copy: `let mut {name} = {name};`"),
                ),
                Origin::Const => {
                    self.diags.error(target_sp, format!("cannot assign to the const generic `{name}`"))
                }
                Origin::LoopVar => self.diags.error_help(
                    target_sp,
                    format!("cannot assign to the loop variable `{name}`"),
                    format!("copy it first: `let mut {name} = {name};`"),
                ),
                Origin::Local => self.diags.error_help(
                    target_sp,
                    format!("cannot assign twice to the immutable variable `{name}`"),
                    format!("declare it mutable: `let mut {name} = ...;`"),
                ),
            }
            return;
        }
        let new = match op {
            None => rhs,
            Some((op, op_sp)) => {
                let cur = self.read(&binding);
                let sym = format!("{}=", op_symbol(BinaryKind::Op(op)));
                self.binary_as(BinaryKind::Op(op), &sym, cur, rhs, op_sp, target_sp, value.sp)
            }
        };
        match binding.bound {
            Bound::Var(dst) => self.store_into_var(dst, &name, new, value.sp.to(sp)),
            Bound::Ptr { param, offset } => match new {
                Val::Err => {}
                Val::Ptr { param: new_param, offset: new_offset } if new_param == param => {
                    if let Some(Val::Var { id: dst, .. }) = offset {
                        let off = match new_offset {
                            None => Val::Weak(Weak::Int(ConstExpr::Lit(0))),
                            Some(o) => *o,
                        };
                        self.store_into_var(dst, &name, off, value.sp);
                    }
                }
                Val::Ptr { param: new_param, .. } => self.diags.error_help(
                    value.sp,
                    format!(
                        "`{name}` points into `{}`; it cannot be made to point into `{}`",
                        self.param_name(param),
                        self.param_name(new_param)
                    ),
                    "use a separate variable for each buffer",
                ),
                other => {
                    let d = self.describe(&other);
                    self.diags.error(value.sp, format!("`{name}` is a pointer; cannot assign {d} to it"));
                }
            },
            Bound::Weak(_) | Bound::ScalarParam(_) | Bound::Err => {}
        }
    }

    /// Assignment to an existing var: the value must have its type (weak values adapt, scalars
    /// broadcast into a tile var).
    pub(super) fn store_into_var(&mut self, dst: VarId, name: &str, v: Val, sp: Sp) {
        let ty = self.ty(dst);
        let (id, fresh) = match v {
            Val::Err => return,
            Val::Weak(w) => match self.materialize(&w, ty.dtype, sp) {
                Some(id) => (id, true),
                None => return,
            },
            Val::Var { id, fresh } => (id, fresh),
            other => {
                let d = self.describe(&other);
                self.diags.error(sp, format!("cannot assign {d} to `{name}`"));
                return;
            }
        };
        let vty = self.ty(id);
        let (id, fresh) = if vty.dtype != ty.dtype && vty.dtype.compute() == ty.dtype {
            (self.widen(id), true)
        } else {
            (id, fresh)
        };
        let vty = self.ty(id);
        if vty.dtype != ty.dtype {
            self.diags.error_help(
                sp,
                format!(
                    "mismatched types: `{name}` is {}, the value is {}",
                    self.describe_ty(&ty),
                    self.describe_ty(&vty)
                ),
                format!("convert the value: `(..).to({})`", ty.dtype),
            );
            return;
        }
        match (&ty.shape, &vty.shape) {
            (Shape::Tile(_) | Shape::Tile2(..), Shape::Scalar) => {
                self.out.push(Stmt::Assign { dst, expr: Expr::Splat(id) });
            }
            (Shape::Scalar, Shape::Tile(_) | Shape::Tile2(..)) => self.diags.error_help(
                sp,
                format!(
                    "cannot assign {} to `{name}`, which is {}",
                    self.describe_ty(&vty),
                    self.describe_ty(&ty)
                ),
                "reduce the tile first, e.g. `sum(..)`, or declare the variable as a tile (`zeros(BLOCK)`)",
            ),
            (Shape::Tile(a), Shape::Tile(b)) if a != b => self.diags.error(
                sp,
                format!(
                    "tile lengths differ: `{name}` has length {}, the value {}",
                    self.len_text(a),
                    self.len_text(b)
                ),
            ),
            (a, b) if a != b => {
                if Self::broadcast_shape(a, b).as_ref() == Some(a) {
                    self.out.push(Stmt::Assign { dst, expr: Expr::Broadcast(id) });
                } else {
                    let (x, y) = (self.shape_text(a), self.shape_text(b));
                    self.diags.error_help(
                        sp,
                        format!("shapes differ: `{name}` has shape {x}, the value {y}"),
                        "a value assigned to a tile variable must have its shape or broadcast to it",
                    );
                }
            }
            _ => self.assign_into(dst, id, fresh),
        }
    }

    pub(super) fn if_stmt(&mut self, i: &ast::If) -> Option<Stmt> {
        let c = self.expr(&i.cond);
        let cond = self.scalar_bool(c, i.cond.sp, "an `if` condition");
        let then_body = self.nested_body(&i.then_body);
        let else_body = match &i.else_branch {
            None => Vec::new(),
            Some(ast::Else::Block(b)) => self.nested_body(b),
            Some(ast::Else::If(inner)) => {
                let saved = std::mem::take(&mut self.out);
                let nested = self.if_stmt(inner);
                let mut body = std::mem::replace(&mut self.out, saved);
                body.extend(nested);
                body
            }
        };
        Some(Stmt::If { cond: cond?, then_body, else_body })
    }

    pub(super) fn scalar_bool(&mut self, v: Val, sp: Sp, what: &str) -> Option<VarId> {
        let id = self.strong(v, sp, what)?;
        let ty = self.ty(id);
        match (ty.dtype, &ty.shape) {
            (DType::Bool, Shape::Scalar) => Some(id),
            (DType::Bool, Shape::Tile(_)) => {
                self.diags.error_help(
                    sp,
                    format!("{what} must be a scalar bool, found {}", self.describe_ty(&ty)),
                    "control flow is uniform per program; select per lane with `where_(cond, a, b)` or use the tile as a mask",
                );
                None
            }
            _ => {
                self.diags.error_help(
                    sp,
                    format!("{what} must be a bool, found {}", self.describe_ty(&ty)),
                    "compare it: `x != 0`",
                );
                None
            }
        }
    }

    pub(super) fn for_loop(
        &mut self,
        var: &Ident,
        start: &ast::Expr,
        end: &ast::Expr,
        step: Option<&ast::Expr>,
        body: &ast::Block,
        sp: Sp,
    ) {
        let s = self.expr(start);
        let e = self.expr(end);
        let (st, st_sp) = match step {
            Some(x) => (self.expr(x), x.sp),
            None => (Val::Weak(Weak::Int(ConstExpr::Lit(1))), sp),
        };
        if let Val::Weak(Weak::Int(ConstExpr::Lit(v))) = &st {
            if *v <= 0 {
                self.diags.error(st_sp, format!("`step_by` needs a positive step, found {v}"));
            }
        }
        // The bounds share one integer type: the first strongly typed one, else i32.
        let parts =
            [(&s, start.sp, "the loop start"), (&e, end.sp, "the loop end"), (&st, st_sp, "the loop step")];
        let mut dtype = None;
        let mut ok = true;
        for (v, part_sp, what) in parts {
            match v {
                Val::Var { id, .. } => {
                    let ty = self.ty(*id);
                    let d = ty.dtype.compute();
                    if !ty.shape.is_scalar() || !d.is_int() {
                        self.diags.error_help(
                            part_sp,
                            format!("{what} must be an integer scalar, found {}", self.describe_ty(&ty)),
                            "loop bounds are integer scalars: `for i in (0..n).step_by(BLOCK)`",
                        );
                        ok = false;
                    } else if dtype.is_none() {
                        dtype = Some(d);
                    }
                }
                Val::Weak(Weak::Int(_)) | Val::Err => {}
                other => {
                    let d = self.describe(other);
                    self.diags.error(part_sp, format!("{what} must be an integer scalar, found {d}"));
                    ok = false;
                }
            }
        }
        let dtype = dtype.unwrap_or(DType::I32);
        let mut ids = Vec::new();
        for (v, part_sp, what) in
            [(s, start.sp, "the loop start"), (e, end.sp, "the loop end"), (st, st_sp, "the loop step")]
        {
            if !ok {
                break;
            }
            let id = match v {
                Val::Var { id, .. } => {
                    let id = self.widen(id);
                    if self.ty(id).dtype != dtype {
                        self.diags.error_help(
                            part_sp,
                            format!("{what} is {}, but the loop counts in {dtype}", self.ty(id).dtype),
                            format!("convert it: `(..).to({dtype})`"),
                        );
                        None
                    } else {
                        Some(id)
                    }
                }
                Val::Weak(w) => self.materialize(&w, dtype, part_sp),
                _ => None,
            };
            ids.push(id);
        }
        let loop_var = self.new_named(&var.to_string(), Ty::scalar(dtype));
        self.scopes.push(HashMap::new());
        self.bind(
            var.to_string(),
            Binding { bound: Bound::Var(loop_var), mutable: false, origin: Origin::LoopVar },
        );
        let saved = std::mem::take(&mut self.out);
        for s in &body.stmts {
            self.stmt(s);
        }
        let body = std::mem::replace(&mut self.out, saved);
        self.scopes.pop();
        if let [Some(start), Some(end), Some(step)] = ids.as_slice() {
            self.out.push(Stmt::For { var: loop_var, start: *start, end: *end, step: *step, body });
        }
    }
}
