//! Rematerialisation (`analysis/remat.rs` says which tiles qualify): a broadcast of an
//! index-computable tile computes its source again at the lane each destination slot reads.
use super::ctype;
use super::Emitter;
use crate::emit_cuda::analysis::remat::BUDGET;
use fuse_ir::{DType, Expr, Len, Stmt, VarId};

impl Emitter<'_> {
    /// `dst = broadcast(src)` by recomputing `src` at each slot's source lane, if it is
    /// index-computable; `false` (nothing emitted) otherwise.
    pub(in crate::emit_cuda) fn broadcast_by_remat(&mut self, dst: VarId, src: VarId, lane: &str) -> bool {
        let kd = self.tile(dst).expect("broadcasts make tiles");
        let mut budget = BUDGET;
        let Some(e) = self.value_at(src, &format!("({lane})"), &mut budget) else { return false };
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        self.w.line(format!("// {d} = broadcast({s}), {s} recomputed at each slot's lane"));
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
        self.w.line(format!("{d}[fuse_i] = {e};"));
        self.w.close();
        true
    }

    /// The value of `v` (in its dtype) at lane `lane` (a C expression), if `v` is a scalar
    /// assigned once or an index-computable tile within `budget` operations.
    pub(in crate::emit_cuda) fn value_at(
        &mut self,
        v: VarId,
        lane: &str,
        budget: &mut u32,
    ) -> Option<String> {
        if self.assignments[v.0 as usize] != 1 {
            return None;
        }
        if self.tile(v).is_none() {
            return Some(self.name(v).to_string());
        }
        let d = self.dtype(v);
        if !(d.is_int() || d == DType::Bool) {
            return None;
        }
        *budget = budget.checked_sub(1)?;
        let expr = self.definition(v)?;
        Some(match expr {
            Expr::Arange { start } => {
                let s = ctype::int_lit(i128::from(start), DType::I32);
                let e = format!("((int)((unsigned int)({s}) + (unsigned int){lane}))");
                ctype::convert(&e, DType::I32, d, &mut self.needs)
            }
            Expr::Copy(x) | Expr::Splat(x) | Expr::Reshape(x) | Expr::Cast(x) => {
                let e = self.value_at(x, lane, budget)?;
                ctype::convert(&e, self.dtype(x), d, &mut self.needs)
            }
            Expr::Broadcast(x) => {
                let (src_dims, dst_dims) = (self.k.ty(x).shape.dims(), self.k.ty(v).shape.dims());
                let at = self.source_lane(&src_dims, &dst_dims, lane);
                self.value_at(x, &format!("({at})"), budget)?
            }
            Expr::Unary(op, x) => {
                let c = self.dtype(x).compute();
                let e = self.value_at(x, lane, budget)?;
                let e = ctype::convert(&e, self.dtype(x), c, &mut self.needs);
                let e = self.unary(op, c, &e);
                let rd = if op == fuse_ir::UnaryOp::Not && c == DType::Bool { DType::Bool } else { c };
                ctype::convert(&e, rd, d, &mut self.needs)
            }
            Expr::Binary(op, a, b) => {
                let c = self.dtype(a).compute();
                let x = self.value_at(a, lane, budget)?;
                let y = self.value_at(b, lane, budget)?;
                let x = ctype::convert(&x, self.dtype(a), c, &mut self.needs);
                let y = ctype::convert(&y, self.dtype(b), c, &mut self.needs);
                let e = self.binary(op, c, &x, &y);
                let rd = if op.is_comparison() { DType::Bool } else { c };
                ctype::convert(&e, rd, d, &mut self.needs)
            }
            Expr::Where(c, a, b) => {
                let cv = self.value_at(c, lane, budget)?;
                let cv = ctype::convert(&cv, self.dtype(c), DType::Bool, &mut self.needs);
                let x = self.value_at(a, lane, budget)?;
                let y = self.value_at(b, lane, budget)?;
                let x = ctype::convert(&x, self.dtype(a), d, &mut self.needs);
                let y = ctype::convert(&y, self.dtype(b), d, &mut self.needs);
                format!("({cv} ? {x} : {y})")
            }
            _ => return None,
        })
    }

    /// The expression of `v`'s one assignment.
    fn definition(&self, v: VarId) -> Option<Expr> {
        let mut found = None;
        self.k.visit_stmts(&mut |s| {
            if let Stmt::Assign { dst, expr } = s {
                if *dst == v {
                    found = Some(expr.clone());
                }
            }
        });
        found
    }

    /// Runs `f` with `fuse_f` standing for the lanes of layout `k` ([`Emitter::source_lane`] then
    /// takes an MMA layout's rows and columns in closed form), restoring the outer layout after.
    pub(in crate::emit_cuda) fn at_lanes_of<R>(&mut self, k: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let outer = self.lane_layout.replace(k);
        let r = f(self);
        self.lane_layout = outer;
        r
    }

    /// The lane of a broadcast's source (dims `src`) that destination lane `lane` (dims `dst`)
    /// reads (see `fuse_ir::broadcast_source_lane`).
    pub(in crate::emit_cuda) fn source_lane(&self, src: &[Len], dst: &[Len], lane: &str) -> String {
        let unit = Len::literal_log2(0);
        // The source's dims aligned at the right with the destination's (missing ones are 1).
        let (rows, cols) = match src {
            [r, c] => (r.clone(), c.clone()),
            [c] => (unit.clone(), c.clone()),
            _ => (unit.clone(), unit.clone()),
        };
        // Lane `fuse_f` of an MMA layout: its row and column in closed form.
        let mma =
            self.lane_layout.filter(|&k| self.layout.is_mma(k) && matches!(lane, "fuse_f" | "(fuse_f)"));
        match dst {
            [_, dst_cols] if rows == unit && cols != unit => match mma {
                Some(k) => format!("FUSE_COL{k}(fuse_i)"),
                None => format!("{lane} % {}", dst_cols.c_expr(&self.k.consts)),
            },
            [_, dst_cols] if cols == unit && rows != unit => match mma {
                Some(k) => format!("FUSE_ROW{k}(fuse_i)"),
                None => format!("{lane} / {}", dst_cols.c_expr(&self.k.consts)),
            },
            // A single lane repeated.
            _ => "0".into(),
        }
    }
}
