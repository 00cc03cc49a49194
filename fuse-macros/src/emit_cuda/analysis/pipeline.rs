//! Software pipelining of `dot` K loops (Triton's `num_stages`).
//!
//! In a `for` loop whose body loads both operands of a tensor-core `dot`, the loads of the next
//! `FUSE_PIPE - 1` iterations are issued ahead with `cp.async` straight into a ring of
//! `FUSE_PIPE` shared-memory stages (swizzled as the MMA lowering reads them), so that global
//! memory and the tensor cores overlap. This module decides **which loops and loads qualify**
//! (from the IR alone, before any layout question); `lower/pipeline.rs` emits the loop and
//! `lower/memory.rs` the copies.
//!
//! A load qualifies when re-running it one or more iterations early is the same load:
//! - it is a top-level statement of the loop body, its destination is assigned once and read only
//!   as operand `a` or `b` of one `dot` later in the same body (so it never lives in registers), or
//!   only by a `trans` that is that `dot`'s `b` alone (staged as B's K-major form, `[N, K]`),
//!   both operands of that `dot` qualify, and they are f16, bf16, f32 or i8 as stored (no
//!   conversion; f32 operands are staged as loaded and rounded to TF32 as the MMAs read them);
//! - masked-off lanes read 0 (`other` absent or a literal +0), which `cp.async` zero-fills;
//! - its offset and mask depend only on the counter, on values the loop never assigns, and on
//!   earlier top-level statements of the body that are pure (no load, `rand`, reduction or
//!   `dot`) and assign a var once: its **slice**, which the emitter replays for a later counter.
//!
//! Everything else (a loop-carried pointer, a normalised operand, a load under an `if`) runs
//! as written: correct, not pipelined.
use super::tensor_cores::takes_mma;
use fuse_ir::{visit_stmts, Expr, Kernel, Stmt, VarId};
use std::collections::HashMap;

/// One load the pipeline issues ahead into the ring.
#[derive(Clone, Debug)]
pub(in crate::emit_cuda) struct StagedLoad {
    /// The load's destination (never materialised: the `dot` reads the stage).
    pub dst: VarId,
    /// Index of the load statement in the loop body.
    pub stmt: usize,
    /// Its index in `Kernel::accesses` (the `FUSE_INB_<k>` it is checked under).
    pub access: u32,
}

/// A pipelined loop: its staged loads and the body statements their addresses need.
#[derive(Clone, Debug)]
pub(in crate::emit_cuda) struct LoopPlan {
    /// Indices of the body statements to replay before issuing the loads, in program order.
    pub slice: Vec<usize>,
    pub loads: Vec<StagedLoad>,
    /// Operands of its `dot`s that the loop never assigns (attention's `q`): staged once, before
    /// the loop, into their own place after the ring, and read there by every iteration.
    pub resident: Vec<VarId>,
    /// Where every tensor-core `dot` of the body is `acc = dot(x, y, acc)` with `acc` read by no
    /// other statement of the body (a matmul's K loop): those accumulators. On the wgmma path
    /// each iteration's MMAs may then stay in flight while the next iteration starts (one
    /// commit group; the ring issues one stage less ahead so that they never read a stage being
    /// refilled).
    pub inflight: Vec<VarId>,
}

/// The pipelined loops, by counter var.
pub(in crate::emit_cuda) fn plan(k: &Kernel, assignments: &[u32], uses: &[u32]) -> HashMap<VarId, LoopPlan> {
    let mut plans = HashMap::new();
    let mut accesses = 0u32;
    walk(k, &k.body, assignments, uses, &mut accesses, &mut plans, false);
    plans
}

/// Per var: how many times statements read it.
pub(in crate::emit_cuda) fn use_counts(k: &Kernel) -> Vec<u32> {
    let mut uses = vec![0u32; k.vars.len()];
    k.visit_stmts(&mut |s| {
        for v in stmt_reads(s) {
            uses[v.0 as usize] += 1;
        }
    });
    uses
}

/// Plans the loops in `stmts` (at any depth), counting accesses in program order. Loops inside a
/// pipelined loop (`inside`) are not pipelined: the two rings would share their place.
fn walk(
    k: &Kernel,
    stmts: &[Stmt],
    assignments: &[u32],
    uses: &[u32],
    accesses: &mut u32,
    plans: &mut HashMap<VarId, LoopPlan>,
    inside: bool,
) {
    for s in stmts {
        match s {
            Stmt::Assign { expr: Expr::Load { .. }, .. } | Stmt::Store { .. } => *accesses += 1,
            Stmt::Assign { .. } => {}
            Stmt::If { then_body, else_body, .. } => {
                walk(k, then_body, assignments, uses, accesses, plans, inside);
                walk(k, else_body, assignments, uses, accesses, plans, inside);
            }
            Stmt::For { var, body, .. } => {
                let plan = if inside { None } else { plan_loop(k, *var, body, assignments, uses, *accesses) };
                let pipelined = plan.is_some();
                if let Some(p) = plan {
                    plans.insert(*var, p);
                }
                walk(k, body, assignments, uses, accesses, plans, inside || pipelined);
            }
        }
    }
}

fn plan_loop(
    k: &Kernel,
    counter: VarId,
    body: &[Stmt],
    assignments: &[u32],
    uses: &[u32],
    first_access: u32,
) -> Option<LoopPlan> {
    let mut assigned_here = vec![false; k.vars.len()];
    visit_stmts(body, &mut |s| match s {
        Stmt::Assign { dst: v, .. } | Stmt::For { var: v, .. } => assigned_here[v.0 as usize] = true,
        _ => {}
    });
    // Top-level definitions (once-assigned vars) and the access index of each top-level statement.
    let mut def: HashMap<VarId, usize> = HashMap::new();
    let mut access_at = Vec::with_capacity(body.len());
    let mut next = first_access;
    for (i, s) in body.iter().enumerate() {
        access_at.push(next);
        let mut n = 0;
        visit_stmts(std::slice::from_ref(s), &mut |t| {
            if matches!(t, Stmt::Assign { expr: Expr::Load { .. }, .. } | Stmt::Store { .. }) {
                n += 1;
            }
        });
        next += n;
        if let Stmt::Assign { dst, .. } = s {
            if assignments[dst.0 as usize] == 1 {
                def.insert(*dst, i);
            }
        }
    }
    let mut slice = vec![false; body.len()];
    let mut loads = Vec::new();
    let mut resident: Vec<VarId> = Vec::new();
    for (d, s) in body.iter().enumerate() {
        let Stmt::Assign { expr: Expr::Dot { a, b, .. }, .. } = s else { continue };
        if a == b || !takes_mma(k, *a, *b) {
            continue;
        }
        let mut mine = slice.clone();
        let (mut staged, mut kept) = (Vec::new(), Vec::new());
        let mut qualifies = true;
        for (x, is_b) in [(*a, false), (*b, true)] {
            if !assigned_here[x.0 as usize] {
                kept.push(x);
            } else if let Some(load) =
                staged_operand(k, counter, body, (x, is_b, d), uses, &assigned_here, &def, &mut mine)
            {
                staged.push(StagedLoad { access: access_at[load.1], dst: load.0, stmt: load.1 });
            } else if is_b {
                // A computed A (attention's `p`) is read from registers or staged by the `dot`
                // itself; a B has to be one of the above.
                qualifies = false;
            }
        }
        if qualifies && !staged.is_empty() {
            slice = mine;
            loads.extend(staged);
            for x in kept {
                if !resident.contains(&x) {
                    resident.push(x);
                }
            }
        }
    }
    if loads.is_empty() {
        return None;
    }
    let slice = slice.iter().enumerate().filter(|(_, &on)| on).map(|(i, _)| i).collect();
    let inflight = inflight_accumulators(k, body);
    Some(LoopPlan { slice, loads, resident, inflight })
}

/// [`LoopPlan::inflight`]: the accumulators of the body's tensor-core `dot`s if every one is
/// `acc = dot(x, y, acc)` at the top level and nothing else in the body reads its `acc`.
fn inflight_accumulators(k: &Kernel, body: &[Stmt]) -> Vec<VarId> {
    let mut accs = Vec::new();
    let mut all = true;
    visit_stmts(body, &mut |s| {
        if let Stmt::Assign { dst, expr: Expr::Dot { a, b, acc } } = s {
            if takes_mma(k, *a, *b) {
                all &= *acc == Some(*dst);
                accs.push(*dst);
            }
        }
    });
    let top_level = |v: VarId| {
        body.iter().any(|s| matches!(s, Stmt::Assign { dst, expr: Expr::Dot { .. } } if *dst == v))
    };
    let read_elsewhere = |v: VarId| {
        let mut n = 0;
        visit_stmts(body, &mut |s| n += stmt_reads(s).iter().filter(|&&r| r == v).count());
        n != 1
    };
    if all && accs.iter().all(|&v| top_level(v) && !read_elsewhere(v)) {
        accs
    } else {
        Vec::new()
    }
}

/// Operand `x` of the `dot` at body statement `d` (`is_b`: its B) as a load that qualifies: the
/// loaded var and its statement (for `b = trans(w)` read by the dot alone, `w`'s, staged as B's
/// K-major form); marks its slice in `slice`.
#[allow(clippy::too_many_arguments)]
fn staged_operand(
    k: &Kernel,
    counter: VarId,
    body: &[Stmt],
    (x, is_b, d): (VarId, bool, usize),
    uses: &[u32],
    assigned_here: &[bool],
    def: &HashMap<VarId, usize>,
    slice: &mut [bool],
) -> Option<(VarId, usize)> {
    let mut stmt = *def.get(&x).filter(|&&l| l < d)?;
    let mut x = x;
    if let Stmt::Assign { expr: Expr::Trans(w), .. } = &body[stmt] {
        if !is_b || uses[x.0 as usize] != 1 {
            return None;
        }
        stmt = *def.get(w).filter(|&&l| l < stmt)?;
        x = *w;
    }
    operand_load(k, counter, body, stmt, x, uses, assigned_here, def, slice)?;
    Some((x, stmt))
}

/// Whether body statement `stmt` (assigning `x`) is a load that qualifies; marks its slice.
#[allow(clippy::too_many_arguments)]
fn operand_load(
    k: &Kernel,
    counter: VarId,
    body: &[Stmt],
    stmt: usize,
    x: VarId,
    uses: &[u32],
    assigned_here: &[bool],
    def: &HashMap<VarId, usize>,
    slice: &mut [bool],
) -> Option<()> {
    let Stmt::Assign { expr: Expr::Load { param, offset, mask, other }, .. } = &body[stmt] else {
        return None;
    };
    let fuse_ir::ParamKind::Ptr { elem, .. } = k.params[*param as usize].kind else { return None };
    let mma_input =
        matches!(elem, fuse_ir::DType::F16 | fuse_ir::DType::BF16 | fuse_ir::DType::F32 | fuse_ir::DType::I8);
    if uses[x.0 as usize] != 1 || elem != k.ty(x).dtype || !mma_input || k.ty(*offset).shape.is_scalar() {
        return None;
    }
    if let Some(o) = other {
        k.is_positive_zero(*o)?;
    }
    let mut todo: Vec<VarId> = std::iter::once(*offset).chain(*mask).collect();
    while let Some(v) = todo.pop() {
        if v == counter || !assigned_here[v.0 as usize] {
            continue;
        }
        let i = *def.get(&v).filter(|&&i| i < stmt)?;
        if slice[i] {
            continue;
        }
        let Stmt::Assign { expr, .. } = &body[i] else { return None };
        if !replayable(expr) {
            return None;
        }
        slice[i] = true;
        todo.extend(expr.operands());
    }
    Some(())
}

/// Pure and cheap to compute again: no memory, randomness, reduction or `dot`.
fn replayable(e: &Expr) -> bool {
    !matches!(
        e,
        Expr::Load { .. }
            | Expr::Rand { .. }
            | Expr::Reduce(..)
            | Expr::ReduceAxis { .. }
            | Expr::ArgReduce { .. }
            | Expr::Dot { .. }
    )
}

/// The vars a statement reads (not those of nested statements).
fn stmt_reads(s: &Stmt) -> Vec<VarId> {
    match s {
        Stmt::Assign { expr, .. } => expr.operands(),
        Stmt::Store { offset, value, mask, .. } => [*offset, *value].into_iter().chain(*mask).collect(),
        Stmt::If { cond, .. } => vec![*cond],
        Stmt::For { start, end, step, .. } => vec![*start, *end, *step],
    }
}
