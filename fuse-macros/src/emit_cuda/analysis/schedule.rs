//! Statement order: uniform scalars before the tile math; on one warp, read-only loads that need
//! no loaded value with the first load ([`early_loads`]).
//!
//! A scalar that depends only on parameters, const generics, program ids and other such scalars
//! (the `rand > p` bound, a row's start) is the same for every lane. Computed where the user wrote
//! it, it can cost the tile code around it: NVRTC does not move a division's slow-path call (or
//! the branches of `fuse_rand_gt_bound`) across the tile code, so every tile predicate live there
//! is kept in a register and restored. Computed before the loads, it delays them instead. So such
//! statements move to the end of the prologue: the top-level statements before the first one that
//! reads a loaded value, i.e. once the loads are issued and before the math waits on them.
//!
//! Moving one changes no result: it is pure (no load, reduction or `rand`; integer division and
//! casts are total in the emitted helpers), its destination is assigned nowhere else, and its
//! operands are assigned once, before it in the new order.
//!
//! A uniform scalar whose code holds such a slow-path call (a float division or square root) may
//! go further, to the head of the kernel with the uniform scalars it reads, where nothing of the
//! tile code is live across the call. At the end of the prologue ptxas hoists the conversions of
//! loaded f16/bf16 tiles above the call, so every converted lane stays in a register across it.
//! With many lanes a thread, though, the call at the end of the prologue is what keeps ptxas from
//! hoisting the later loads over the tile math, and the head costs registers. So these statements
//! are written at both places, under complementary `#if`s on the lanes a thread holds (at most
//! 16: the head), and only in kernels that load a 16-bit float tile: without conversions to
//! hoist, the head only delays the first load. (tests/ptxas_resources.rs holds the narrow-row
//! f16/bf16 LayerNorm to 32 registers.)
//!
//! A division or square root of parameters only (LayerNorm's `1 / n`, dropout's `1 / (1 - p)`) is
//! not on the device at all: the runtime computes it at launch (fuse-ir's host_scalars.rs,
//! [`Kernel::host_divisions`]) and the statement reads a parameter. The head holds the uniform
//! divisions the host does not compute (one that reads a program id, say).
use fuse_ir::{BinaryOp, DType, Expr, Kernel, Stmt, UnaryOp, VarId};

/// The kernel's top-level statements in emission order, as indices into `Kernel::body`.
pub(in crate::emit_cuda) struct Schedule {
    /// The uniform scalars with a slow-path call and the uniform scalars they read, wherever
    /// they are, in program order: emitted first where a thread holds few lanes.
    pub head: Vec<usize>,
    /// Per var: assigned by a statement of `head` that comes after the first load, so emitted
    /// in `prologue` or `uniform` only where `head` is not.
    pub late: Vec<bool>,
    /// In program order, up to the first statement that reads a loaded value.
    pub prologue: Vec<usize>,
    /// The uniform scalar statements moved up from after the prologue, in program order.
    pub uniform: Vec<usize>,
    /// The early loads ([`early_loads`]) and the statements computing their offsets and masks,
    /// in program order: emitted after `uniform` where the lowering's `early_when` holds, and in place (in
    /// `rest`) where it does not.
    pub early: Vec<usize>,
    /// The remaining statements, in program order (`early` among them).
    pub rest: Vec<usize>,
    /// Per statement of `Kernel::body` (and one past the last): how many loads and stores come
    /// before it in program order, the number `FUSE_INB_<k>` gives its first access wherever
    /// the statement is emitted.
    pub accesses_before: Vec<u32>,
}

/// `assignments[v]` is how many statements assign var `v`; `host` the divisions the host
/// computes ([`Kernel::host_divisions`]: passed as parameters, or read only by those that are),
/// which call nothing on the device.
pub(in crate::emit_cuda) fn schedule(k: &Kernel, assignments: &[u32], host: &[VarId]) -> Schedule {
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
    let prologue: Vec<usize> = (0..split).collect();
    let mut available: Vec<VarId> = prologue
        .iter()
        .filter_map(|&i| match &k.body[i] {
            Stmt::Assign { dst, .. } if once(dst) => Some(*dst),
            _ => None,
        })
        .collect();
    let (mut uniform, mut rest) = (Vec::new(), Vec::new());
    for (i, s) in k.body.iter().enumerate().skip(split) {
        match s {
            Stmt::Assign { dst, expr }
                if movable_scalar(k, &once, *dst, expr)
                    && expr.operands().iter().all(|o| available.contains(o)) =>
            {
                available.push(*dst);
                uniform.push(i);
            }
            _ => rest.push(i),
        }
    }
    let in_head = head_vars(k, &once, host);
    let head: Vec<usize> = (0..k.body.len())
        .filter(|&i| matches!(&k.body[i], Stmt::Assign { dst, .. } if in_head[dst.0 as usize]))
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
    let early = if converts { Vec::new() } else { early_loads(k, &once, &loaded, &available, &rest) };
    let mut accesses_before = Vec::with_capacity(k.body.len() + 1);
    let mut count = 0u32;
    for s in &k.body {
        accesses_before.push(count);
        fuse_ir::visit_stmts(std::slice::from_ref(s), &mut |s| {
            if matches!(s, Stmt::Assign { expr: Expr::Load { .. }, .. } | Stmt::Store { .. }) {
                count += 1;
            }
        });
    }
    accesses_before.push(count);
    if converts && late.contains(&true) {
        Schedule { head, late, prologue, uniform, early, rest, accesses_before }
    } else {
        let late = vec![false; k.vars.len()];
        Schedule { head: Vec::new(), late, prologue, uniform, early, rest, accesses_before }
    }
}

/// The loads to issue right after the prologue (and its uniform scalars), with the statements
/// their offsets and masks need: in the straight-line code that follows the prologue (up to the
/// first `if`, `for`, store or var assigned twice), a load from a read-only pointer whose operands
/// are available there (assigned in the prologue, loaded values included) or computed by pure
/// element-wise, index and shape statements that read no loaded value.
/// Written where the user needs them (LayerNorm's weight and bias after the row statistics),
/// such loads wait behind the statistics' warp shuffles, which NVRTC does not move loads across;
/// issued with the first load, their latency hides behind its own. Only in kernels without a
/// 16-bit float tile load, and there only on one warp and where they are small beside the first
/// load (the lowering's `early_when`); elsewhere they keep more registers live across the
/// reductions than their latency is worth.
fn early_loads(
    k: &Kernel,
    once: &dyn Fn(&VarId) -> bool,
    loaded: &[bool],
    available: &[VarId],
    after: &[usize],
) -> Vec<usize> {
    let straight = after
        .iter()
        .take_while(|&&i| matches!(&k.body[i], Stmt::Assign { dst, .. } if once(dst)))
        .copied()
        .collect::<Vec<_>>();
    // Per var: computable at the end of the prologue (available there, or by statements of
    // `straight` that are pure and read no loaded value, or read-only loads of such operands).
    let mut ready = vec![false; k.vars.len()];
    for v in available {
        ready[v.0 as usize] = true;
    }
    let mut loads = Vec::new();
    for &i in &straight {
        let Stmt::Assign { dst, expr } = &k.body[i] else { continue };
        let operands_ready = expr.operands().iter().all(|o| ready[o.0 as usize]);
        let read_only_load = match expr {
            Expr::Load { param, .. } => {
                matches!(k.params[*param as usize].kind, fuse_ir::ParamKind::Ptr { mutable: false, .. })
            }
            _ => false,
        };
        // Element-wise, index and shape statements (no reduction, `rand`, `dot`, `trans`,
        // `split` or `join`): pure, and cheap to compute early.
        let pure = !loaded[dst.0 as usize]
            && matches!(
                expr,
                Expr::Copy(_)
                    | Expr::Lit(_)
                    | Expr::Param(_)
                    | Expr::ConstGeneric(_)
                    | Expr::ProgramId(_)
                    | Expr::NumPrograms(_)
                    | Expr::Arange { .. }
                    | Expr::Splat(_)
                    | Expr::Unary(..)
                    | Expr::Binary(..)
                    | Expr::Cast(_)
                    | Expr::Where(..)
                    | Expr::Broadcast(_)
                    | Expr::Reshape(_)
            );
        if operands_ready && (read_only_load || pure) {
            ready[dst.0 as usize] = true;
            if read_only_load {
                loads.push(*dst);
            }
        }
    }
    // The loads and, walking back, the statements of `straight` they read.
    let mut needed = vec![false; k.vars.len()];
    for v in &loads {
        needed[v.0 as usize] = true;
    }
    for &i in straight.iter().rev() {
        let Stmt::Assign { dst, expr } = &k.body[i] else { continue };
        if needed[dst.0 as usize] {
            for o in expr.operands() {
                needed[o.0 as usize] = true;
            }
        }
    }
    straight
        .into_iter()
        .filter(|&i| matches!(&k.body[i], Stmt::Assign { dst, .. } if needed[dst.0 as usize] && ready[dst.0 as usize]))
        .collect()
}

/// A scalar statement that may move up to where its operands are: `dst` assigned once, and
/// `expr` pure (no load, reduction or `rand`).
fn movable_scalar(k: &Kernel, once: &dyn Fn(&VarId) -> bool, dst: VarId, expr: &Expr) -> bool {
    k.ty(dst).shape.len().is_none()
        && once(&dst)
        && !matches!(expr, Expr::Load { .. } | Expr::Reduce(..) | Expr::Rand { .. } | Expr::ArgReduce { .. })
}

/// Per var: whether it belongs to the head (see [`Schedule::head`]).
fn head_vars(k: &Kernel, once: &dyn Fn(&VarId) -> bool, host: &[VarId]) -> Vec<bool> {
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
            let calls = !host.contains(dst)
                && match expr {
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
