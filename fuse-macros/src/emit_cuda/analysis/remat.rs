//! Rematerialisation: a broadcast whose source is a function of lane indices alone is emitted by
//! computing the source again at the lane each destination slot reads, instead of moving it
//! between threads through shared memory (Triton gets the same from `arange` fitting any layout).
//!
//! A tile is **index-computable** when its one assignment is `arange`, a splat of a scalar, or an
//! integer or bool element-wise operation, cast, `where_`, reshape or broadcast of index-computable
//! tiles and scalars, every var involved assigned once (so a scalar read at the broadcast has the
//! value it had when the tile was made: its one assignment dominates both). The row and column
//! indices of a 2-D tile (`rm`, `k0 + rk`), the offsets built from them and their masks are; a
//! loaded or reduced value is not. The recomputation is a few integer operations per slot, where
//! the scratch costs two barriers and a shared round trip per broadcast (eight per iteration of a
//! Triton-style matmul K loop).
use fuse_ir::{DType, Expr, Stmt, VarId};

/// The most operations one recomputed value may take (beyond it: through the scratch).
pub(in crate::emit_cuda) const BUDGET: u32 = 24;

/// Per var: whether it is an index-computable tile that the lowering (`Emitter::value_at`) recomputes within
/// [`BUDGET`] operations (the same rules, from the IR alone: the layout pass needs it first).
/// Such a tile fits any layout: where it meets one unlike its own it is recomputed there
/// (`Emitter::view`).
pub(in crate::emit_cuda) fn index_computable(k: &fuse_ir::Kernel, assignments: &[u32]) -> Vec<bool> {
    let mut def: Vec<Option<&Expr>> = vec![None; k.vars.len()];
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr } = s {
            def[dst.0 as usize] = Some(expr);
        }
    });
    // The operations a recomputation takes (`None`: not recomputable), memoised.
    fn cost(
        k: &fuse_ir::Kernel,
        v: VarId,
        def: &[Option<&Expr>],
        assignments: &[u32],
        memo: &mut [Option<Option<u32>>],
    ) -> Option<u32> {
        let i = v.0 as usize;
        if let Some(c) = memo[i] {
            return c;
        }
        let c = (|| {
            if assignments[i] != 1 {
                return None;
            }
            if k.ty(v).shape.is_scalar() {
                return Some(0);
            }
            let d = k.ty(v).dtype;
            if !(d.is_int() || d == DType::Bool) {
                return None;
            }
            let operands = match def[i]? {
                Expr::Arange { .. } => Vec::new(),
                e @ (Expr::Copy(_)
                | Expr::Splat(_)
                | Expr::Reshape(_)
                | Expr::Cast(_)
                | Expr::Broadcast(_)
                | Expr::Unary(..)
                | Expr::Binary(..)
                | Expr::Where(..)) => e.operands(),
                _ => return None,
            };
            let mut total = 1u32;
            for o in operands {
                total += cost(k, o, def, assignments, memo)?;
            }
            Some(total)
        })();
        memo[i] = Some(c);
        c
    }
    let mut memo = vec![None; k.vars.len()];
    (0..k.vars.len())
        .map(|i| {
            let v = VarId(i as u32);
            !k.ty(v).shape.is_scalar()
                && cost(k, v, &def, assignments, &mut memo).is_some_and(|c| c <= BUDGET)
        })
        .collect()
}
