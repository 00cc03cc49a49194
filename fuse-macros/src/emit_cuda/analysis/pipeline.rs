//! Software pipelining of `dot` K loops (Triton's `num_stages`).
//!
//! In a `for` loop whose body loads both operands of a tensor-core `dot`, the loads of the next
//! `FUSE_PIPE - 1` iterations are issued ahead with `cp.async` straight into a ring of
//! `FUSE_PIPE` shared-memory stages (swizzled as the MMA lowering reads them), so that global
//! memory and the tensor cores overlap. This module decides **which loops and loads qualify**
//! (from the IR alone, before any layout question); [`crate::emit_cuda::lower::body`] emits the loop and
//! [`crate::emit_cuda::lower::memory`] the copies.
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
use crate::emit_cuda::lower::ctype::c_type;
use crate::emit_cuda::lower::mma::takes_mma;
use crate::emit_cuda::Ctx;
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

/// The ring's stage count (before the scratch's sizes, which use it): `FUSE_NUM_STAGES`, which
/// the runtime defines (Triton's `num_stages`), at least 2.
pub const STAGES: &str = "#ifndef FUSE_NUM_STAGES
#define FUSE_NUM_STAGES 3
#endif
#define FUSE_PIPE (FUSE_NUM_STAGES < 2 ? 2 : FUSE_NUM_STAGES)";

/// The device helpers of the pipeline (inline PTX; `fuse_smem_addr` is the MMA prelude's).
pub const PRELUDE: &str = r#"// Pipelined loops: a ring of FUSE_PIPE shared-memory stages filled by cp.async, FUSE_PIPE - 1
// iterations ahead (FUSE_NUM_STAGES, at least 2).
// Copies `n` of B bytes (0: zero-fills all B) from global `src` to shared `dst`, asynchronously.
// (Template parameters are fuse_ names: a kernel's consts are macros.)
template <int fuse_nb> __device__ __forceinline__ void fuse_cp_async(unsigned int dst, const void* src, int n) {
  if (fuse_nb == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(n) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" :: "r"(dst), "l"(src), "n"(fuse_nb), "r"(n) : "memory");
  }
}
__device__ __forceinline__ void fuse_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's groups are still in flight.
template <int fuse_n> __device__ __forceinline__ void fuse_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(fuse_n) : "memory");
}
"#;

impl Ctx<'_> {
    /// A pipelined `for` loop (inside the block that declared `fuse_end{n}`/`fuse_step{n}` and
    /// under `fuse_step{n} > 0`): the prologue fills stages `0 .. FUSE_PIPE - 2`; iteration `i`
    /// waits for stage `i`, issues iteration `i + FUSE_PIPE - 1` into the stage iteration `i - 1`
    /// read (every thread is past it: the barrier), then runs the body, whose `dot` reads stage
    /// `i`. Only iterations that run are issued, so the accesses are the loop's own.
    pub(in crate::emit_cuda) fn pipelined_for(
        &mut self,
        n: usize,
        (var, start): (VarId, &str),
        body: &[Stmt],
        plan: &LoopPlan,
    ) {
        let outer = std::mem::replace(&mut self.in_pipeline, true);
        // FUSE_INFLIGHT<n>: the loop's MMAs stay in flight across iterations (wgmma path, 3+ stages).
        let inflight: Vec<String> = plan
            .inflight
            .iter()
            .map(|&v| format!("FUSE_WG{}", self.tile(v).expect("dot accumulators are tiles")))
            .collect();
        let inflight = if inflight.is_empty() {
            "0".to_string()
        } else {
            format!("(FUSE_PIPE >= 3 && {})", inflight.join(" && "))
        };
        self.w.pp(format!("#define FUSE_INFLIGHT{n} {inflight}"));
        // The loads that may go through TMA (a tensor box, on sm_90a, where the runtime passes a map).
        let boxes: Vec<Option<fuse_ir::TensorBox>> =
            plan.loads.iter().map(|l| crate::emit_cuda::lower::tma::tensor_box(self.k, &body[l.stmt])).collect();
        let tma: Vec<u32> =
            plan.loads.iter().zip(&boxes).filter(|(_, b)| b.is_some()).map(|(l, _)| l.access).collect();
        for &a in &tma {
            self.spec(fuse_ir::Specialization::TensorBox(a));
        }
        if !tma.is_empty() {
            self.tma_loops.push((n, tma.clone()));
        }
        let outer_inflight = self.inflight.replace((n, plan.inflight.clone()));
        let t = c_type(self.dtype(var));
        let v = self.name(var).to_string();
        // The stage: the loads' buffers one after the other, each `[rows, cols]` of their elements
        // from a 1024-byte boundary (wgmma's swizzle atoms; the ring starts on one).
        let mut at = Vec::new();
        let mut stage = String::from("0");
        for l in &plan.loads {
            let dims = self.k.ty(l.dst).shape.dims();
            let (r, c) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
            at.push((stage.clone(), (c.clone(), r.clone())));
            stage = format!(
                "({stage} + (({r}) * ({c}) * {} + 1023) / 1024 * 1024)",
                self.dtype(l.dst).size_bytes()
            );
        }
        // The resident operands after the FUSE_PIPE stages, each 1024-byte aligned.
        let mut resident = Vec::new();
        let mut end = format!("FUSE_PIPE * {stage}");
        for &r in &plan.resident {
            let src = self.kmajor_b.get(&r).copied().unwrap_or(r);
            let dims = self.k.ty(src).shape.dims();
            let (rows, cols) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
            let esz = self.dtype(src).size_bytes();
            resident.push((src, end.clone(), (cols.clone(), rows.clone()), esz));
            end = format!("{end} + (({rows}) * ({cols}) * {esz} + 1023) / 1024 * 1024");
        }
        self.ring_bytes_for(format!("({end})"));
        let buf =
            |slot: &str, off: &str| format!("(unsigned short*)(fuse_ring + {slot} * {stage} + ({off}))");
        let names: Vec<&str> = plan.loads.iter().map(|l| self.name(l.dst)).collect();
        self.w.line(format!(
            "// pipelined: {} loaded FUSE_PIPE - 1 iterations ahead (cp.async into a ring of FUSE_PIPE stages)",
            names.join(", ")
        ));
        // Generic-proxy writes before the loop (the scratch overlaps the ring) ordered before
        // the loop's TMA copies into it, which write through the async proxy.
        self.w.line("fuse_fence_async();");
        self.w.line("__syncthreads();  // the ring's readers before this loop are done");
        for (src, at, (cols, rows), esz) in &resident {
            // Read by every iteration: staged once (the first iteration's barrier publishes it).
            let k = self.tile(*src).expect("dot operands are tiles");
            let name = self.name(*src).to_string();
            let p = format!("(unsigned short*)(fuse_ring + ({at}))");
            self.w.line(format!("// {name}: the loop never changes it, staged once for its dots"));
            self.w.open("");
            self.w.line(format!("unsigned short* fuse_res = {p};"));
            self.stage_writes(&[(k, &name, "fuse_res", cols, rows)], *esz);
            self.w.line("fuse_fence_async();");
            self.w.close();
            self.staged.insert(*src, p);
        }
        self.w.line(format!("{t} fuse_ahead{n} = {start};"));
        self.w.line(format!("int fuse_wr{n} = 0, fuse_rd{n} = 0;"));
        self.w.pp("#pragma unroll 1");
        self.w.open(format!("for (int fuse_p = 0; fuse_p < FUSE_PIPE - 1 - FUSE_INFLIGHT{n}; ++fuse_p)"));
        self.issue_ahead(
            n,
            &v,
            t,
            (body, plan, &boxes),
            &|i: usize| buf(&format!("fuse_wr{n}"), &at[i].0),
            &at,
        );
        self.w.close();
        // The loop and its last wait sit under their own guard so that the path that skips the
        // loop joins only after the wait: where the accumulators' zeros (that path) meet MMAs
        // still in flight (the loop's exit) before the wait, ptxas serialises every wgmma of the
        // kernel (its C7514/C7515 "Potential Performance Loss"; each MMA then waits for the last).
        self.w.open(format!("if ({start} < fuse_end{n})"));
        self.w.open(format!(
            "for ({v} = {start}; {v} < fuse_end{n}; {v} = fuse_next({v}, fuse_end{n}, fuse_step{n}))"
        ));
        self.w.line(format!("fuse_cp_async_wait<FUSE_PIPE - 2 - FUSE_INFLIGHT{n}>();"));
        if !tma.is_empty() {
            self.tma_wait(n);
        }
        self.w.line("fuse_fence_async();  // the stage's copies before the tensor cores read them");
        self.w.line("__syncthreads();");
        // With MMAs in flight the next stage's copies are issued after this iteration's MMAs
        // (Triton's order: the tensor cores get their work first). The stage they fill was read
        // by the MMAs of two iterations back, which every warpgroup waited for before the barrier.
        self.w.pp(format!("#if !FUSE_INFLIGHT{n}"));
        let ahead = self.w.mark();
        self.issue_ahead(
            n,
            &v,
            t,
            (body, plan, &boxes),
            &|i: usize| buf(&format!("fuse_wr{n}"), &at[i].0),
            &at,
        );
        let ahead = self.w.since(ahead);
        self.w.pp("#endif");
        for (i, l) in plan.loads.iter().enumerate() {
            self.staged.insert(l.dst, buf(&format!("fuse_rd{n}"), &at[i].0));
        }
        self.body(body);
        for l in &plan.loads {
            self.staged.remove(&l.dst);
        }
        self.w.pp(format!("#if FUSE_INFLIGHT{n}"));
        self.w.repeat(&ahead);
        self.w.pp("#endif");
        for (src, ..) in &resident {
            self.staged.remove(src);
        }
        self.w.line(format!("fuse_rd{n} = fuse_rd{n} + 1 == FUSE_PIPE ? 0 : fuse_rd{n} + 1;"));
        self.w.close();
        // The wgmma wait first: a cp.async wait between the loop and it also serialises them.
        self.w.pp(format!("#if FUSE_INFLIGHT{n}"));
        self.w.line("fuse_wg_wait<0>();  // the last iteration's MMAs, before the accumulators are read");
        self.w.pp("#endif");
        self.w.close();
        self.w.line("fuse_cp_async_wait<0>();");
        self.in_pipeline = outer;
        self.inflight = outer_inflight;
    }

    /// Issues the loads of iteration `fuse_ahead{n}` (if it runs) into stage `fuse_wr{n}`: the
    /// slice replayed with the counter `v` shadowed, then one async load each; commits a group
    /// (an empty one past the end, so that the count of groups stays one per iteration). A load
    /// with a tensor box (`boxes`) goes through TMA where `FUSE_TMA_ON_<k>` says so.
    fn issue_ahead(
        &mut self,
        n: usize,
        v: &str,
        t: &str,
        (body, plan, boxes): (&[Stmt], &LoopPlan, &[Option<fuse_ir::TensorBox>]),
        buf: &dyn Fn(usize) -> String,
        at: &[(String, (String, String))],
    ) {
        self.w.open(format!("if (fuse_ahead{n} < fuse_end{n})"));
        self.w.line(format!("const {t} {v} = fuse_ahead{n};"));
        // The replay re-emits statements already counted once: keep the emission counters.
        let (accesses, masks_named) = (self.accesses, self.masks_named);
        for &i in &plan.slice {
            self.body(std::slice::from_ref(&body[i]));
        }
        for (i, l) in plan.loads.iter().enumerate() {
            let Stmt::Assign { expr: Expr::Load { param, offset, mask, .. }, .. } = &body[l.stmt] else {
                unreachable!("staged loads are load statements")
            };
            let (w, h) = &at[i].1;
            if let Some(b) = &boxes[i] {
                self.w.pp(format!("#if FUSE_TMA_ON_{}", l.access));
                self.tma_copy(n, l.access, b, &buf(i), self.dtype(l.dst).size_bytes());
                self.w.pp("#else");
            }
            self.async_load(l.access, (*param, *offset, *mask), &buf(i), (w, h));
            if boxes[i].is_some() {
                self.w.pp("#endif");
            }
        }
        (self.accesses, self.masks_named) = (accesses, masks_named);
        self.w.line(format!("fuse_ahead{n} = fuse_next(fuse_ahead{n}, fuse_end{n}, fuse_step{n});"));
        self.w.close();
        self.w.line("fuse_cp_async_commit();");
        self.w.line(format!("fuse_wr{n} = fuse_wr{n} + 1 == FUSE_PIPE ? 0 : fuse_wr{n} + 1;"));
    }

    /// Makes the ring (`fuse_ring`, after the rest of the scratch) at least `bytes` large.
    fn ring_bytes_for(&mut self, bytes: String) {
        if !self.ring_bytes.contains(&bytes) {
            self.ring_bytes.push(bytes);
        }
    }
}
