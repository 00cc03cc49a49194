//! The lowering of a pipelined `dot` K loop (`analysis/pipeline.rs` decides which loops and
//! loads): the ring of shared-memory stages, its prologue, and the loop that refills a stage
//! while the tensor cores read another.
use super::ctype::c_type;
use super::Emitter;
use crate::emit_cuda::analysis::pipeline::LoopPlan;
use fuse_ir::{Expr, Stmt, VarId};

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

impl Emitter<'_> {
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
        let inflight = self.inflight_condition(plan);
        self.w.pp(format!("#define FUSE_INFLIGHT{n} {inflight}"));
        // The loads that may go through TMA (a tensor box, on sm_90a, where the runtime passes a map).
        let boxes: Vec<Option<fuse_ir::TensorBox>> =
            plan.loads.iter().map(|l| super::tma::tensor_box(self.k, &body[l.stmt])).collect();
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
        let (at, stage) = self.stage_layout(plan);
        let (resident, end) = self.resident_layout(plan, &stage);
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
        self.stage_residents(&resident);
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

    /// `FUSE_INFLIGHT<n>`: the loop's MMAs stay in flight across iterations (wgmma path, 3+
    /// stages).
    fn inflight_condition(&self, plan: &LoopPlan) -> String {
        let inflight: Vec<String> = plan
            .inflight
            .iter()
            .map(|&v| format!("FUSE_WG{}", self.tile(v).expect("dot accumulators are tiles")))
            .collect();
        if inflight.is_empty() {
            "0".to_string()
        } else {
            format!("(FUSE_PIPE >= 3 && {})", inflight.join(" && "))
        }
    }

    /// One stage of the ring: per staged load, its buffer's byte offset in the stage and its
    /// `(cols, rows)`; and the stage's byte size. The buffers lie one after the other, each
    /// `[rows, cols]` of their elements from a 1024-byte boundary (wgmma's swizzle atoms; the ring
    /// starts on one).
    #[allow(clippy::type_complexity)]
    fn stage_layout(&self, plan: &LoopPlan) -> (Vec<(String, (String, String))>, String) {
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
        (at, stage)
    }

    /// The resident operands after the `FUSE_PIPE` stages of `stage` bytes, each 1024-byte
    /// aligned: (the staged var, its byte offset in the ring, `(cols, rows)`, its element size);
    /// and the ring's end.
    #[allow(clippy::type_complexity)]
    fn resident_layout(
        &self,
        plan: &LoopPlan,
        stage: &str,
    ) -> (Vec<(VarId, String, (String, String), usize)>, String) {
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
        (resident, end)
    }

    /// Stages the resident operands, read by every iteration, once before the loop (the first
    /// iteration's barrier publishes them).
    fn stage_residents(&mut self, resident: &[(VarId, String, (String, String), usize)]) {
        for (src, at, (cols, rows), esz) in resident {
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
