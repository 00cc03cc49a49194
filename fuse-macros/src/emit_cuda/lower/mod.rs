//! The lowering of a kernel's IR to CUDA C: the [`Emitter`] walks the statements in the order of
//! [`analysis::schedule`] and writes their C, reading the facts of [`analysis`].
pub(super) mod body;
pub(super) mod coalesce;
pub(super) mod ctype;
pub(super) mod divisibility;
pub(super) mod dot;
pub(super) mod finish;
pub(super) mod layout;
pub(super) mod memory;
pub(super) mod mma;
pub(super) mod names;
pub(super) mod pipeline;
pub(super) mod prelude;
pub(super) mod random;
pub(super) mod reduce;
pub(super) mod remat;
pub(super) mod shape;
pub(super) mod tf32;
pub(super) mod tma;
pub(super) mod wgmma;
pub(super) mod writer;

use super::analysis;
use super::analysis::affine::{self, Div, Facts};
use super::analysis::layout::Layout;
use super::CudaSource;
use fuse_ir::{DType, Expr, Kernel, RandWidth, Specialization, Stmt, VarId};
use names::Names;
use prelude::Needs;
use writer::Writer;

/// The CUDA C of `kernel`: the analyses ([`Emitter::new`]), the top-level statements in their
/// order ([`Emitter::top_level_statements`]), then the file around them ([`Emitter::finish`]).
pub(super) fn emit(kernel: &Kernel) -> CudaSource {
    let mut emitter = Emitter::new(kernel);
    emitter.top_level_statements();
    emitter.finish()
}

impl<'k> Emitter<'k> {
    /// The emitter of `kernel`, with the analyses' facts and nothing emitted.
    fn new(kernel: &'k Kernel) -> Emitter<'k> {
        let mut layout = Layout::new(kernel);
        let var_layout = analysis::slices::assign(kernel, &mut layout);
        let mut emitter = Emitter {
            k: kernel,
            names: Names::new(kernel),
            layout,
            var_layout,
            transparent: analysis::remat::index_computable(kernel, &kernel.assignment_counts()),
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
        let uses = analysis::pipeline::use_counts(kernel);
        emitter.pipelines = analysis::pipeline::plan(kernel, &emitter.assignments, &uses);
        emitter.kmajor_b = analysis::tensor_cores::kmajor_operands(kernel, &emitter.assignments, &uses);
        emitter.chunk_uniform =
            (0..kernel.vars.len()).map(|v| emitter.chunk_uniform_cond(VarId(v as u32))).collect();
        emitter
    }
}

impl Emitter<'_> {
    /// The kernel body: its top-level statements in the order of [`analysis::schedule`], each
    /// numbering its accesses by its place in program order.
    fn top_level_statements(&mut self) {
        let k = self.k;
        let host_divisions: Vec<VarId> = k.host_divisions().iter().map(fuse_ir::HostProgram::var).collect();
        let order = analysis::schedule::schedule(k, &self.assignments, &host_divisions);
        // The uniform slow-path calls: at the head where a thread holds few lanes, else where they
        // are (analysis/schedule.rs says why).
        let few_lanes = self.layout.lanes_at_most(16);
        if !order.head.is_empty() {
            self.w.pp(format!("#if {few_lanes}"));
            self.top_level(&order.head, &order.accesses_before);
            self.w.pp("#endif");
        }
        for part in [&order.prologue, &order.uniform] {
            self.body_unless_late(part, &order.late, &few_lanes, &order.accesses_before);
        }
        let at = |i: &usize| &k.body[*i];
        let uniform = order.head.iter().chain(&order.prologue).chain(&order.uniform).map(at);
        self.hoisted_rand_bounds(uniform, order.rest.iter().map(at));
        // The early loads: with the first load where `early_when` holds, else in place (analysis/schedule.rs).
        let early_here = &early_when(k, &order.early);
        if !order.early.is_empty() {
            let masks_named = self.masks_named; // a mask among them is emitted twice, counted once
            self.w.pp(format!("#if {early_here}"));
            self.top_level(&order.early, &order.accesses_before);
            self.w.pp("#endif");
            self.masks_named = masks_named;
        }
        let is_early = |i: &usize| order.early.contains(i);
        for run in order.rest.chunk_by(|a, b| is_early(a) == is_early(b)) {
            if is_early(&run[0]) {
                self.w.pp(format!("#if !({early_here})"));
                self.top_level(run, &order.accesses_before);
                self.w.pp("#endif");
            } else {
                self.top_level(run, &order.accesses_before);
            }
        }
        assert_eq!(order.accesses_before[k.body.len()] as usize, k.accesses().len());
        assert_eq!(self.masks_named, self.masks.len(), "every mask's one assignment is emitted");
    }

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

    /// [`Emitter::top_level`], with each run of statements that assign a `late` var under
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

/// Where the early loads go with the first load (a preprocessor condition): on one warp, and where
/// the tiles they load hold together at most half as many elements as the kernel's first loaded
/// tile (LayerNorm's weight and bias rows beside its `[ROWS, BLOCK]` tile). Issued early, loads as
/// large as that tile keep as many more registers live across the reductions (the one-row
/// LayerNorm f32 `[1024]` on one warp spilled).
fn early_when(k: &Kernel, early: &[usize]) -> String {
    let len_of = |s: &Stmt| match s {
        Stmt::Assign { dst, expr: Expr::Load { .. } } => k.ty(*dst).shape.len().map(|l| l.c_expr(&k.consts)),
        _ => None,
    };
    let first = k.body.iter().find(|s| matches!(s, Stmt::Assign { expr: Expr::Load { .. }, .. }));
    let early: Vec<String> = early.iter().filter_map(|&i| len_of(&k.body[i])).collect();
    match first.and_then(len_of) {
        Some(big) if !early.is_empty() => {
            format!("FUSE_NUM_WARPS == 1 && 2 * ({}) <= ({big})", early.join(" + "))
        }
        _ => "0".into(),
    }
}

/// Emission state for one kernel.
struct Emitter<'k> {
    k: &'k Kernel,
    names: Names,
    layout: Layout,
    /// Per var: its layout index (`None` for scalars); see [`analysis::slices`].
    var_layout: Vec<Option<usize>>,
    /// Per var: an index tile that fits any layout ([`analysis::remat::index_computable`]).
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
    pipelines: std::collections::HashMap<VarId, analysis::pipeline::LoopPlan>,
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
    /// ([`analysis::pipeline::LoopPlan::inflight`]).
    inflight: Option<(usize, Vec<VarId>)>,
    loop_scratch: Vec<String>,
    /// The pipelined loops with loads that may go through TMA ([`tma`]): the loop's number and
    /// those loads' access indices.
    tma_loops: Vec<(usize, Vec<u32>)>,
    /// The layout whose slot `fuse_i` is the lane `fuse_f` of the code being emitted, while a
    /// broadcast or a view computes values at lanes: an MMA layout's row and column of a slot then
    /// come from `FUSE_ROW`/`FUSE_COL` instead of dividing `fuse_f` ([`Emitter::source_lane`]).
    lane_layout: Option<usize>,
    /// The kernel body; the rest of the file is assembled around it in [`Emitter::finish`].
    w: Writer,
}

impl Emitter<'_> {
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

    /// The condition of [`Emitter::chunk_uniform`] for `v`, recording the facts it reads.
    fn chunk_uniform_cond(&mut self, v: VarId) -> Option<String> {
        let affine::Fact::ChunkUniform(bounds) = self.facts.get(v).clone() else { return None };
        let k = self.tile(v)?;
        let conds: Vec<String> = bounds.iter().map(|d| self.vec_divides(d, k)).filter(|c| c != "1").collect();
        Some(if conds.is_empty() { "1".into() } else { format!("({})", conds.join(" && ")) })
    }

    /// As [`Emitter::at`], converted to dtype `to`.
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
}
