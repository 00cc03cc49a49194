//! [`KernelSpec`]: what `#[fused_kernel]` generates for each kernel (name, CUDA source, IR, the
//! launch-time specializations its source reads), and the compile-time entry points on it.

use crate::bounds::{BoundsPlan, Proof};
use crate::cost::{Cost, CostArg};
use crate::error::{Error, Result};
use crate::launch::TensorMaps;
use crate::launch_memo::LastLaunch;
use fuse_ir::{DType, Expr, Kernel, Len, ParamKind, Specialization, Stmt, UnaryOp};
use std::fmt::Write as _;
use std::sync::OnceLock;

/// One kernel as the macro generated it. Constructible in a `static`.
///
/// `#[fused_kernel]` emits one per kernel, as `SPEC` in the kernel's module; [`crate::launch`]
/// takes it. Its IR is parsed and checked on first use ([`KernelSpec::kernel`]), once per process.
pub struct KernelSpec {
    name: &'static str,
    source: &'static str,
    ir_json: &'static str,
    specializations: &'static [Specialization],
    info: OnceLock<std::result::Result<KernelInfo, String>>,
}

/// How the host computes a [`fuse_ir::TensorBox`]'s scalars.
pub(crate) struct BoxPrograms {
    /// The load's offset var (whose range must be known: no wrap-around).
    pub(crate) offset: fuse_ir::VarId,
    pub(crate) stride: fuse_ir::HostProgram,
    pub(crate) row_end: Option<fuse_ir::HostProgram>,
    pub(crate) col_end: Option<fuse_ir::HostProgram>,
    pub(crate) base_pitch: Vec<fuse_ir::HostProgram>,
}

/// What the runtime derives from the IR once.
pub(crate) struct KernelInfo {
    pub(crate) kernel: Kernel,
    /// Per parameter: for pointers, the narrowest index dtype used to address it (`I32`/`U32`)
    /// if any load/store on it uses a 32-bit offset.
    pub(crate) narrow_index: Vec<Option<DType>>,
    /// `kernel.tile_lens()`, computed once.
    pub(crate) tile_lens: Vec<Len>,
    /// What picks the [`default_num_warps`] rule.
    pub(crate) shape: WarpShape,
    /// The launch-time in-bounds proof (`FUSE_INB_<k>`).
    pub(crate) bounds: BoundsPlan,
    /// `kernel.uniform_branches()`, computed once (`FUSE_IFT_<k>` / `FUSE_IFF_<k>`).
    pub(crate) branches: Vec<fuse_ir::HostProgram>,
    /// `kernel.host_scalars()`, computed once: the runtime evaluates them for each launch and
    /// passes the values as the kernel's `fuse_host<i>` parameters.
    pub(crate) host_scalars: Vec<fuse_ir::HostProgram>,
    /// Per [`Specialization::TensorBox`] of the spec, in order (`FUSE_TMA_<k>`, the kernel's
    /// extra tensor-map parameters): the access, its box, and how the host computes the box's
    /// stride, its mask's bounds and the factors of its offset's pitch (`None` where it cannot:
    /// no tensor map then).
    pub(crate) tensor_boxes: Vec<(u32, fuse_ir::TensorBox, Option<BoxPrograms>)>,
    /// The last launch's proof, kept while its inputs (const generics, grid, scalars, buffer
    /// lengths) repeat.
    pub(crate) last_proof: LastLaunch<Proof>,
    /// The last launch's tensor maps and the accesses they serve, kept while its inputs (the
    /// proof's and the buffers' addresses) repeat: encoding them evaluates the host programs and
    /// the bounds ranges and calls the driver.
    pub(crate) last_tensor_maps: LastLaunch<TensorMaps>,
}

impl KernelInfo {
    /// [`default_num_warps`] without allocating.
    pub(crate) fn default_num_warps(&self, consts: &[u64]) -> u32 {
        num_warps_for(self.largest_tile(consts), self.shape)
    }

    fn largest_tile(&self, consts: &[u64]) -> Option<u64> {
        self.tile_lens.iter().filter_map(|l| l.eval(consts)).max()
    }

    /// The default for a launch of `programs` programs on a GPU with `sms` multiprocessors: see
    /// [`fill_gpu`].
    pub(crate) fn default_num_warps_for_grid(&self, consts: &[u64], programs: u64, sms: u32) -> u32 {
        let largest = self.largest_tile(consts);
        let min_elems = if self.shape.axis_reduces { AXIS_REDUCE_ELEMS } else { 8 };
        fill_gpu(num_warps_for(largest, self.shape), largest.unwrap_or(1), min_elems, programs, sms)
    }
}

/// A grid too small to give each multiprocessor its 64 resident warps at `warps` per program
/// leaves the GPU latency-bound: double the warps while it still is and every thread keeps at least
/// `min_elems` elements of the largest tile `l` (8; f16 LayerNorm 4096x1024 on an H200: 4 warps
/// instead of 1; the sweep that chose it is `docs/runs/sweep-h200-s3/row_w*.json`). Axis
/// reductions keep their 16 (`AXIS_REDUCE_ELEMS`): 16384 rows of 256 in `[8, 256]` tiles fill an
/// H100 at 62 of its 64 warps a multiprocessor on 4 warps, and 8 warps were slower (the H100
/// sweep of [`default_num_warps`]).
fn fill_gpu(mut warps: u32, l: u64, min_elems: u64, programs: u64, sms: u32) -> u32 {
    while programs.saturating_mul(u64::from(warps)) < 64 * u64::from(sms)
        && l / (64 * u64::from(warps)) >= min_elems
        && warps < 16
    {
        warps *= 2;
    }
    warps
}

impl std::fmt::Debug for KernelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSpec")
            .field("name", &self.name)
            .field("specializations", &self.specializations)
            .finish_non_exhaustive()
    }
}

impl KernelSpec {
    /// `name`: the CUDA entry point; `source`: the emitted CUDA C (without the runtime's
    /// `#define`s); `ir_json`: the checked [`fuse_ir::Kernel`] as JSON; `specializations`: the
    /// launch-time facts the source reads (`FUSE_ALIGN16_*`, `FUSE_DIV16_*`, `FUSE_INB_*`,
    /// `FUSE_TRUE_*`). Nothing is checked here: a spec that does not fit together fails on first
    /// use (see [`KernelSpec::kernel`]).
    pub const fn new(
        name: &'static str,
        source: &'static str,
        ir_json: &'static str,
        specializations: &'static [Specialization],
    ) -> KernelSpec {
        KernelSpec { name, source, ir_json, specializations, info: OnceLock::new() }
    }

    /// The kernel's name, also its CUDA entry point.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The emitted CUDA C, without the runtime's `#define`s (see [`KernelSpec::full_source`]).
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The checked [`fuse_ir::Kernel`] as JSON ([`KernelSpec::kernel`] parses it).
    pub fn ir_json(&self) -> &'static str {
        self.ir_json
    }

    /// The launch-time facts the source reads, in the order of the `spec_values` taken by
    /// [`KernelSpec::full_source`] and [`KernelSpec::compile_for_arch_with`].
    pub fn specializations(&self) -> &'static [Specialization] {
        self.specializations
    }

    /// The kernel's IR, parsed once per process.
    ///
    /// # Errors
    /// [`Error::InvalidKernel`] (on every call) if the IR JSON is not a [`fuse_ir::Kernel`], names
    /// another kernel than [`KernelSpec::name`], or does not fit the specializations or itself
    /// (a specialization or an access naming a parameter, var, access or mask that is not there).
    /// A spec that `#[fused_kernel]` generated should never fail this way.
    pub fn kernel(&self) -> Result<&Kernel> {
        self.info().map(|i| &i.kernel)
    }

    /// What one launch over `grid` with these const generics and arguments costs: the compulsory
    /// bytes of each buffer, the FLOPs counted from the IR, the arithmetic intensity (see
    /// [`crate::cost`] for the counting rules). `args` in parameter order: `(&buf).into()` or
    /// [`CostArg::Len`] for a pointer, the value for a scalar (`n.into()`).
    ///
    /// ```ignore
    /// let c = add_mul::f32::SPEC.cost(&[1024], 1024u32, &[(&x).into(), (&y).into(), (&z).into(), (&out).into(), (n as i32).into()])?;
    /// assert_eq!(c.bytes(), 16 * n as u64);
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the wrong number of const generics or arguments, or an
    /// argument of the wrong kind; [`Error::InvalidKernel`] as for [`KernelSpec::kernel`].
    pub fn cost(&self, consts: &[u64], grid: impl Into<crate::Grid>, args: &[CostArg]) -> Result<Cost> {
        let info = self.info()?;
        crate::cost::cost(&info.kernel, &info.bounds, consts, grid.into(), args)
    }

    pub(crate) fn info(&self) -> Result<&KernelInfo> {
        match self.info.get_or_init(|| self.build_info()) {
            Ok(info) => Ok(info),
            Err(e) => Err(Error::InvalidKernel(e.clone())),
        }
    }

    fn build_info(&self) -> std::result::Result<KernelInfo, String> {
        let kernel = Kernel::from_json(self.ir_json)
            .map_err(|e| format!("the IR of kernel `{}` is not valid fuse IR JSON: {e}", self.name))?;
        if kernel.name != self.name {
            return Err(format!("the IR names kernel `{}` but the spec is `{}`", kernel.name, self.name));
        }
        let nvars = kernel.vars.len();
        let nparams = kernel.params.len();
        let naccesses = kernel.accesses().len();
        let nmasks = kernel.masks().len();
        let branches = kernel.uniform_branches();
        let nbranches = branches.len();
        for s in self.specializations {
            let ok = match *s {
                Specialization::Align16(p) => {
                    matches!(kernel.params.get(p as usize).map(|p| p.kind), Some(ParamKind::Ptr { .. }))
                }
                Specialization::Div16(p) => {
                    matches!(kernel.params.get(p as usize).map(|p| p.kind), Some(ParamKind::Scalar(d)) if d.is_int())
                }
                Specialization::InBounds(a) => (a as usize) < naccesses,
                Specialization::AllTrue(m) => (m as usize) < nmasks,
                Specialization::BranchTaken(b) | Specialization::BranchSkipped(b) => (b as usize) < nbranches,
                Specialization::TensorBox(a) => {
                    kernel.accesses().get(a as usize).and_then(|x| kernel.tensor_box(x)).is_some()
                }
            };
            if !ok {
                return Err(format!(
                    "kernel `{}`: specialization {s:?} does not name a fitting parameter",
                    self.name
                ));
            }
        }
        // The emitter names every access (mask) in `Kernel::accesses` (`Kernel::masks`) order: a
        // source that names some other set would drop the checks (tests) of the wrong ones.
        let named = |what: &str, n: usize, index: fn(&Specialization) -> Option<u32>| {
            let named: Vec<u32> = self.specializations.iter().filter_map(index).collect();
            if named.is_empty() || named.iter().copied().eq(0..n as u32) {
                Ok(())
            } else {
                Err(format!("kernel `{}`: the source names {what} {named:?} but the IR has {n}", self.name))
            }
        };
        named("accesses", naccesses, |s| match *s {
            Specialization::InBounds(a) => Some(a),
            _ => None,
        })?;
        named("masks", nmasks, |s| match *s {
            Specialization::AllTrue(m) => Some(m),
            _ => None,
        })?;
        // The source's signature has one `fuse_host<i>` per host scalar: a launch passes them all.
        // (A spec without a source runs on the CPU only.)
        let host_scalars = kernel.host_scalars();
        let declared = (0..).take_while(|i| self.source.contains(&format!(" fuse_host{i},"))).count();
        if !self.source.is_empty() && declared != host_scalars.len() {
            return Err(format!(
                "kernel `{}`: the source takes {declared} host-computed scalars but the IR has {}",
                self.name,
                host_scalars.len()
            ));
        }
        let mut narrow_index: Vec<Option<DType>> = vec![None; nparams];
        let mut bad: Option<String> = None;
        kernel.visit_stmts(&mut |s| {
            let mut access = |param: u32, offset: fuse_ir::VarId| {
                let (Some(slot), Some(var)) =
                    (narrow_index.get_mut(param as usize), kernel.vars.get(offset.0 as usize))
                else {
                    bad.get_or_insert_with(|| {
                        format!("access to parameter {param} / var {} out of range", offset.0)
                    });
                    return;
                };
                if matches!(var.ty.dtype, DType::I32 | DType::U32) {
                    // i32 is the narrower of the two limits.
                    *slot = match (*slot, var.ty.dtype) {
                        (Some(DType::I32), _) | (_, DType::I32) => Some(DType::I32),
                        _ => Some(DType::U32),
                    };
                }
            };
            match s {
                Stmt::Store { param, offset, .. } => access(*param, *offset),
                Stmt::Assign { expr: Expr::Load { param, offset, .. }, .. } => access(*param, *offset),
                _ => {}
            }
        });
        if let Some(b) = bad {
            return Err(format!("kernel `{}`: {b} (vars: {nvars}, params: {nparams})", self.name));
        }
        let tile_lens = kernel.tile_lens();
        let shape = WarpShape::of(&kernel);
        let bounds = BoundsPlan::new(&kernel);
        let accesses = kernel.accesses();
        let defs = kernel.host_defs();
        let tensor_boxes = self
            .specializations
            .iter()
            .filter_map(|s| match *s {
                Specialization::TensorBox(a) => {
                    let b = kernel.tensor_box(&accesses[a as usize])?;
                    let host = |v| defs.program(v);
                    // An absent bound needs no program; a present one must have one.
                    let bound = |v: Option<fuse_ir::VarId>| v.map_or(Some(None), |v| host(v).map(Some));
                    let programs = (|| {
                        Some(BoxPrograms {
                            offset: accesses[a as usize].offset,
                            stride: host(b.stride)?,
                            row_end: bound(b.row_end)?,
                            col_end: bound(b.col_end)?,
                            base_pitch: b.base_pitch.iter().map(|&v| host(v)).collect::<Option<_>>()?,
                        })
                    })();
                    Some((a, b, programs))
                }
                _ => None,
            })
            .collect();
        Ok(KernelInfo {
            kernel,
            narrow_index,
            tile_lens,
            shape,
            bounds,
            branches,
            host_scalars,
            tensor_boxes,
            last_proof: LastLaunch::new(),
            last_tensor_maps: LastLaunch::new(),
        })
    }

    /// The source NVRTC compiles: `#define <CONST> <value>` per const generic,
    /// `#define FUSE_NUM_WARPS <n>`, `#define FUSE_NUM_STAGES <DEFAULT_NUM_STAGES>`, one
    /// `#define FUSE_ALIGN16_<p>`/`FUSE_DIV16_<p>` per specialization (`spec_values[i]` for the
    /// i-th, missing values are 0), then the source. If the IR cannot be read the result holds an
    /// `#error` line saying so (NVRTC reports it). [`KernelSpec::full_source_staged`] sets the
    /// stages.
    ///
    /// [`DEFAULT_NUM_STAGES`]: crate::DEFAULT_NUM_STAGES
    pub fn full_source(&self, consts: &[u64], num_warps: u32, spec_values: &[bool]) -> String {
        self.full_source_staged(consts, num_warps, crate::DEFAULT_NUM_STAGES, spec_values)
    }

    /// [`KernelSpec::full_source`] with `#define FUSE_NUM_STAGES <num_stages>`.
    pub fn full_source_staged(
        &self,
        consts: &[u64],
        num_warps: u32,
        num_stages: u32,
        spec_values: &[bool],
    ) -> String {
        match self.kernel() {
            Ok(k) => full_source_for(
                k,
                self.source,
                self.specializations,
                consts,
                (num_warps, num_stages),
                spec_values,
            ),
            Err(e) => {
                format!("#error \"fuse: {}\"\n{}", e.to_string().replace(['"', '\n'], "'"), self.source)
            }
        }
    }

    /// Compiles the variant with every specialization = 1 (aligned pointers, divisible ints: what
    /// buffers from this runtime and multiple-of-16 sizes give) to a cubin for `arch` ("sm_90"),
    /// with NVRTC only: no GPU or driver needed (AOT, cache warming, CI). Uses and fills the
    /// in-process and on-disk caches.
    ///
    /// `consts` are the const generic values in declaration order; `num_warps` a power of two in
    /// `1..=32` (see [`default_num_warps`]); the pipeline stages are the default
    /// ([`KernelSpec::compile_for_arch_staged`] takes them).
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_with`].
    pub fn compile_for_arch(&self, arch: &str, consts: &[u64], num_warps: u32) -> Result<Vec<u8>> {
        let all = vec![true; self.specializations.len()];
        self.compile_for_arch_with(arch, consts, num_warps, &all)
    }

    /// [`KernelSpec::compile_for_arch`] for given specialization values (one per entry of
    /// [`KernelSpec::specializations`]). Uses and fills the in-process and on-disk caches.
    ///
    /// # Errors
    /// * [`Error::InvalidArgument`] if `arch` is not of the form `sm_90` (`sm_`, 2 or 3 digits, an
    ///   optional `a` or `f`), or `spec_values` has the wrong length;
    /// * [`Error::InvalidKernel`] as for [`KernelSpec::kernel`];
    /// * [`Error::InvalidLaunch`] if `consts` does not fit the kernel (count, powers of two, tile
    ///   lengths of at most [`MAX_TILE_LEN`](crate::MAX_TILE_LEN)) or `num_warps` is not a power
    ///   of two in `1..=32`;
    /// * [`Error::LibraryNotFound`] if NVRTC cannot be loaded;
    /// * [`Error::Compile`] if NVRTC rejects the source (with its log), and [`Error::Cuda`] if
    ///   another NVRTC call fails or gives no cubin (an `arch` NVRTC does not know, say).
    pub fn compile_for_arch_with(
        &self,
        arch: &str,
        consts: &[u64],
        num_warps: u32,
        spec_values: &[bool],
    ) -> Result<Vec<u8>> {
        self.compile_for_arch_staged(arch, consts, num_warps, crate::DEFAULT_NUM_STAGES, spec_values)
    }

    /// [`KernelSpec::compile_for_arch_with`] for `num_stages` pipeline stages (1..=8; the
    /// methods without it use [`DEFAULT_NUM_STAGES`](crate::DEFAULT_NUM_STAGES)).
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_with`], and [`Error::InvalidLaunch`] if `num_stages`
    /// is outside `1..=8`.
    pub fn compile_for_arch_staged(
        &self,
        arch: &str,
        consts: &[u64],
        num_warps: u32,
        num_stages: u32,
        spec_values: &[bool],
    ) -> Result<Vec<u8>> {
        let source = self.checked_source(arch, consts, num_warps, num_stages, spec_values)?;
        crate::cuda::cubin(self.name, &source, arch).map(|c| c.to_vec())
    }

    /// The source of one variant, after checking every argument that picks it.
    fn checked_source(
        &self,
        arch: &str,
        consts: &[u64],
        num_warps: u32,
        num_stages: u32,
        spec_values: &[bool],
    ) -> Result<String> {
        crate::cuda::nvrtc::validate_arch(arch)?;
        let info = self.info()?;
        crate::launch::validate_consts(&info.kernel, consts)?;
        crate::launch::validate_num_warps(num_warps)?;
        crate::launch::validate_num_stages(num_stages)?;
        if spec_values.len() != self.specializations.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}` has {} specializations but {} values were given",
                self.name,
                self.specializations.len(),
                spec_values.len()
            )));
        }
        Ok(self.full_source_staged(consts, num_warps, num_stages, spec_values))
    }

    /// What ptxas reports for the variant [`KernelSpec::compile_for_arch_staged`] compiles:
    /// registers, spills, stack, and whether it serialised the wgmma instructions. Compiles afresh
    /// with `--ptxas-options=-v` (no caches; NVRTC only, no GPU needed), for tests and reports
    /// such as "no spills in this kernel".
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_staged`].
    pub fn ptxas_report(
        &self,
        arch: &str,
        consts: &[u64],
        num_warps: u32,
        num_stages: u32,
        spec_values: &[bool],
    ) -> Result<crate::PtxasReport> {
        let source = self.checked_source(arch, consts, num_warps, num_stages, spec_values)?;
        let (_, log) = crate::cuda::nvrtc::compile_capped(self.name, &source, arch, &["--ptxas-options=-v"])?;
        Ok(crate::PtxasReport::parse(&log))
    }

    /// Compiles (or fetches from the caches) and loads this kernel on `device` without launching,
    /// for every combination of specialization values, so that later launches with these consts and
    /// `num_warps` (default: [`default_num_warps`]) start at once. The first six specializations
    /// take both values and any further ones only 1 (at most 64 variants). A GPU launch without
    /// `num_warps` on a grid too small to fill the GPU may pick more warps than [`default_num_warps`]
    /// (see [`LaunchConfig`](crate::LaunchConfig)), a variant that this call with `None` does not
    /// compile. Compiles for the default pipeline stages ([`KernelSpec::compile_staged`] takes
    /// them). On the CPU only the arguments are checked.
    ///
    /// # Errors
    /// * [`Error::InvalidKernel`] as for [`KernelSpec::kernel`];
    /// * [`Error::InvalidLaunch`] if `consts` or `num_warps` does not fit, as for
    ///   [`KernelSpec::compile_for_arch_with`];
    /// * on a GPU, [`Error::LibraryNotFound`], [`Error::Compile`] or [`Error::Cuda`] if compiling
    ///   fails, [`Error::Cuda`] if the driver refuses to load the cubin, and
    ///   [`Error::InvalidLaunch`] if the kernel asks for more shared memory than the GPU gives a
    ///   block (docs/DESIGN.md, "Runtime conventions").
    pub fn compile(&self, device: &crate::Device, consts: &[u64], num_warps: Option<u32>) -> Result<()> {
        self.compile_staged(device, consts, num_warps, None)
    }

    /// [`KernelSpec::compile`] for `num_stages` pipeline stages (`None`:
    /// [`DEFAULT_NUM_STAGES`](crate::DEFAULT_NUM_STAGES), what a launch without
    /// [`LaunchConfig::num_stages`](crate::LaunchConfig::num_stages) uses).
    ///
    /// # Errors
    /// As [`KernelSpec::compile`], and [`Error::InvalidLaunch`] if `num_stages` is outside
    /// `1..=8`.
    pub fn compile_staged(
        &self,
        device: &crate::Device,
        consts: &[u64],
        num_warps: Option<u32>,
        num_stages: Option<u32>,
    ) -> Result<()> {
        let info = self.info()?;
        crate::launch::validate_consts(&info.kernel, consts)?;
        let num_warps = num_warps.unwrap_or_else(|| info.default_num_warps(consts));
        crate::launch::validate_num_warps(num_warps)?;
        let num_stages = num_stages.unwrap_or(crate::DEFAULT_NUM_STAGES);
        crate::launch::validate_num_stages(num_stages)?;
        let Some(cuda) = device.cuda_inner() else { return Ok(()) };
        let n = self.specializations.len().min(6); // 64 variants at most; the rest stay 1
        for bits in 0u32..(1 << n) {
            let values: Vec<bool> =
                (0..self.specializations.len()).map(|i| i >= n || bits & (1 << i) != 0).collect();
            let source = self.full_source_staged(consts, num_warps, num_stages, &values);
            let loaded = cuda.load_source(self.name, &info.kernel, &source)?;
            if let Err(t) = loaded.smem {
                let config = crate::launch::describe_config(&info.kernel, consts, num_warps, num_stages);
                return Err(t.error(self.name, &config, &cuda.description()));
            }
        }
        Ok(())
    }
}

/// The `#define`s and source for a kernel (see [`KernelSpec::full_source`]).
pub(crate) fn full_source_for(
    k: &Kernel,
    source: &str,
    specs: &[Specialization],
    consts: &[u64],
    (num_warps, num_stages): (u32, u32),
    spec_values: &[bool],
) -> String {
    let mut s = String::with_capacity(source.len() + 96 + 32 * (consts.len() + specs.len()));
    for (i, name) in k.consts.iter().enumerate() {
        let _ = writeln!(s, "#define {name} {}", consts.get(i).copied().unwrap_or(0));
    }
    let _ = writeln!(s, "#define FUSE_NUM_WARPS {num_warps}");
    let _ = writeln!(s, "#define FUSE_NUM_STAGES {num_stages}");
    for (i, sp) in specs.iter().enumerate() {
        let named = match *sp {
            Specialization::Align16(p) | Specialization::Div16(p) => (p as usize) < k.params.len(),
            Specialization::InBounds(_)
            | Specialization::AllTrue(_)
            | Specialization::BranchTaken(_)
            | Specialization::BranchSkipped(_)
            | Specialization::TensorBox(_) => true,
        };
        if named {
            let _ = writeln!(
                s,
                "#define {} {}",
                sp.macro_name(&k.params),
                u8::from(spec_values.get(i).copied().unwrap_or(false))
            );
        }
    }
    s.push_str(source);
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// The default warps per program, from the largest tile length `L` (a power of two) and the
/// kernel's shape (reductions, loads, element sizes, math), as elements per thread
/// (`L / (32 * warps)`). Tuned on an H200 (2026-11-22) by sweeping the warps over the anchor
/// shapes; the sweeps are kept in `docs/runs/sweep-h200-s3/`, `sweep-h200-s4/` and
/// `sweep-h200-s5/`:
/// * element-wise kernels: 8 elements per thread (`clamp(L / 256, 1, 16)`), 16 where the kernel
///   does math (`erf`, `exp`, `rand`, ...) and 32 where it does math on 1- or 2-byte loads: more
///   independent lanes per thread to hide the long dependent chains, and per-thread setup (a
///   division, say) spread over more of them (bias+GELU+dropout, `sweep-h200-s4/run2-*`);
/// * a reduction over one streamed tile (softmax-like): 2-byte elements 16 per thread
///   (`clamp(L / 512, 1, 16)`); 4-byte ones 4 warps up to `L = 4096`, 16 above (Triton's rule,
///   but 4 warps also at 4096);
/// * a reduction with several tile loads (layernorm-like: x, w, b), whose tiles stay live across
///   the reductions: 2-byte elements 32 per thread (`clamp(L / 1024, 1, 16)`: f16 LayerNorm 8192
///   and 768 wide, `sweep-h200-s4/run5-row_w*`) but at least 8 warps from `L = 4096` (f16
///   LayerNorm 4096x4096 timed alone in the fifth session, code 615b9d0: 8 warps 3005–3031 GB/s,
///   4 warps 2926–2971 over three calls); 4-byte ones `clamp(L / 256, 1, 8)` up to 2048 wide
///   (Triton's rule) and 16 warps from 4096.
///
/// A kernel that reduces a 2-D tile along an axis (`x.sum(1)`, `x.max(0)`, `argmax(x, 1)`)
/// holds all the rows of its largest tile at once and takes 16 elements per thread
/// (`clamp(L / 512, 1, 16)`), whatever its loads and element size: the rows stay live in
/// registers across the reductions together with their per-row results and column-broadcast
/// operands, and a row reduction costs the same shuffles however many warps hold the rows (a
/// row spans `C / VEC` threads either way). 32 elements per thread put qk_norm_rope's `[8, 128]`
/// f16 tile on one warp at 255 registers a thread (twice as slow as on 4 warps, docs/PERF.md,
/// issue 14; its launcher now takes 2); 8 (the rule until session 14) was 1–5 % slower than 16 on
/// every narrow-row softmax and LayerNorm anchor of an H100 sweep (`[ROWS, BLOCK]` tiles of 2048
/// lanes, 8 against 4 warps, `docs/runs/2026-11-27-h100-session14/call6/sweep_t2048_w*`).
///
/// Never more warps than `L / 32`.
pub fn default_num_warps(kernel: &Kernel, consts: &[u64]) -> u32 {
    num_warps_for(kernel.tile_lens().iter().filter_map(|l| l.eval(consts)).max(), WarpShape::of(kernel))
}

/// The features of a kernel that its default `num_warps` depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WarpShape {
    /// Some tile is reduced (to a scalar or along an axis).
    reduces: bool,
    /// Some 2-D tile is reduced along an axis.
    axis_reduces: bool,
    tile_loads: usize,
    /// Some tile load has 1- or 2-byte elements.
    narrow: bool,
    /// Math functions or `rand` on tiles.
    math: bool,
}

impl WarpShape {
    fn of(kernel: &Kernel) -> WarpShape {
        let mut shape =
            WarpShape { reduces: false, axis_reduces: false, tile_loads: 0, narrow: false, math: false };
        kernel.visit_stmts(&mut |s| match s {
            Stmt::Assign { expr: Expr::Reduce(..) | Expr::ArgReduce { axis: None, .. }, .. } => {
                shape.reduces = true
            }
            Stmt::Assign {
                expr: Expr::ReduceAxis { .. } | Expr::ArgReduce { axis: Some(_), .. }, ..
            } => {
                shape.reduces = true;
                shape.axis_reduces = true;
            }
            Stmt::Assign { dst, expr: Expr::Load { .. } } if !kernel.ty(*dst).shape.is_scalar() => {
                shape.tile_loads += 1;
                shape.narrow |= kernel.ty(*dst).dtype.size_bytes() <= 2;
            }
            Stmt::Assign { dst, expr: Expr::Rand { .. } } if !kernel.ty(*dst).shape.is_scalar() => {
                shape.math = true
            }
            Stmt::Assign { dst, expr: Expr::Unary(op, _) }
                if !kernel.ty(*dst).shape.is_scalar() && UnaryOp::MATH.contains(op) =>
            {
                shape.math = true
            }
            _ => {}
        });
        shape
    }
}

/// The elements of its largest tile a thread of an axis-reducing kernel holds by default.
const AXIS_REDUCE_ELEMS: u64 = 16;

fn num_warps_for(largest_tile: Option<u64>, shape: WarpShape) -> u32 {
    let l = largest_tile.unwrap_or(1);
    let w = match shape {
        WarpShape { axis_reduces: true, .. } => (l / (32 * AXIS_REDUCE_ELEMS)).clamp(1, 16),
        WarpShape { reduces: false, math: false, .. } => (l / 256).clamp(1, 16),
        WarpShape { reduces: false, math: true, narrow: true, .. } => (l / 1024).clamp(1, 16),
        WarpShape { reduces: false, math: true, .. } => (l / 512).clamp(1, 16),
        WarpShape { tile_loads: 0..=1, narrow: true, .. } => (l / 512).clamp(1, 16),
        WarpShape { tile_loads: 0..=1, narrow: false, .. } if l <= 4096 => 4,
        WarpShape { tile_loads: 0..=1, narrow: false, .. } => 16,
        WarpShape { narrow: true, .. } if l >= 4096 => (l / 1024).clamp(8, 16),
        WarpShape { narrow: true, .. } => (l / 1024).clamp(1, 16),
        _ if l >= 4096 => 16,
        _ => (l / 256).clamp(1, 8),
    };
    w.min((l / 32).max(1)) as u32
}

#[cfg(test)]
mod tests {
    use super::{num_warps_for, WarpShape};

    const fn shape(reduces: bool, tile_loads: usize, narrow: bool, math: bool) -> WarpShape {
        WarpShape { reduces, axis_reduces: false, tile_loads, narrow, math }
    }
    const fn rows(s: WarpShape) -> WarpShape {
        WarpShape { reduces: true, axis_reduces: true, ..s }
    }
    const ELEMENTWISE: WarpShape = shape(false, 3, false, false);
    const DROPOUT: WarpShape = shape(false, 2, true, true);
    const DROPOUT_F32: WarpShape = shape(false, 2, false, true);
    const SOFTMAX: WarpShape = shape(true, 1, false, true);
    const SOFTMAX_F16: WarpShape = shape(true, 1, true, true);
    const LAYERNORM: WarpShape = shape(true, 3, false, false);
    const LAYERNORM_F16: WarpShape = shape(true, 3, true, false);
    // The same with axis reductions of 2-D tiles; QK_NORM_ROPE's loads: x, its partner, the two
    // weights, cos and sin.
    const SOFTMAX_ROWS: WarpShape = rows(SOFTMAX);
    const SOFTMAX_ROWS_F16: WarpShape = rows(SOFTMAX_F16);
    const LAYERNORM_ROWS_F16: WarpShape = rows(LAYERNORM_F16);
    const QK_NORM_ROPE_F16: WarpShape = rows(shape(true, 6, true, true));

    #[test]
    fn num_warps_elementwise() {
        assert_eq!(num_warps_for(None, ELEMENTWISE), 1);
        assert_eq!(num_warps_for(Some(64), ELEMENTWISE), 1);
        assert_eq!(num_warps_for(Some(1024), ELEMENTWISE), 4);
        assert_eq!(num_warps_for(Some(1024), DROPOUT), 1);
        assert_eq!(num_warps_for(Some(1024), DROPOUT_F32), 2);
        assert_eq!(num_warps_for(Some(4096), ELEMENTWISE), 16);
        assert_eq!(num_warps_for(Some(1 << 20), ELEMENTWISE), 16);
    }

    #[test]
    fn num_warps_one_stream_reduction() {
        for (l, w, w16) in [
            (32, 1, 1),
            (64, 2, 1),
            (512, 4, 1),
            (1024, 4, 2),
            (2048, 4, 4),
            (4096, 4, 8),
            (8192, 16, 16),
            (16384, 16, 16),
        ] {
            assert_eq!(num_warps_for(Some(l), SOFTMAX), w, "L = {l}");
            assert_eq!(num_warps_for(Some(l), SOFTMAX_F16), w16, "f16 L = {l}");
        }
    }

    #[test]
    fn num_warps_several_streams() {
        for (l, w, w16) in
            [(256, 1, 1), (1024, 4, 1), (2048, 8, 2), (4096, 16, 8), (8192, 16, 8), (65536, 16, 16)]
        {
            assert_eq!(num_warps_for(Some(l), LAYERNORM), w, "L = {l}");
            assert_eq!(num_warps_for(Some(l), LAYERNORM_F16), w16, "f16 L = {l}");
        }
    }

    #[test]
    fn axis_reductions_take_16_elements_per_thread() {
        // qk_norm_rope's [8, 128] f16 tile: 2 warps (32 elements a thread gave 1: 255 registers).
        assert_eq!(num_warps_for(Some(1024), QK_NORM_ROPE_F16), 2);
        assert_eq!(num_warps_for(Some(1024), rows(LAYERNORM_F16)), 2);
        // The rows kernels' [ROWS, BLOCK] tiles of 2048 lanes: 4 warps, f32 LayerNorm's 1-D rule
        // (8) included.
        for shape in [SOFTMAX_ROWS, SOFTMAX_ROWS_F16, LAYERNORM_ROWS_F16, rows(LAYERNORM)] {
            assert_eq!(num_warps_for(Some(2048), shape), 4, "{shape:?}");
        }
        // At most 16 warps, never more than L / 32, at least 1.
        assert_eq!(num_warps_for(Some(8192), SOFTMAX_ROWS), 16);
        assert_eq!(num_warps_for(Some(1 << 16), LAYERNORM_ROWS_F16), 16);
        assert_eq!(num_warps_for(Some(512), QK_NORM_ROPE_F16), 1);
        assert_eq!(num_warps_for(Some(16), SOFTMAX_ROWS), 1);
        for l in (0..20).map(|i| 1u64 << i) {
            for s in [SOFTMAX, SOFTMAX_F16, LAYERNORM, LAYERNORM_F16] {
                let two_d = u64::from(num_warps_for(Some(l), rows(s)));
                assert_eq!(two_d, (l / 512).clamp(1, 16), "L = {l} {s:?}");
            }
        }
    }

    #[test]
    fn small_grids_get_more_warps_while_threads_keep_their_minimum() {
        use super::fill_gpu;
        assert_eq!(fill_gpu(1, 1024, 8, 4096, 132), 4, "f16 LayerNorm 4096x1024 on 132 SMs");
        assert_eq!(fill_gpu(1, 1024, 8, 32768, 132), 1, "32768 rows fill the GPU at 1 warp");
        assert_eq!(fill_gpu(1, 512, 8, 1024, 132), 2, "8 elements per thread at least");
        assert_eq!(fill_gpu(4, 1024, 8, 1024, 132), 4, "already 8 per thread");
        assert_eq!(fill_gpu(8, 1 << 20, 8, 1, 132), 16, "at most 16");
        // Axis reductions keep 16 a thread: [8, 256] tiles over 16384 rows stay on 4 warps.
        assert_eq!(fill_gpu(4, 2048, 16, 2048, 132), 4, "16384x256 LayerNorm rows");
        assert_eq!(fill_gpu(4, 2048, 8, 2048, 132), 8, "the 1-D minimum would double it");
        assert_eq!(fill_gpu(1, 2048, 16, 16, 132), 4, "a tiny grid: down to 16 a thread");
    }

    #[test]
    fn num_warps_is_always_a_power_of_two_in_range() {
        for l in (0..20).map(|i| 1u64 << i) {
            for shape in [
                ELEMENTWISE,
                DROPOUT,
                SOFTMAX,
                SOFTMAX_F16,
                LAYERNORM,
                LAYERNORM_F16,
                SOFTMAX_ROWS,
                QK_NORM_ROPE_F16,
            ] {
                let w = num_warps_for(Some(l), shape);
                assert!(
                    w.is_power_of_two() && (1..=32).contains(&w) && u64::from(w) * 32 <= l.max(32),
                    "{l} {shape:?}"
                );
            }
        }
    }
}
