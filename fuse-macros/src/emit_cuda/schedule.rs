//! Statement order: uniform scalars before the tile math.
//!
//! A scalar that depends only on parameters, const generics, program ids and other such scalars
//! (`1 / (1 - p)`, the `rand > p` bound, a row's start) is the same for every lane. Computed where
//! the user wrote it, it can cost the tile code around it: NVRTC does not move a division's
//! slow-path call (or the branches of `fuse_rand_gt_bound`) across the tile code, so every tile
//! predicate live there is kept in a register and restored (bias+GELU+dropout f16, 2 warps: 69
//! registers and 16 `P2R` before, 48 and one after; static counts from NVRTC 13 for sm_90).
//! Computed before the loads, it delays them instead (LayerNorm's `1 / n`). So such statements
//! move to the end of the prologue: the top-level statements before the first one that reads a
//! loaded value, i.e. once the loads are issued and before the math waits on them.
//!
//! Moving one changes no result: it is pure (no load, reduction or `rand`; integer division and
//! casts are total in the emitted helpers), its destination is assigned nowhere else, and its
//! operands are assigned once, before it in the new order.
use fuse_ir::{Expr, Kernel, Stmt, VarId};

/// The kernel's top-level statements in emission order.
pub(super) struct Schedule {
    /// In program order, up to the first statement that reads a loaded value.
    pub prologue: Vec<Stmt>,
    /// The uniform scalar statements moved up from after the prologue, in program order.
    pub uniform: Vec<Stmt>,
    /// The remaining statements, in program order.
    pub rest: Vec<Stmt>,
}

/// `assignments[v]` is how many statements assign var `v`.
pub(super) fn schedule(k: &Kernel, assignments: &[u32]) -> Schedule {
    let once = |v: &VarId| assignments[v.0 as usize] == 1;
    // Vars whose value depends on a load (through any chain of statements, at any depth).
    let mut loaded = vec![false; k.vars.len()];
    let mut changed = true;
    while changed {
        changed = false;
        k.visit_stmts(&mut |s| {
            if let Stmt::Assign { dst, expr } = s {
                let from_load =
                    matches!(expr, Expr::Load { .. }) || expr.operands().iter().any(|o| loaded[o.0 as usize]);
                if from_load && !loaded[dst.0 as usize] {
                    loaded[dst.0 as usize] = true;
                    changed = true;
                }
            }
        });
    }
    let reads_loaded = |s: &Stmt| match s {
        Stmt::Assign { expr, .. } => expr.operands().iter().any(|o| loaded[o.0 as usize]),
        // Control flow and stores end the prologue whatever they read.
        _ => true,
    };
    let split = k.body.iter().position(reads_loaded).unwrap_or(k.body.len());
    let prologue = k.body[..split].to_vec();
    let mut available: Vec<VarId> = prologue
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign { dst, .. } if once(dst) => Some(*dst),
            _ => None,
        })
        .collect();
    let (mut uniform, mut rest) = (Vec::new(), Vec::new());
    for s in &k.body[split..] {
        match s {
            Stmt::Assign { dst, expr }
                if k.ty(*dst).shape.len().is_none()
                    && once(dst)
                    && !matches!(
                        expr,
                        Expr::Load { .. } | Expr::Reduce(..) | Expr::Rand { .. } | Expr::ArgReduce { .. }
                    )
                    && expr.operands().iter().all(|o| available.contains(o)) =>
            {
                available.push(*dst);
                uniform.push(s.clone());
            }
            _ => rest.push(s.clone()),
        }
    }
    Schedule { prologue, uniform, rest }
}
