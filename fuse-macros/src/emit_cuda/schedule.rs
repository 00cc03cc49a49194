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
//!
//! A uniform scalar whose code holds such a slow-path call (a float division or square root) may
//! go further, to the head of the kernel with the uniform scalars it reads, where nothing of the
//! tile code is live across the call. At the end of the prologue ptxas hoists the conversions of
//! loaded f16/bf16 tiles above the call, so every converted lane stays in a register across it:
//! narrow-row LayerNorm's `1 / n`, f16 `[8, 256]` at 4 warps, 39 registers there and 32 at the
//! head, as many as without the division. With many lanes a thread, though, the call at the end
//! of the prologue is what keeps ptxas from hoisting the later loads over the tile math, and the
//! head costs registers (one-row LayerNorm f16 `[8192]` at 8 warps, 32 lanes a thread: 64 there,
//! 78 at the head). So these statements are written at both places, under complementary `#if`s
//! on the lanes a thread holds (at most 16: the head), and only in kernels that load a 16-bit
//! float tile: without conversions to hoist, the head only delays the first load. Timed on an
//! H200 (2026-11-27, session 16, against both at the end of the prologue in the same call):
//! LayerNorm 16384x256 f16 0.0096 → 0.0086 ms, NeoX RoPE f16 0.0520 → 0.0497; the f32
//! LayerNorms 0.6-1.3 % slower at the head (65536x128: 0.0222 → 0.0225, though 40 → 32
//! registers), so f32 kernels keep the old place.
//! Register counts: NVRTC 13 for sm_90; tests/ptxas_resources.rs holds the narrow-row f16/bf16
//! LayerNorm to 32.
use fuse_ir::{BinaryOp, DType, Expr, Kernel, Stmt, UnaryOp, VarId};

/// The kernel's top-level statements in emission order.
pub(super) struct Schedule {
    /// The uniform scalars with a slow-path call and the uniform scalars they read, wherever
    /// they are, in program order: emitted first where a thread holds few lanes.
    pub head: Vec<Stmt>,
    /// Per var: assigned by a statement of `head` that comes after the first load, so emitted
    /// in `prologue` or `uniform` only where `head` is not.
    pub late: Vec<bool>,
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
                if movable_scalar(k, &once, *dst, expr)
                    && expr.operands().iter().all(|o| available.contains(o)) =>
            {
                available.push(*dst);
                uniform.push(s.clone());
            }
            _ => rest.push(s.clone()),
        }
    }
    let in_head = head_vars(k, &once);
    let head: Vec<Stmt> = k
        .body
        .iter()
        .filter(|s| matches!(s, Stmt::Assign { dst, .. } if in_head[dst.0 as usize]))
        .cloned()
        .collect();
    let first_load = k.body.iter().position(|s| matches!(s, Stmt::Assign { expr: Expr::Load { .. }, .. }));
    let mut late = vec![false; k.vars.len()];
    for s in &k.body[first_load.map_or(k.body.len(), |i| i + 1)..] {
        if let Stmt::Assign { dst, .. } = s {
            late[dst.0 as usize] = in_head[dst.0 as usize];
        }
    }
    // Calls that the user wrote before the loads stay there, and kernels without a 16-bit float
    // tile load have no conversions to hoist over the call: no head then.
    let mut converts = false;
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr: Expr::Load { .. } } = s {
            let t = k.ty(*dst);
            converts |= t.shape.len().is_some() && matches!(t.dtype, DType::F16 | DType::BF16);
        }
    });
    if converts && late.contains(&true) {
        Schedule { head, late, prologue, uniform, rest }
    } else {
        Schedule { head: Vec::new(), late: vec![false; k.vars.len()], prologue, uniform, rest }
    }
}

/// A scalar statement that may move up to where its operands are: `dst` assigned once, and
/// `expr` pure (no load, reduction or `rand`).
fn movable_scalar(k: &Kernel, once: &dyn Fn(&VarId) -> bool, dst: VarId, expr: &Expr) -> bool {
    k.ty(dst).shape.len().is_none()
        && once(&dst)
        && !matches!(expr, Expr::Load { .. } | Expr::Reduce(..) | Expr::Rand { .. } | Expr::ArgReduce { .. })
}

/// Per var: whether it belongs to the head (see [`Schedule::head`]).
fn head_vars(k: &Kernel, once: &dyn Fn(&VarId) -> bool) -> Vec<bool> {
    // Top-level scalars assigned once from parameters, const generics, program ids and literals
    // through pure arithmetic (no load): the same in every lane, computable anywhere before
    // their use.
    let mut uniform = vec![false; k.vars.len()];
    for s in &k.body {
        if let Stmt::Assign { dst, expr } = s {
            if movable_scalar(k, once, *dst, expr) && expr.operands().iter().all(|o| uniform[o.0 as usize]) {
                uniform[dst.0 as usize] = true;
            }
        }
    }
    // The float divisions and square roots among them, then (walking back) what they read.
    let mut head = vec![false; k.vars.len()];
    for s in k.body.iter().rev() {
        if let Stmt::Assign { dst, expr } = s {
            let calls = match expr {
                Expr::Binary(BinaryOp::Div, ..) => k.ty(*dst).dtype.is_float(),
                Expr::Unary(UnaryOp::Sqrt, _) => true,
                _ => false,
            };
            if uniform[dst.0 as usize] && (calls || head[dst.0 as usize]) {
                head[dst.0 as usize] = true;
                for o in expr.operands() {
                    head[o.0 as usize] = true;
                }
            }
        }
    }
    head
}
