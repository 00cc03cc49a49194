//! IR → self-contained CUDA C (see docs/DESIGN.md, "Runtime conventions").
//!
//! One thread block runs one program with `FUSE_THREADS = 32 * FUSE_NUM_WARPS` threads. Tiles
//! are spread over the threads as [`layout`] describes; scalars are per-thread copies of a
//! uniform value. The pieces:
//! * [`names`]: C identifiers; [`ctype`]: C types, literals, conversions;
//! * [`affine`]: which offsets are contiguous/aligned (licenses vector access, Philox x4);
//! * [`body`]: statements and element-wise expressions; [`memory`]: loads and stores with
//!   bounds checks; [`coalesce`]: stores of tensor-core results through the scratch;
//!   [`reduce`]: block reductions; [`random`]: `rand`; [`shape`]: operations that
//!   move lanes between threads; [`dot`]: `dot`'s lowering, on tensor cores ([`mma`], [`tf32`],
//!   [`wgmma`]) or the general fallback; [`pipeline`]: software pipelining of `dot` K loops;
//! * [`prelude`]: the device helpers the body used;
//!
//! Launch-time facts the source specialises on (`FUSE_ALIGN16_<p>`, `FUSE_DIV16_<p>`) are listed
//! in [`CudaSource::specializations`]; the source tests them with `#if` and carries a plain
//! fallback for when they are 0.
use fuse_ir::{DType, Kernel, ParamKind, RandWidth, Specialization, Stmt, VarId};

mod analysis;
mod lower;
#[cfg(test)]
mod tests;

use analysis::{affine, layout, pipeline, remat, schedule, slices};
use lower::{ctype, mma, names, prelude, tma, writer};

use affine::{Div, Facts};
use ctype::c_type;
use layout::Layout;
use names::Names;
use prelude::Needs;
use writer::Writer;

/// The emitted translation unit and the launch-time facts it specialises on.
pub struct CudaSource {
    pub source: String,
    pub specializations: Vec<Specialization>,
}

pub fn emit_cuda(kernel: &Kernel) -> CudaSource {
    let mut layout = Layout::new(kernel);
    let var_layout = slices::assign(kernel, &mut layout);
    let mut cx = Ctx {
        k: kernel,
        names: Names::new(kernel),
        layout,
        var_layout,
        transparent: remat::index_computable(kernel, &kernel.assignment_counts()),
        facts: Facts::analyse(kernel),
        needs: Needs::default(),
        specs: Vec::new(),
        chunk_uniform: Vec::new(),
        reduce_types: Vec::new(),
        scratch_bytes: Vec::new(),
        fold_scratch: Vec::new(),
        fold_scratch_at: None,
        loops: 0,
        accesses: 0,
        rand_words: Vec::new(),
        rand_bounds: 0,
        rand16_words: Vec::new(),
        top_rand_bounds: Vec::new(),
        masks: kernel.masks(),
        branches: kernel.uniform_branches().iter().map(fuse_ir::HostProgram::cond).collect(),
        host_scalars: kernel.host_scalars().iter().map(fuse_ir::HostProgram::var).collect(),
        masks_named: 0,
        assignments: kernel.assignment_counts(),
        pipelines: Default::default(),
        kmajor_b: Default::default(),
        staged: Default::default(),
        ring_bytes: Vec::new(),
        dot_paths: Vec::new(),
        in_pipeline: false,
        inflight: None,
        loop_scratch: Vec::new(),
        tma_loops: Vec::new(),
        lane_layout: None,
        w: Writer::new(1),
    };
    let uses = pipeline::use_counts(kernel);
    cx.pipelines = pipeline::plan(kernel, &cx.assignments, &uses);
    cx.kmajor_b = mma::kmajor_operands(kernel, &cx.assignments, &uses);
    cx.chunk_uniform = (0..kernel.vars.len()).map(|v| cx.chunk_uniform_cond(VarId(v as u32))).collect();
    let host_divisions: Vec<VarId> = kernel.host_divisions().iter().map(fuse_ir::HostProgram::var).collect();
    let order = schedule::schedule(kernel, &cx.assignments, &host_divisions);
    // The uniform slow-path calls: at the head where a thread holds few lanes, else where they
    // are (schedule.rs says why).
    let few_lanes = cx.layout.lanes_at_most(16);
    if !order.head.is_empty() {
        cx.w.pp(format!("#if {few_lanes}"));
        cx.top_level(&order.head, &order.accesses_before);
        cx.w.pp("#endif");
    }
    for part in [&order.prologue, &order.uniform] {
        cx.body_unless_late(part, &order.late, &few_lanes, &order.accesses_before);
    }
    let at = |i: &usize| &kernel.body[*i];
    let uniform = order.head.iter().chain(&order.prologue).chain(&order.uniform).map(at);
    cx.hoisted_rand_bounds(uniform, order.rest.iter().map(at));
    // The early loads: with the first load where `early_when` holds, else in place (schedule.rs).
    let early_here = &order.early_when;
    if !order.early.is_empty() {
        let masks_named = cx.masks_named; // a mask among them is emitted twice, counted once
        cx.w.pp(format!("#if {early_here}"));
        cx.top_level(&order.early, &order.accesses_before);
        cx.w.pp("#endif");
        cx.masks_named = masks_named;
    }
    let is_early = |i: &usize| order.early.contains(i);
    for run in order.rest.chunk_by(|a, b| is_early(a) == is_early(b)) {
        if is_early(&run[0]) {
            cx.w.pp(format!("#if !({early_here})"));
            cx.top_level(run, &order.accesses_before);
            cx.w.pp("#endif");
        } else {
            cx.top_level(run, &order.accesses_before);
        }
    }
    assert_eq!(order.accesses_before[kernel.body.len()] as usize, kernel.accesses().len());
    assert_eq!(cx.masks_named, cx.masks.len(), "every mask's one assignment is emitted");
    cx.finish()
}

impl Ctx<'_> {
    /// The top-level statements `order` (indices into `Kernel::body`), each numbering its
    /// accesses from `accesses_before[i]` (their place in program order) wherever it is emitted.
    fn top_level(&mut self, order: &[usize], accesses_before: &[u32]) {
        for &i in order {
            self.accesses = accesses_before[i];
            self.body(std::slice::from_ref(&self.k.body[i]));
            // FUSE_INB_<k> names access k of `Kernel::accesses`: a mismatch would unguard the wrong one.
            assert_eq!(self.accesses, accesses_before[i + 1], "accesses are numbered in program order");
        }
    }

    /// [`Ctx::top_level`], with each run of statements that assign a `late` var under
    /// `#if !(few_lanes)`.
    fn body_unless_late(&mut self, order: &[usize], late: &[bool], few_lanes: &str, accesses_before: &[u32]) {
        let k = self.k;
        let is_late = |&i: &usize| matches!(&k.body[i], Stmt::Assign { dst, .. } if late[dst.0 as usize]);
        for run in order.chunk_by(|a, b| is_late(a) == is_late(b)) {
            if is_late(&run[0]) {
                self.w.pp(format!("#if !({few_lanes})"));
                self.top_level(run, accesses_before);
                self.w.pp("#endif");
            } else {
                self.top_level(run, accesses_before);
            }
        }
    }
}

/// Every module defines the dynamic shared memory symbol (0: none), so the runtime's lookup never
/// fails (a failed `cuModuleGetGlobal` is an error report under compute-sanitizer).
const NO_DYNAMIC_SMEM: &str = "extern \"C\" __device__ const unsigned int fuse_dynamic_smem_bytes = 0u;";

/// `constexpr long long <name>` = the largest of `terms` (C expressions), through a running
/// maximum of named constants `<name>_0, <name>_1, ..` (one nested expression would spell each
/// term exponentially often).
fn running_max(out: &mut Writer, name: &str, terms: &[String]) {
    for (i, t) in terms.iter().enumerate() {
        let v = if i == 0 { t.clone() } else { format!("{name}_{} > {t} ? {name}_{} : {t}", i - 1, i - 1) };
        out.line(format!("constexpr long long {name}_{i} = {v};"));
    }
    out.line(format!("constexpr long long {name} = {name}_{};", terms.len() - 1));
}

/// Emission state for one kernel.
struct Ctx<'k> {
    k: &'k Kernel,
    names: Names,
    layout: Layout,
    /// Per var: its layout index (`None` for scalars); see [`slices`].
    var_layout: Vec<Option<usize>>,
    /// Per var: an index tile that fits any layout ([`remat::index_computable`]).
    transparent: Vec<bool>,
    facts: Facts,
    needs: Needs,
    specs: Vec<Specialization>,
    /// Per var: the preprocessor condition under which the (bool) tile is constant on each chunk
    /// (see [`affine::Fact::ChunkUniform`]); its lanes are then read at the chunk's first slot.
    chunk_uniform: Vec<Option<String>>,
    /// Accumulator dtypes of the reductions (one shared-memory buffer each).
    reduce_types: Vec<DType>,
    /// The byte sizes (C expressions) of the tiles that pass through the shared scratch `fuse_xs`
    /// ([`shape`]): it is as large as the largest.
    scratch_bytes: Vec<String>,
    /// The byte sizes the folds across threads take in `fuse_xs` ([`shape`]): one entry of
    /// `scratch_bytes` (at `fold_scratch_at`) is their maximum, so that each adds no term there.
    fold_scratch: Vec<String>,
    fold_scratch_at: Option<usize>,
    /// Counter for the per-loop bound names.
    loops: usize,
    /// Loads and stores emitted so far (the next one's index in `Kernel::accesses`).
    accesses: u32,
    /// Tile vars assigned by `rand` whose Philox words are kept in `fuse_bits_<name>`.
    rand_words: Vec<VarId>,
    /// How many `rand > p` bounds (`fuse_lb<n>`) were declared so far.
    rand_bounds: usize,
    /// Those of `rand_words` assigned by `rand16` (their words are 16-bit half-words).
    rand16_words: Vec<VarId>,
    /// Those declared at the top level for a `p` assigned once (reused by every comparison of
    /// that width).
    top_rand_bounds: Vec<(VarId, RandWidth, usize)>,
    /// [`Kernel::masks`]: mask `k` is assigned as `FUSE_TRUE_<k> || (test)`.
    masks: Vec<VarId>,
    /// [`Kernel::uniform_branches`]: an `if` on branch `k`'s condition is emitted as
    /// `FUSE_IFT_<k> || (!FUSE_IFF_<k> && cond)`, decided at compile time where the runtime
    /// computed the condition for the launch.
    branches: Vec<VarId>,
    /// [`Kernel::host_scalars`]: var `i` of this list is assigned from the parameter
    /// `fuse_host<i>`, which the runtime computes at launch.
    host_scalars: Vec<VarId>,
    /// How many of `masks` were emitted so far.
    masks_named: usize,
    /// Per var: how many statements assign it (`for` counters included).
    assignments: Vec<u32>,
    /// The pipelined loops, by counter ([`pipeline`]).
    pipelines: std::collections::HashMap<VarId, pipeline::LoopPlan>,
    /// `dot` operands `b = trans(w)` staged from `w` as B's K-major form (`b` -> `w`; [`mma`]).
    kmajor_b: std::collections::HashMap<VarId, VarId>,
    /// While a pipelined body is emitted: its staged loads' shared buffers (`unsigned short*`).
    staged: std::collections::HashMap<VarId, String>,
    /// The byte sizes of the pipelines' rings (`fuse_ring`, after the scratch's uses in them).
    ring_bytes: Vec<String>,
    /// Per tensor-core `dot`: a preprocessor expression of its instructions (1 `mma.sync`, 2
    /// `wgmma`), or-ed into the module's `fuse_dot_path`.
    dot_paths: Vec<String>,
    /// Whether a pipelined loop is being emitted, and the scratch sizes its statements use.
    in_pipeline: bool,
    /// The pipelined loop being emitted (its number) and its in-flight accumulators
    /// ([`pipeline::LoopPlan::inflight`]).
    inflight: Option<(usize, Vec<VarId>)>,
    loop_scratch: Vec<String>,
    /// The pipelined loops with loads that may go through TMA ([`tma`]): the loop's number and
    /// those loads' access indices.
    tma_loops: Vec<(usize, Vec<u32>)>,
    /// The layout whose slot `fuse_i` is the lane `fuse_f` of the code being emitted, while a
    /// broadcast or a view computes values at lanes: an MMA layout's row and column of a slot then
    /// come from `FUSE_ROW`/`FUSE_COL` instead of dividing `fuse_f` ([`Ctx::source_lane`]).
    lane_layout: Option<usize>,
    /// The kernel body; the rest of the file is assembled around it in [`Ctx::finish`].
    w: Writer,
}

impl Ctx<'_> {
    fn name(&self, v: VarId) -> &str {
        &self.names.vars[v.0 as usize]
    }

    fn dtype(&self, v: VarId) -> DType {
        self.k.ty(v).dtype
    }

    /// The layout index of a tile var, `None` for a scalar.
    fn tile(&self, v: VarId) -> Option<usize> {
        self.var_layout[v.0 as usize]
    }

    /// The value of `v` in slot `i` (a tile) or its value (a scalar, broadcast).
    fn at(&self, v: VarId, i: &str) -> String {
        match (self.tile(v), &self.chunk_uniform[v.0 as usize]) {
            (Some(k), Some(c)) if c == "1" => format!("{}[({i}) - ({i}) % FUSE_VEC{k}]", self.name(v)),
            (Some(k), Some(c)) => format!("{}[{c} ? ({i}) - ({i}) % FUSE_VEC{k} : ({i})]", self.name(v)),
            (Some(_), None) => format!("{}[{i}]", self.name(v)),
            (None, _) => self.name(v).to_string(),
        }
    }

    /// The condition of [`Ctx::chunk_uniform`] for `v`, recording the facts it reads.
    fn chunk_uniform_cond(&mut self, v: VarId) -> Option<String> {
        let affine::Fact::ChunkUniform(bounds) = self.facts.get(v).clone() else { return None };
        let k = self.tile(v)?;
        let conds: Vec<String> = bounds.iter().map(|d| self.vec_divides(d, k)).filter(|c| c != "1").collect();
        Some(if conds.is_empty() { "1".into() } else { format!("({})", conds.join(" && ")) })
    }

    /// As [`Ctx::at`], converted to dtype `to`.
    fn at_as(&mut self, v: VarId, i: &str, to: DType) -> String {
        let e = self.at(v, i);
        ctype::convert(&e, self.dtype(v), to, &mut self.needs)
    }

    fn spec(&mut self, s: Specialization) {
        if !self.specs.contains(&s) {
            self.specs.push(s);
        }
    }

    /// A preprocessor condition for "`FUSE_VEC{k}` divides `div`" (VEC is at most the widest
    /// vector, `layout.veck`).
    fn vec_divides(&mut self, div: &Div, k: usize) -> String {
        let max_log2 = self.layout.veck.trailing_zeros() as u8;
        self.divisible(div, &format!("FUSE_VEC{k}"), max_log2)
    }

    /// A preprocessor condition for "`div` is a multiple of `m`" (a power of two ≤ 2^max_log2),
    /// recording the `FUSE_DIV16_` facts it reads.
    fn divisible(&mut self, div: &Div, m: &str, max_log2: u8) -> String {
        // Spelled as the runtime defines them (the user's param names, not the C names).
        let macros: Vec<String> = (0..self.k.params.len() as u32)
            .map(|p| Specialization::Div16(p).macro_name(&self.k.params))
            .collect();
        let (cond, read) = div.multiple_of(m, max_log2, &self.k.consts, &macros);
        for p in read {
            self.spec(Specialization::Div16(p));
        }
        cond
    }

    fn finish(self) -> CudaSource {
        let k = self.k;
        let mut specs = self.specs.clone();
        specs.sort_by_key(|s| match *s {
            Specialization::Align16(p) => (0, p),
            Specialization::Div16(p) => (1, p),
            Specialization::InBounds(a) => (2, a),
            Specialization::AllTrue(m) => (3, m),
            Specialization::BranchTaken(b) => (4, b),
            Specialization::BranchSkipped(b) => (5, b),
            Specialization::TensorBox(a) => (6, a),
        });
        let mut out = Writer::new(0);
        out.line(format!(
            "// fuse: CUDA C for kernel `{}`, generated by #[fused_kernel]; do not edit.",
            k.name
        ));
        out.line(
            "// The runtime #defines the const generics, FUSE_NUM_WARPS and the specialisation facts first.",
        );
        out.line("// One program per thread block of 32 * FUSE_NUM_WARPS threads.");
        let mut required: Vec<(String, String)> =
            k.consts.iter().map(|c| (c.clone(), format!("the value of const generic {c}"))).collect();
        required.push(("FUSE_NUM_WARPS".into(), "the number of warps per program".into()));
        for s in &specs {
            let what = match *s {
                Specialization::Align16(p) => {
                    format!("1 if pointer `{}` is 16-byte aligned, else 0", k.params[p as usize].name)
                }
                Specialization::Div16(p) => {
                    format!("1 if `{}` is a multiple of 16, else 0", k.params[p as usize].name)
                }
                Specialization::InBounds(a) => {
                    format!("1 if access {a} is proven in bounds for this launch, else 0")
                }
                Specialization::AllTrue(m) => {
                    format!("1 if mask {m} is proven true on every lane for this launch, else 0")
                }
                Specialization::BranchTaken(b) => {
                    format!("1 if branch condition {b} is true for this launch, else 0")
                }
                Specialization::BranchSkipped(b) => {
                    format!("1 if branch condition {b} is false for this launch, else 0")
                }
                Specialization::TensorBox(a) => {
                    format!("1 if the runtime passes a tensor map for load {a} (fuse_tmap{a}), else 0")
                }
            };
            required.push((s.macro_name(&k.params), what));
        }
        for (m, what) in required {
            out.pp(format!("#ifndef {m}"));
            out.pp(format!("#error \"fuse kernel {}: #define {m} ({what}) before this source\"", k.name));
            out.pp("#endif");
        }
        out.pp("#if FUSE_NUM_WARPS < 1 || FUSE_NUM_WARPS > 32");
        out.pp(format!("#error \"fuse kernel {}: FUSE_NUM_WARPS must be in 1..=32\"", k.name));
        out.pp("#endif");
        out.line("");
        for m in self.layout.macros(&k.consts) {
            out.pp(m);
        }
        out.line("");
        let mut scratch_bytes = self.scratch_bytes.clone();
        let ring = !self.ring_bytes.is_empty();
        if ring {
            // The ring follows the scratch's uses inside pipelined loops (live while it is); the
            // uses before and after the loops may overlap it.
            for l in pipeline::STAGES.lines() {
                out.pp(l);
            }
            let inside =
                if self.loop_scratch.is_empty() { vec!["0".to_string()] } else { self.loop_scratch.clone() };
            running_max(&mut out, "fuse_ring_in", &inside);
            out.line("constexpr long long fuse_ring_at = (fuse_ring_in + 1023) / 1024 * 1024;");
            running_max(&mut out, "fuse_ring_bytes", &self.ring_bytes);
            scratch_bytes.push("(fuse_ring_at + fuse_ring_bytes)".into());
        }
        if !scratch_bytes.is_empty() {
            // The largest of the tiles that move lanes between threads (shape.rs, dot.rs), as a
            // running maximum of named constants: one nested expression would spell each size
            // exponentially often. Whether any is past 48 KiB is a preprocessor test (linear);
            // a pipelined loop's ring is always dynamic (its size needs a constexpr).
            running_max(&mut out, "fuse_xs_bytes", &scratch_bytes);
            let past: Vec<String> = scratch_bytes.iter().map(|b| format!("({b}) > 48 * 1024")).collect();
            let dynamic = if ring { "1".to_string() } else { past.join(" || ") };
            out.pp(format!("#define FUSE_SCRATCH_DYNAMIC ({dynamic})"));
            out.pp("#if FUSE_SCRATCH_DYNAMIC");
            out.line("extern \"C\" __device__ const unsigned int fuse_dynamic_smem_bytes = (unsigned int)fuse_xs_bytes;");
            out.pp("#else");
            out.line(NO_DYNAMIC_SMEM);
            out.pp("#endif");
            out.line("");
        } else {
            out.line(NO_DYNAMIC_SMEM);
            out.line("");
        }
        for l in tma::switches(&self.tma_loops) {
            out.pp(l);
        }
        // Which tensor-core instructions the dots took (the runtime reports it); 0 without one.
        // Every module defines it, so the runtime's lookup never fails (compute-sanitizer
        // reports a failed `cuModuleGetGlobal` as an error).
        let any = if self.dot_paths.is_empty() {
            "0u".to_string()
        } else {
            self.dot_paths.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" | ")
        };
        // Bits 8 and up: how many loads this compile copies with TMA ([`tma`]).
        let tma: Vec<String> =
            self.tma_loops.iter().flat_map(|(_, a)| a.iter().map(|a| format!("FUSE_TMA_ON_{a}"))).collect();
        let any = if tma.is_empty() { any } else { format!("{any} | (({}) << 8)", tma.join(" + ")) };
        out.line(format!("extern \"C\" __device__ const unsigned int fuse_dot_path = {any};"));
        let helpers = self.needs.text();
        if !helpers.is_empty() {
            for l in helpers.lines() {
                out.pp(l);
            }
            out.line("");
        }

        // Signature: user params, then one length per pointer, the host scalars, the error words.
        let mut params: Vec<String> = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let n = &self.names.params[i];
            params.push(match p.kind {
                ParamKind::Ptr { elem, mutable: false } => {
                    format!("const {}* __restrict__ {n}", c_type(elem))
                }
                ParamKind::Ptr { elem, mutable: true } => format!("{}* __restrict__ {n}", c_type(elem)),
                ParamKind::Scalar(d) => format!("{} {n}", c_type(d)),
            });
        }
        for l in self.names.lens.iter().filter(|l| !l.is_empty()) {
            params.push(format!("long long {l}"));
        }
        // Then the scalars the runtime computes at launch (host_scalars.rs in fuse-ir).
        for (i, v) in self.host_scalars.iter().enumerate() {
            params.push(format!("{} fuse_host{i}", c_type(self.k.ty(*v).dtype)));
        }
        params.push("unsigned long long* fuse_err".into());
        // Then one tensor map per TMA load, in the order of the specialisations.
        for s in &specs {
            if let Specialization::TensorBox(a) = s {
                params.push(format!("const __grid_constant__ fuse_tmap_t fuse_tmap{a}"));
            }
        }
        // On one warp a multiprocessor holds at most 32 blocks (sm_80, sm_90), which 64 registers a
        // thread allow: a kernel holding at most 32 lanes of each tile a thread is held to them,
        // where ptxas would take a few more for its schedule and lose blocks (LayerNorm f32
        // `[4, 256]`: 71 registers, 28 blocks; docs/PERF.md, session 22). The runtime compiles it
        // again without the cap (FUSE_NO_WARP_CAP) if that spills (cuda/nvrtc.rs
        // `compile_capped`). Elsewhere the one-argument form: an explicit minimum of 1 changes
        // ptxas's register targets.
        out.pp(format!("#if FUSE_NUM_WARPS == 1 && {} && !FUSE_NO_WARP_CAP", self.layout.lanes_at_most(32)));
        out.pp("#define FUSE_LAUNCH_BOUNDS __launch_bounds__(FUSE_THREADS, 32)");
        out.pp("#else");
        out.pp("#define FUSE_LAUNCH_BOUNDS __launch_bounds__(FUSE_THREADS)");
        out.pp("#endif");
        out.line(format!("extern \"C\" __global__ void FUSE_LAUNCH_BOUNDS {}(", k.name));
        for (i, p) in params.iter().enumerate() {
            out.line(format!("    {p}{}", if i + 1 == params.len() { ") {" } else { "," }));
        }
        out.line("  const int fuse_tid = (int)threadIdx.x;");
        if self.needs.oob {
            out.line("  // The thread's first out-of-bounds access (parameter index + 1, offset), reported at the end.");
            out.line("  unsigned int fuse_bad = 0u;");
            out.line("  long long fuse_bad_at = 0;");
        }
        if !self.reduce_types.is_empty() {
            out.pp("#if FUSE_NUM_WARPS > 1");
            out.line(
                "  // Cross-warp reduction buffers, double-buffered so one barrier per reduction suffices.",
            );
            for d in &self.reduce_types {
                out.line(format!("  __shared__ {} fuse_red_{}[2][FUSE_NUM_WARPS];", c_type(*d), d.name()));
            }
            out.line("  int fuse_phase = 0;");
            out.pp("#endif");
        }
        if !self.scratch_bytes.is_empty() || !self.ring_bytes.is_empty() {
            // Past the 48 KiB a block may declare statically the scratch is dynamic shared memory,
            // sized by the runtime from `fuse_dynamic_smem_bytes` (DESIGN.md, "Dynamic shared memory").
            out.pp("#if FUSE_SCRATCH_DYNAMIC");
            // 1024-byte aligned: tensor-core operands start on wgmma's swizzle atoms.
            out.line("  extern __shared__ __align__(1024) unsigned char fuse_xs[];");
            out.pp("#else");
            out.line("  __shared__ __align__(1024) unsigned char fuse_xs[fuse_xs_bytes];");
            out.pp("#endif");
        }
        if !self.ring_bytes.is_empty() {
            out.line("  unsigned char* fuse_ring = fuse_xs + fuse_ring_at;");
        }
        for (i, v) in k.vars.iter().enumerate() {
            let n = &self.names.vars[i];
            match self.var_layout[i] {
                Some(l) => out.line(format!("  {} {n}[FUSE_EPT{l}];", c_type(v.ty.dtype))),
                None => out.line(format!("  {} {n};", c_type(v.ty.dtype))),
            }
        }
        for v in &self.rand_words {
            let k = self.tile(*v).expect("rand words are kept for tiles only");
            out.line(format!("  unsigned int fuse_bits_{}[FUSE_EPT{k}];", self.name(*v)));
        }
        for l in tma::declarations(&self.tma_loops) {
            if l.starts_with('#') {
                out.pp(l);
            } else {
                out.line(l);
            }
        }
        let mut source = out.finish();
        source.push_str(&self.w.finish());
        if self.needs.oob {
            source.push_str("  if (fuse_bad != 0u) fuse_oob(fuse_err, fuse_bad - 1u, fuse_bad_at);\n");
        }
        source.push_str("}\n");
        CudaSource { source, specializations: specs }
    }
}
