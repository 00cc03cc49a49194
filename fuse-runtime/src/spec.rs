//! [`KernelSpec`]: what `#[fused_kernel]` generates for each kernel (name, CUDA source, IR, the
//! launch-time specializations its source reads); what the runtime derives from it once
//! ([`KernelInfo`]: the checked IR, the bounds plan, the host programs); and the source NVRTC
//! compiles for one variant (the `#define`s, then the emitted source).
//!
//! Layer: above the pure analyses; imports `bounds`, `cost`, `config`, `warps`, `launch_memo`
//! and `error`. Compiling a spec (`aot.rs`) and launching it (`launch.rs`) sit above the back ends.

use crate::bounds::{BoundsPlan, Proof};
use crate::config::Grid;
use crate::cost::{Cost, CostArg};
use crate::error::{Error, Result};
use crate::launch_memo::LastLaunch;
use crate::warps::{num_warps_for, num_warps_for_grid, WarpShape};
use fuse_ir::{DType, Expr, Kernel, Len, ParamKind, Specialization, Stmt};
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

/// Per [`Specialization::TensorBox`] of a kernel, its tensor map (zeros where unused), and the
/// accesses whose map a launch encoded (`tensor_maps.rs` makes them).
pub(crate) type TensorMaps = (Vec<cudarc::driver::sys::CUtensorMap>, Vec<u32>);

/// What the runtime derives from the IR once.
pub(crate) struct KernelInfo {
    pub(crate) kernel: Kernel,
    /// Per parameter: for pointers, the narrowest index dtype used to address it (`I32`/`U32`)
    /// if any load/store on it uses a 32-bit offset.
    pub(crate) narrow_index: Vec<Option<DType>>,
    /// `kernel.tile_lens()`, computed once.
    pub(crate) tile_lens: Vec<Len>,
    /// What picks the [`default_num_warps`](crate::default_num_warps) rule.
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
    /// [`default_num_warps`](crate::default_num_warps) without allocating.
    pub(crate) fn default_num_warps(&self, consts: &[u64]) -> u32 {
        num_warps_for(self.largest_tile(consts), self.shape)
    }

    fn largest_tile(&self, consts: &[u64]) -> Option<u64> {
        self.tile_lens.iter().filter_map(|l| l.eval(consts)).max()
    }

    /// The default for a launch of `programs` programs on a GPU with `sms` multiprocessors
    /// ([`num_warps_for_grid`]).
    pub(crate) fn default_num_warps_for_grid(&self, consts: &[u64], programs: u64, sms: u32) -> u32 {
        num_warps_for_grid(self.largest_tile(consts), self.shape, programs, sms)
    }
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
    pub fn cost(&self, consts: &[u64], grid: impl Into<Grid>, args: &[CostArg]) -> Result<Cost> {
        let info = self.info()?;
        crate::cost::cost(&info.kernel, &info.bounds, consts, grid.into(), args)
    }

    pub(crate) fn info(&self) -> Result<&KernelInfo> {
        match self.info.get_or_init(|| self.build_info()) {
            Ok(info) => Ok(info),
            Err(e) => Err(Error::InvalidKernel(e.clone())),
        }
    }

    /// Parses and checks the IR against the spec and derives what launches need (see
    /// [`KernelSpec::kernel`] for what is checked); the error is the message of an
    /// [`Error::InvalidKernel`].
    fn build_info(&self) -> std::result::Result<KernelInfo, String> {
        let kernel = Kernel::from_json(self.ir_json)
            .map_err(|e| format!("the IR of kernel `{}` is not valid fuse IR JSON: {e}", self.name))?;
        if kernel.name != self.name {
            return Err(format!("the IR names kernel `{}` but the spec is `{}`", kernel.name, self.name));
        }
        let branches = kernel.uniform_branches();
        self.check_specializations(&kernel, branches.len())?;
        let host_scalars = kernel.host_scalars();
        self.check_host_parameters(host_scalars.len())?;
        let narrow_index = narrow_index(&kernel).map_err(|b| {
            let (vars, params) = (kernel.vars.len(), kernel.params.len());
            format!("kernel `{}`: {b} (vars: {vars}, params: {params})", self.name)
        })?;
        let tile_lens = kernel.tile_lens();
        let shape = WarpShape::of(&kernel);
        let bounds = BoundsPlan::new(&kernel);
        let tensor_boxes = self.tensor_boxes(&kernel);
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

    /// Every specialization names a parameter, access, mask or branch of the kernel that fits it
    /// (`branches`: how many uniform branches it has), and the accesses and masks the source
    /// names are all of the kernel's, in order.
    fn check_specializations(&self, kernel: &Kernel, branches: usize) -> std::result::Result<(), String> {
        let naccesses = kernel.accesses().len();
        let nmasks = kernel.masks().len();
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
                Specialization::BranchTaken(b) | Specialization::BranchSkipped(b) => (b as usize) < branches,
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
        })
    }

    /// The source's signature has one `fuse_host<i>` per host scalar (`host_scalars` of them): a
    /// launch passes them all. A spec without a source runs on the CPU only.
    fn check_host_parameters(&self, host_scalars: usize) -> std::result::Result<(), String> {
        let declared = (0..).take_while(|i| self.source.contains(&format!(" fuse_host{i},"))).count();
        if !self.source.is_empty() && declared != host_scalars {
            return Err(format!(
                "kernel `{}`: the source takes {declared} host-computed scalars but the IR has {host_scalars}",
                self.name
            ));
        }
        Ok(())
    }

    /// Per [`Specialization::TensorBox`] of the spec, in order: the access, its box and the host
    /// programs of its scalars ([`KernelInfo::tensor_boxes`]).
    fn tensor_boxes(&self, kernel: &Kernel) -> Vec<(u32, fuse_ir::TensorBox, Option<BoxPrograms>)> {
        let accesses = kernel.accesses();
        let defs = kernel.host_defs();
        self.specializations
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
            .collect()
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
}

/// Per parameter of `kernel`: for pointers, the narrowest index dtype (`I32`, else `U32`) of the
/// 32-bit offsets its loads and stores use, if any; an error for an access naming a parameter or
/// var that is not there.
fn narrow_index(kernel: &Kernel) -> std::result::Result<Vec<Option<DType>>, String> {
    let mut narrow_index: Vec<Option<DType>> = vec![None; kernel.params.len()];
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
    match bad {
        Some(b) => Err(b),
        None => Ok(narrow_index),
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
