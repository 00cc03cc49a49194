//! [`launch`]: validation, then the CPU interpreter or a CUDA launch.

use crate::bounds::{LaunchFacts, Proof};
use crate::cuda::{CudaDevice, HotKey};
use crate::device::{Buffer, Device};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::launch_memo::LaunchKey;
use crate::memory::{CudarcHome, CudarcMemory, CudarcMemoryMut};
use crate::spec::{full_source_for, KernelInfo, KernelSpec};
use cudarc::driver::{CudaSlice, SyncOnDrop};
use fuse_ir::{DType, Kernel, Len, ParamKind, Specialization};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// The grid: how many programs along x, y, z (each at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Programs along x (`program_id(0)`).
    pub x: u32,
    /// Programs along y (`program_id(1)`).
    pub y: u32,
    /// Programs along z (`program_id(2)`).
    pub z: u32,
}

impl Grid {
    /// A grid of `x * y * z` programs.
    pub const fn new(x: u32, y: u32, z: u32) -> Grid {
        Grid { x, y, z }
    }

    /// Programs in total.
    pub fn count(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

impl From<u32> for Grid {
    fn from(x: u32) -> Grid {
        Grid { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Grid {
    fn from((x, y): (u32, u32)) -> Grid {
        Grid { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Grid {
    fn from((x, y, z): (u32, u32, u32)) -> Grid {
        Grid { x, y, z }
    }
}

/// A 1-D grid from a `usize` count, refusing (never truncating) counts above `u32::MAX`.
impl TryFrom<usize> for Grid {
    type Error = Error;
    fn try_from(x: usize) -> Result<Grid> {
        u32::try_from(x).map(Grid::from).map_err(|_| {
            Error::InvalidLaunch(format!("a grid dimension must fit in u32 (at most {}), got {x}", u32::MAX))
        })
    }
}

/// A grid and, optionally, warps per program (default: [`crate::default_num_warps`], more for
/// grids too small to fill the GPU) and pipeline stages (default: [`DEFAULT_NUM_STAGES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// The programs to run.
    pub grid: Grid,
    /// Warps per program; `None` lets the runtime choose ([`crate::default_num_warps`]).
    pub num_warps: Option<u32>,
    /// Software-pipeline stages of the kernel's tensor-core loops; `None` is
    /// [`DEFAULT_NUM_STAGES`]. See [`LaunchConfig::num_stages`].
    pub num_stages: Option<u32>,
}

/// The pipeline stages of a launch that does not set [`LaunchConfig::num_stages`] (Triton's
/// default too).
pub const DEFAULT_NUM_STAGES: u32 = 3;

/// The most pipeline stages a launch may ask for.
pub const MAX_NUM_STAGES: u32 = 8;

impl LaunchConfig {
    /// `grid` with the default warps per program and pipeline stages.
    pub fn new(grid: impl Into<Grid>) -> LaunchConfig {
        LaunchConfig { grid: grid.into(), num_warps: None, num_stages: None }
    }

    /// Warps (of 32 threads) per program: a power of two in 1..=32.
    pub fn num_warps(mut self, n: u32) -> LaunchConfig {
        self.num_warps = Some(n);
        self
    }

    /// Software-pipeline stages (1..=[`MAX_NUM_STAGES`]; default [`DEFAULT_NUM_STAGES`]): how
    /// many tiles of a pipelined loop are in flight at once, each in its own shared-memory
    /// buffer. The kernel sees it as `FUSE_NUM_STAGES`; kernels without pipelined loops ignore
    /// it, but each value is still its own compiled variant (it is part of every cache key).
    pub fn num_stages(mut self, n: u32) -> LaunchConfig {
        self.num_stages = Some(n);
        self
    }

    /// The stages this config launches with: [`LaunchConfig::num_stages`] or the default.
    pub fn stages(&self) -> u32 {
        self.num_stages.unwrap_or(DEFAULT_NUM_STAGES)
    }
}

impl<G: Into<Grid>> From<G> for LaunchConfig {
    fn from(grid: G) -> LaunchConfig {
        LaunchConfig::new(grid)
    }
}

/// Whose memory a buffer argument is: decides which devices may launch on it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Home<'a> {
    /// A fuse [`Buffer`] (or a view of one) on this device.
    Fuse(&'a Device),
    /// A Rust slice in host memory: only the CPU device runs on it.
    Host,
    /// cudarc memory of this context.
    Cudarc(CudarcHome),
}

/// Keeps a fuse buffer's device allocation alive for as long as a captured graph may use it.
pub(crate) trait KeepAlive {
    fn retain(&self) -> Arc<dyn Any + Send + Sync>;
}

impl<T: 'static> KeepAlive for Arc<CudaSlice<T>> {
    fn retain(&self) -> Arc<dyn Any + Send + Sync> {
        self.clone()
    }
}

/// Where a type-erased buffer's data is.
pub(crate) enum Data<'a> {
    Host(&'a [u8]),
    /// A device address; `keep` is the fuse allocation behind it (`None` for cudarc memory once
    /// its pointer was taken at launch).
    Cuda {
        ptr: u64,
        keep: Option<&'a dyn KeepAlive>,
    },
    /// cudarc memory whose pointer is taken on the launching stream at launch.
    Cudarc(&'a dyn CudarcMemory),
}

pub(crate) enum DataMut<'a> {
    Host(&'a mut [u8]),
    Cuda { ptr: u64, keep: Option<&'a dyn KeepAlive>, _exclusive: PhantomData<&'a mut [u8]> },
    Cudarc(&'a mut dyn CudarcMemoryMut),
}

/// A read-only buffer argument, type-erased (dtype and length remembered).
pub struct BufferArg<'a> {
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) home: Home<'a>,
    pub(crate) data: Data<'a>,
}

/// A writable buffer argument, type-erased.
pub struct BufferArgMut<'a> {
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) home: Home<'a>,
    pub(crate) data: DataMut<'a>,
}

impl BufferArg<'_> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Elements the kernel may access (a view's length, not its allocation's).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl BufferArgMut<'_> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Elements the kernel may access (a view's length, not its allocation's).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One launch argument, in the order of the kernel's parameters.
pub enum KernelArg<'a> {
    /// For a `*const T` parameter (a `BufferMut` is accepted there too).
    Buffer(BufferArg<'a>),
    /// For a `*mut T` parameter.
    BufferMut(BufferArgMut<'a>),
    /// For an `i32` parameter.
    I32(i32),
    /// For an `i64` parameter.
    I64(i64),
    /// For a `u32` parameter.
    U32(u32),
    /// For a `u64` parameter.
    U64(u64),
    /// For an `f32` parameter.
    F32(f32),
}

impl KernelArg<'_> {
    /// What this argument is, as the error messages say it (`&Buffer<f32>`, `i32`).
    pub fn describe(&self) -> String {
        match self {
            KernelArg::Buffer(b) => format!("&Buffer<{}>", b.dtype),
            KernelArg::BufferMut(b) => format!("&mut Buffer<{}>", b.dtype),
            KernelArg::I32(_) => "i32".into(),
            KernelArg::I64(_) => "i64".into(),
            KernelArg::U32(_) => "u32".into(),
            KernelArg::U64(_) => "u64".into(),
            KernelArg::F32(_) => "f32".into(),
        }
    }
}

impl<'a, T: Element> From<&'a Buffer<T>> for KernelArg<'a> {
    fn from(b: &'a Buffer<T>) -> KernelArg<'a> {
        b.read_arg(0, b.len())
    }
}

impl<'a, T: Element> From<&'a mut Buffer<T>> for KernelArg<'a> {
    fn from(b: &'a mut Buffer<T>) -> KernelArg<'a> {
        let len = b.len();
        b.write_arg(0, len)
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for KernelArg<'_> {
            fn from(x: $t) -> Self {
                KernelArg::$v(x)
            }
        }
    )*};
}
scalar_arg!(i32 => I32, i64 => I64, u32 => U32, u64 => U64, f32 => F32);

/// Kernel argument words kept on the stack at launch.
const STACK_WORDS: usize = 48;

/// The largest tile a program may hold: a sane bound that keeps the CPU interpreter's tiles and
/// the GPU's registers finite.
pub const MAX_TILE_LEN: u64 = 1 << 24;

fn const_list(k: &Kernel) -> String {
    if k.consts.is_empty() {
        "none".into()
    } else {
        k.consts.join(", ")
    }
}

/// Const generic count, powers of two, and every tile length evaluating within [`MAX_TILE_LEN`].
pub(crate) fn validate_consts(k: &Kernel, consts: &[u64]) -> Result<()> {
    validate_consts_with(k, &k.tile_lens(), consts)
}

pub(crate) fn validate_consts_with(k: &Kernel, lens: &[Len], consts: &[u64]) -> Result<()> {
    if consts.len() != k.consts.len() {
        return Err(Error::InvalidLaunch(format!(
            "kernel `{}` has {} const generic(s) ({}) but {} value(s) were given",
            k.name,
            k.consts.len(),
            const_list(k),
            consts.len()
        )));
    }
    for (name, &v) in k.consts.iter().zip(consts) {
        if !v.is_power_of_two() {
            return Err(Error::InvalidLaunch(format!(
                "kernel `{}`: const generic {name} must be a power of two, got {v}",
                k.name
            )));
        }
    }
    for len in lens {
        match len.eval(consts) {
            Some(n) if n <= MAX_TILE_LEN => {}
            other => {
                let assigned: Vec<String> =
                    k.consts.iter().zip(consts).map(|(n, v)| format!("{n} = {v}")).collect();
                return Err(Error::InvalidLaunch(format!(
                    "kernel `{}`: tile length `{}` is {} with {}; tiles must be whole powers of two of at most {MAX_TILE_LEN} elements",
                    k.name,
                    len.display(&k.consts),
                    other.map_or("not a whole number".to_string(), |n| n.to_string()),
                    assigned.join(", ")
                )));
            }
        }
    }
    Ok(())
}

pub(crate) fn validate_num_warps(n: u32) -> Result<()> {
    if n.is_power_of_two() && n <= 32 {
        Ok(())
    } else {
        Err(Error::InvalidLaunch(format!("num_warps must be a power of two in 1..=32, got {n}")))
    }
}

pub(crate) fn validate_num_stages(n: u32) -> Result<()> {
    if (1..=MAX_NUM_STAGES).contains(&n) {
        Ok(())
    } else {
        Err(Error::InvalidLaunch(format!(
            "num_stages must be in 1..={MAX_NUM_STAGES} (pipeline stages of the kernel's loops; default \
             {DEFAULT_NUM_STAGES}), got {n}"
        )))
    }
}

/// CPU grid limits (the same as CUDA's on current GPUs).
const CPU_MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

fn validate_grid(grid: Grid, max: [u32; 3], device: &Device) -> Result<()> {
    let dims = [grid.x, grid.y, grid.z];
    for (axis, (&d, &m)) in dims.iter().zip(&max).enumerate() {
        let name = ["x", "y", "z"][axis];
        if d == 0 {
            return Err(Error::InvalidLaunch(format!(
                "grid dimension {name} is 0; every dimension must be at least 1 (grid {dims:?})"
            )));
        }
        if d > m {
            return Err(Error::InvalidLaunch(format!(
                "grid dimension {name} is {d} but {} allows at most {m} (grid {dims:?})",
                device.description()
            )));
        }
    }
    Ok(())
}

fn describe_param(p: &fuse_ir::Param) -> String {
    match p.kind {
        ParamKind::Ptr { elem, mutable: true } => format!("{}: *mut {elem}", p.name),
        ParamKind::Ptr { elem, mutable: false } => format!("{}: *const {elem}", p.name),
        ParamKind::Scalar(d) => format!("{}: {d}", p.name),
    }
}

fn expected_arg(p: &fuse_ir::Param) -> String {
    match p.kind {
        ParamKind::Ptr { elem, mutable: true } => format!("&mut Buffer<{elem}>"),
        ParamKind::Ptr { elem, mutable: false } => format!("&Buffer<{elem}>"),
        ParamKind::Scalar(d) => d.to_string(),
    }
}

fn check_buffer(
    k: &Kernel,
    p: &fuse_ir::Param,
    dtype: DType,
    len: usize,
    home: Home<'_>,
    device: &Device,
    narrow: Option<DType>,
) -> Result<()> {
    let ParamKind::Ptr { elem, .. } = p.kind else { unreachable!("checked by the caller") };
    if dtype != elem {
        return Err(Error::InvalidArgument(format!(
            "kernel `{}`: parameter `{}` expects {} but got a buffer of {dtype}",
            k.name,
            describe_param(p),
            expected_arg(p)
        )));
    }
    check_home(&k.name, &p.name, home, device)?;
    let limit = match narrow {
        Some(DType::I32) => Some(i32::MAX as u64),
        Some(DType::U32) => Some(u32::MAX as u64),
        _ => None,
    };
    if let Some(limit) = limit {
        if len as u64 > limit {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}`: the buffer for `{}` has {len} elements but the kernel indexes it with {} offsets, which \
                 reach at most {limit}; compute the offsets in i64 (`.to(i64)`) for buffers this long",
                k.name,
                p.name,
                narrow.unwrap_or(DType::I32)
            )));
        }
    }
    Ok(())
}

/// Whether memory living at `home` can be used by a launch of `kernel` on `device` (as its
/// parameter `param`).
pub(crate) fn check_home(kernel: &str, param: &str, home: Home<'_>, device: &Device) -> Result<()> {
    let wrong = |lives: String| {
        Err(Error::WrongDevice(format!(
            "kernel `{kernel}` is launched on {} but the memory for `{param}` {lives}",
            device.description(),
        )))
    };
    match (home, device.cuda_inner()) {
        (Home::Fuse(on), _) if on == device => Ok(()),
        (Home::Fuse(on), _) => wrong(format!("lives on {}", on.description())),
        (Home::Host, None) => Ok(()),
        (Home::Host, Some(_)) => {
            wrong("is host memory (a Rust slice); upload it to a Buffer or pass GPU memory".into())
        }
        (Home::Cudarc(_), None) => {
            wrong("is cudarc GPU memory, which the CPU interpreter cannot read".into())
        }
        (Home::Cudarc(h), Some(cuda)) => {
            if h.cu_ctx != cuda.ctx.cu_ctx() as usize {
                return wrong(format!(
                    "belongs to another CUDA context (this device's is device {}'s {})",
                    cuda.ordinal,
                    if cuda.borrowed { "context given to Device::from_cudarc" } else { "primary context" }
                ));
            }
            if h.tracked && h.object != Arc::as_ptr(&cuda.ctx) as usize {
                return Err(Error::WrongDevice(format!(
                    "kernel `{kernel}`: the cudarc memory for `{param}` belongs to a `CudaContext` that orders its \
                     streams with events, and {} is not built on that `CudaContext`: launch on \
                     `Device::from_cudarc(ctx, stream)` with the memory's context so the launch is ordered \
                     with its other users",
                    device.description()
                )));
            }
            Ok(())
        }
    }
}

/// Checks `args` against the kernel's parameters: count, kinds, dtypes, mutability, device, and
/// lengths reachable by 32-bit offsets.
fn validate_args(
    k: &Kernel,
    narrow: &[Option<DType>],
    device: &Device,
    args: &[KernelArg<'_>],
) -> Result<()> {
    if args.len() != k.params.len() {
        let want: Vec<String> = k.params.iter().map(describe_param).collect();
        let got: Vec<String> = args.iter().map(KernelArg::describe).collect();
        return Err(Error::InvalidArgument(format!(
            "kernel `{}` takes {} argument(s) ({}) but {} were given ({})",
            k.name,
            k.params.len(),
            want.join(", "),
            args.len(),
            got.join(", ")
        )));
    }
    for (i, (p, a)) in k.params.iter().zip(args).enumerate() {
        let narrow = narrow.get(i).copied().flatten();
        match (p.kind, a) {
            (ParamKind::Ptr { .. }, KernelArg::BufferMut(b)) => {
                check_buffer(k, p, b.dtype, b.len, b.home, device, narrow)?
            }
            (ParamKind::Ptr { mutable: false, .. }, KernelArg::Buffer(b)) => {
                check_buffer(k, p, b.dtype, b.len, b.home, device, narrow)?
            }
            (ParamKind::Scalar(DType::I32), KernelArg::I32(_))
            | (ParamKind::Scalar(DType::I64), KernelArg::I64(_))
            | (ParamKind::Scalar(DType::U32), KernelArg::U32(_))
            | (ParamKind::Scalar(DType::U64), KernelArg::U64(_))
            | (ParamKind::Scalar(DType::F32), KernelArg::F32(_)) => {}
            (ParamKind::Ptr { mutable: true, .. }, KernelArg::Buffer(_)) => {
                return Err(Error::InvalidArgument(format!(
                    "kernel `{}`: parameter `{}` is written by the kernel and needs {}, got a read-only {}",
                    k.name,
                    describe_param(p),
                    expected_arg(p),
                    a.describe()
                )))
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "kernel `{}`: argument {} for parameter `{}` must be {}, got {}",
                    k.name,
                    i + 1,
                    describe_param(p),
                    expected_arg(p),
                    a.describe()
                )))
            }
        }
    }
    Ok(())
}

/// Launches `spec` on `device` over `config.grid` programs (what a generated `k::launch` calls).
///
/// Everything is validated before anything runs, each failure an `Err` (never a panic): the
/// const generics (count, powers of two, tile lengths), the grid (non-zero, within the device's
/// limits), `num_warps` (a power of two in 1..=32), `num_stages` (1..=8, also on the CPU, which
/// ignores it), and the arguments (count, kinds, dtypes,
/// mutability, the launching device, lengths reachable by 32-bit offsets).
///
/// On the CPU the interpreter runs to completion and reports an out-of-bounds access at once. On a
/// GPU the launch is queued; an out-of-bounds access is reported by the next
/// [`Device::synchronize`] or [`Buffer::to_vec`]. `num_warps` defaults to [`crate::default_num_warps`]. The first launch of each specialization compiles
/// it (or takes it from the on-disk cache); later ones take it from memory.
///
/// # Errors
/// [`Error::InvalidLaunch`] and [`Error::InvalidArgument`] for what fails validation (and
/// `InvalidLaunch` for a kernel that asks for more dynamic shared memory than the GPU gives a block:
/// docs/DESIGN.md, "Runtime conventions"),
/// [`Error::WrongDevice`] for memory the device cannot use, [`Error::Compile`] /
/// [`Error::LibraryNotFound`] when the kernel cannot be compiled, [`Error::OutOfBounds`] from the
/// CPU interpreter, [`Error::Cuda`] when the driver refuses the launch.
pub fn launch(
    spec: &'static KernelSpec,
    device: &Device,
    config: LaunchConfig,
    consts: &[u64],
    args: &mut [KernelArg<'_>],
) -> Result<()> {
    let info = spec.info()?;
    let k = &info.kernel;
    validate_consts_with(k, &info.tile_lens, consts)?;
    let num_warps = match (config.num_warps, device.cuda_inner()) {
        (Some(n), _) => n,
        (None, Some(cuda)) => info.default_num_warps_for_grid(consts, config.grid.count(), cuda.sm_count),
        (None, None) => info.default_num_warps(consts),
    };
    validate_num_warps(num_warps)?;
    let num_stages = config.stages();
    validate_num_stages(num_stages)?;
    let max_grid = device.cuda_inner().map_or(CPU_MAX_GRID, |d| d.max_grid);
    validate_grid(config.grid, max_grid, device)?;
    validate_args(k, &info.narrow_index, device, args)?;
    let grid = [config.grid.x, config.grid.y, config.grid.z];
    if crate::cost::recording() {
        let cost_args: Vec<crate::CostArg> = args.iter().map(cost_arg).collect();
        crate::cost::record(spec, consts, config.grid, &cost_args);
    }
    match device.cuda_inner() {
        // The interpreter has no warps or pipelines: both only shape the GPU code.
        None => run_cpu(k, consts, grid, args),
        Some(cuda) => launch_cuda(spec, info, cuda, consts, grid, (num_warps, num_stages), args),
    }
}

/// The GPU half of [`launch`], after validation.
fn launch_cuda(
    spec: &'static KernelSpec,
    info: &KernelInfo,
    cuda: &CudaDevice,
    consts: &[u64],
    grid: [u32; 3],
    (num_warps, num_stages): (u32, u32),
    args: &mut [KernelArg<'_>],
) -> Result<()> {
    let k = &info.kernel;
    let capture_stream = cuda.capture_stream_of_this_thread();
    let capturing = capture_stream.is_some();
    if capturing {
        refuse_uncapturable(k, args)?;
    }
    // cudarc memory: its pointer is taken on the launching stream now (waiting for its pending
    // writes where its context tracks them) and the guards, dropped after the launch is queued,
    // record the kernel's use. The argument then holds the plain address.
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    for a in args.iter_mut() {
        match a {
            KernelArg::Buffer(b) if matches!(b.data, Data::Cudarc(_)) => {
                let Data::Cudarc(m) = std::mem::replace(&mut b.data, Data::Cuda { ptr: 0, keep: None })
                else {
                    unreachable!()
                };
                let (ptr, guard) = m.read_ptr(&cuda.stream);
                b.data = Data::Cuda { ptr, keep: None };
                guards.push(guard);
            }
            KernelArg::BufferMut(b) if matches!(b.data, DataMut::Cudarc(_)) => {
                let placeholder = DataMut::Cuda { ptr: 0, keep: None, _exclusive: PhantomData };
                let DataMut::Cudarc(m) = std::mem::replace(&mut b.data, placeholder) else { unreachable!() };
                let (ptr, guard) = m.write_ptr(&cuda.stream);
                b.data = DataMut::Cuda { ptr, keep: None, _exclusive: PhantomData };
                guards.push(guard);
            }
            _ => {}
        }
    }
    let specs = spec.specializations();
    let (mut maps, tma_on) = tensor_maps(info, cuda.tma, consts, grid, args);
    let bits = specialization_bits(specs, info, consts, grid, args) | tma_bits(specs, &tma_on);
    let key = (consts.len() <= 16 && specs.len() <= 64).then(|| {
        let mut consts_log2 = [0u8; 16];
        for (slot, c) in consts_log2.iter_mut().zip(consts) {
            *slot = c.trailing_zeros() as u8;
        }
        HotKey {
            spec: spec as *const KernelSpec as usize,
            consts_log2,
            nconsts: consts.len() as u8,
            num_warps,
            num_stages,
            spec_bits: bits,
        }
    });
    let make_source = || {
        let values: Vec<bool> = (0..specs.len()).map(|i| i < 64 && bits & (1 << i) != 0).collect();
        full_source_for(k, spec.source(), specs, consts, (num_warps, num_stages), &values)
    };
    let loaded = if capturing {
        cuda.loaded_function(key, &make_source).ok_or_else(|| {
            Error::InvalidLaunch(format!(
                "kernel `{}` has not been compiled for this configuration (const generics {consts:?}, {num_warps} \
                 warps, {num_stages} stages, this launch's specializations) on {}: a graph capture cannot compile or load a module; \
                 launch it once with the same arguments before capturing",
                k.name,
                cuda.description()
            ))
        })?
    } else {
        cuda.function(key, spec.name(), k, make_source)?
    };
    // One little-endian word per C parameter (a 4-byte parameter reads the low half), on
    // the stack for all but huge parameter lists.
    let nbuf = args.iter().filter(|a| matches!(a, KernelArg::Buffer(_) | KernelArg::BufferMut(_))).count();
    let nhost = info.host_scalars.len();
    let nwords = args.len() + nbuf + nhost + 1;
    let mut stack = [0u64; STACK_WORDS];
    let mut heap = Vec::new();
    let words: &mut [u64] = if nwords <= STACK_WORDS {
        &mut stack[..nwords]
    } else {
        heap.resize(nwords, 0);
        &mut heap
    };
    let mut lens = args.len();
    for (i, a) in args.iter().enumerate() {
        words[i] = match a {
            KernelArg::Buffer(BufferArg { data: Data::Cuda { ptr, .. }, .. }) => *ptr,
            KernelArg::BufferMut(BufferArgMut { data: DataMut::Cuda { ptr, .. }, .. }) => *ptr,
            KernelArg::Buffer(_) | KernelArg::BufferMut(_) => {
                return Err(Error::WrongDevice("host memory reached a CUDA launch".into()))
            }
            KernelArg::I32(v) => u64::from(*v as u32),
            KernelArg::U32(v) => u64::from(*v),
            KernelArg::F32(v) => u64::from(v.to_bits()),
            KernelArg::I64(v) => *v as u64,
            KernelArg::U64(v) => *v,
        };
        if let KernelArg::Buffer(BufferArg { len, .. }) | KernelArg::BufferMut(BufferArgMut { len, .. }) = a {
            words[lens] = *len as u64;
            lens += 1;
        }
    }
    for (slot, p) in words[lens..].iter_mut().zip(&info.host_scalars) {
        *slot = host_scalar_word(k, p, consts, args)?;
    }
    words[nwords - 1] = loaded.err_ptr;
    if capturing {
        cuda.keep_for_capture(args.iter().filter_map(|a| match a {
            KernelArg::Buffer(BufferArg { data: Data::Cuda { keep, .. }, .. })
            | KernelArg::BufferMut(BufferArgMut { data: DataMut::Cuda { keep, .. }, .. }) => {
                keep.map(|k| k.retain())
            }
            _ => None,
        }));
    }
    let smem = loaded.smem.map_err(|t| {
        t.error(&k.name, &describe_config(k, consts, num_warps, num_stages), &cuda.description())
    })?;
    let queued = cuda.launch(&loaded, grid, num_warps, smem.dynamic, words, &mut maps, capture_stream);
    drop(guards);
    queued
}

/// `BLOCK = 128, num_warps = 4, num_stages = 3`: a compiled variant, as errors name it.
pub(crate) fn describe_config(k: &Kernel, consts: &[u64], num_warps: u32, num_stages: u32) -> String {
    let mut parts: Vec<String> = k.consts.iter().zip(consts).map(|(n, v)| format!("{n} = {v}")).collect();
    parts.push(format!("num_warps = {num_warps}"));
    parts.push(format!("num_stages = {num_stages}"));
    parts.join(", ")
}

/// A graph keeps the allocations of the fuse buffers it launches on alive; cudarc and host
/// memory it could not keep, so a capture refuses them.
fn refuse_uncapturable(k: &Kernel, args: &[KernelArg<'_>]) -> Result<()> {
    for (p, a) in k.params.iter().zip(args) {
        let foreign = matches!(
            a,
            KernelArg::Buffer(BufferArg { data: Data::Cudarc(_), .. })
                | KernelArg::BufferMut(BufferArgMut { data: DataMut::Cudarc(_), .. })
        );
        if foreign {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}`: a graph capture takes only fuse Buffers (and their views) as memory arguments, \
                 but `{}` is cudarc memory: the graph could not keep it alive for its replays (copy it into a \
                 Buffer, or launch without a graph)",
                k.name, p.name
            )));
        }
    }
    Ok(())
}

impl KernelSpec {
    /// Per access (in [`fuse_ir::Kernel::accesses`] order: every load and store in program
    /// order), whether a launch with these const generics, grid and arguments runs it without its
    /// bounds check: whether the runtime proves, before launching, that every lane it touches lies
    /// inside its buffer (see docs/DESIGN.md, "Launch-time bounds proof"). The arguments are
    /// validated as [`launch`] validates them.
    pub fn proven_in_bounds(
        &self,
        device: &Device,
        config: LaunchConfig,
        consts: &[u64],
        args: &[KernelArg<'_>],
    ) -> Result<Vec<bool>> {
        let (proof, k) = self.proof_for(device, config, consts, args)?;
        Ok((0..k.accesses().len()).map(|a| a < 64 && proof.in_bounds & (1 << a) != 0).collect())
    }

    /// Per mask (in [`fuse_ir::Kernel::masks`] order: bool tiles assigned once, by an integer
    /// comparison or an `&`), whether a launch with these const generics, grid and arguments
    /// treats it as the constant `true`: whether the runtime proves, before launching, that it
    /// holds on every lane of every program (see docs/DESIGN.md, "Masks proven true"). The
    /// arguments are validated as [`launch`] validates them.
    pub fn proven_all_true(
        &self,
        device: &Device,
        config: LaunchConfig,
        consts: &[u64],
        args: &[KernelArg<'_>],
    ) -> Result<Vec<bool>> {
        let (proof, k) = self.proof_for(device, config, consts, args)?;
        Ok((0..k.masks().len()).map(|m| m < 64 && proof.all_true & (1 << m) != 0).collect())
    }

    /// The launch-time proof for a launch, its inputs validated as [`launch`] validates them.
    fn proof_for(
        &self,
        device: &Device,
        config: LaunchConfig,
        consts: &[u64],
        args: &[KernelArg<'_>],
    ) -> Result<(Proof, &Kernel)> {
        let info = self.info()?;
        let k = &info.kernel;
        validate_consts_with(k, &info.tile_lens, consts)?;
        let max_grid = device.cuda_inner().map_or(CPU_MAX_GRID, |d| d.max_grid);
        validate_grid(config.grid, max_grid, device)?;
        validate_args(k, &info.narrow_index, device, args)?;
        Ok((prove(info, consts, [config.grid.x, config.grid.y, config.grid.z], args), k))
    }
}

/// The value of each specialization for this launch (bit `i` for `specs[i]`, the first 64).
fn specialization_bits(
    specs: &[Specialization],
    info: &KernelInfo,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> u64 {
    let mut proof: Option<Proof> = None;
    let mut branches: Option<Vec<Option<bool>>> = None;
    let mut bits = 0u64;
    for (i, s) in specs.iter().enumerate().take(64) {
        let on = match *s {
            Specialization::Align16(p) => {
                args.get(p as usize).and_then(device_address).is_some_and(|a| a % 16 == 0)
            }
            Specialization::Div16(p) => scalar_value(args.get(p as usize)).is_some_and(|v| v % 16 == 0),
            Specialization::InBounds(a) => {
                let proof = *proof.get_or_insert_with(|| memo_proof(info, consts, grid, args));
                a < 64 && proof.in_bounds & (1 << a) != 0
            }
            Specialization::AllTrue(m) => {
                let proof = *proof.get_or_insert_with(|| memo_proof(info, consts, grid, args));
                m < 64 && proof.all_true & (1 << m) != 0
            }
            Specialization::BranchTaken(b) | Specialization::BranchSkipped(b) => {
                let values = branches.get_or_insert_with(|| branch_values(info, consts, args));
                values.get(b as usize).copied().flatten()
                    == Some(matches!(*s, Specialization::BranchTaken(_)))
            }
            // Set by `tma_bits`, where this launch has the tensor map.
            Specialization::TensorBox(_) => false,
        };
        bits |= u64::from(on) << i;
    }
    bits
}

/// Per [`Specialization::TensorBox`] of a kernel, its tensor map (zeros where unused), and the
/// accesses whose map a launch encoded.
pub(crate) type TensorMaps = (Vec<cudarc::driver::sys::CUtensorMap>, Vec<u32>);

/// One tensor map per [`Specialization::TensorBox`] of the kernel (zeros where unused), and the
/// accesses whose map this launch encoded (`enabled`: the device compiles for `sm_90a` and
/// `FUSE_TMA` is not 0); see [`crate::cuda::tma`]. The last launch's maps are reused while
/// its inputs, the buffers' addresses among them, repeat.
fn tensor_maps(
    info: &KernelInfo,
    enabled: bool,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> TensorMaps {
    if !enabled || info.tensor_boxes.is_empty() {
        return (
            vec![cudarc::driver::sys::CUtensorMap { opaque: [0; 16] }; info.tensor_boxes.len()],
            Vec::new(),
        );
    }
    let key = LaunchKey::new(consts, grid, args, true);
    info.last_tensor_maps.get_or_compute(key, || encode_tensor_maps(info, consts, grid, args))
}

/// [`tensor_maps`] for this launch, computed.
fn encode_tensor_maps(
    info: &KernelInfo,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> TensorMaps {
    let mut maps = vec![cudarc::driver::sys::CUtensorMap { opaque: [0; 16] }; info.tensor_boxes.len()];
    let mut on = Vec::new();
    let scalars: Vec<Option<i128>> = args.iter().map(|a| scalar_value(Some(a))).collect();
    let lens: Vec<Option<u64>> = args.iter().map(buffer_len).collect();
    let facts = LaunchFacts { consts, grid, scalars: &scalars, lens: &lens };
    let param = |p: u32| scalar_value(args.get(p as usize)).map(fuse_ir::HostScalar::Int);
    for (slot, (access, b, programs)) in maps.iter_mut().zip(&info.tensor_boxes) {
        let (ptr, len, elem) = match args.get(b.param as usize) {
            Some(KernelArg::Buffer(BufferArg { data: Data::Cuda { ptr, .. }, len, dtype, .. }))
            | Some(KernelArg::BufferMut(BufferArgMut {
                data: DataMut::Cuda { ptr, .. }, len, dtype, ..
            })) => (*ptr, *len as u64, *dtype),
            _ => continue,
        };
        let Some(programs) = programs else { continue };
        let Some(values) = box_values(info, (*access, b, programs), (ptr, len, elem), &param, &facts) else {
            continue;
        };
        if let Some(map) = crate::cuda::tma::encode(&values) {
            *slot = map;
            on.push(*access);
        }
    }
    (maps, on)
}

/// A box load's values for this launch ([`crate::cuda::tma::BoxValues`]): its scalars from
/// the host programs, its tiles' (and the base index's) ranges from the bounds analysis.
fn box_values(
    info: &KernelInfo,
    (access, b, programs): (u32, &fuse_ir::TensorBox, &crate::spec::BoxPrograms),
    (ptr, len, elem): (u64, u64, DType),
    param: &dyn Fn(u32) -> Option<fuse_ir::HostScalar>,
    facts: &LaunchFacts<'_>,
) -> Option<crate::cuda::tma::BoxValues> {
    use crate::cuda::tma::Base;
    let value = |p: &fuse_ir::HostProgram| match p.eval(param, facts.consts)? {
        fuse_ir::HostScalar::Int(v) => Some(v),
        _ => None,
    };
    // The offset itself among the ranges: an offset that may wrap around has none.
    let mut vars = vec![b.rows, b.cols, programs.offset];
    vars.extend(b.base_index);
    let ranges = info.bounds.launch_ranges(access as usize, &vars, facts)?;
    let (rows, cols) = (ranges[0], ranges[1]);
    let end = |p: &Option<fuse_ir::HostProgram>, (_, most): (i128, i128)| match p {
        Some(p) => value(p),
        None => Some(most + 1),
    };
    // The product of the base's host factors: the base itself, or the pitch of its index.
    let product = programs.base_pitch.iter().try_fold(1i128, |acc, p| acc.checked_mul(value(p)?))?;
    let base = match (b.base_index, programs.base_pitch.is_empty()) {
        (None, true) => Base::Zero,
        (None, false) => Base::Fixed(product),
        (Some(_), _) => Base::Index { pitch: product, least: ranges[3].0, most: ranges[3].1 },
    };
    Some(crate::cuda::tma::BoxValues {
        ptr,
        len,
        elem,
        stride: value(&programs.stride)?,
        row_end: end(&programs.row_end, rows)?,
        col_end: end(&programs.col_end, cols)?,
        height: b.height.eval(facts.consts)?,
        width: b.width.eval(facts.consts)?,
        least_row: rows.0,
        least_col: cols.0,
        base,
    })
}

/// The bits of the [`Specialization::TensorBox`] entries whose map [`tensor_maps`] encoded.
fn tma_bits(specs: &[Specialization], on: &[u32]) -> u64 {
    specs.iter().enumerate().take(64).fold(0, |bits, (i, s)| match s {
        Specialization::TensorBox(a) if on.contains(a) => bits | 1 << i,
        _ => bits,
    })
}

/// Each of [`fuse_ir::Kernel::uniform_branches`]' conditions for these arguments, where the host
/// can compute it.
fn branch_values(info: &KernelInfo, consts: &[u64], args: &[KernelArg<'_>]) -> Vec<Option<bool>> {
    let as_bool = |v| match v {
        fuse_ir::HostScalar::Bool(v) => Some(v),
        _ => None,
    };
    info.branches.iter().map(|p| p.eval(&|p| host_arg(args, p), consts).and_then(as_bool)).collect()
}

/// Scalar argument `p` as the host programs read it.
fn host_arg(args: &[KernelArg<'_>], p: u32) -> Option<fuse_ir::HostScalar> {
    match args.get(p as usize)? {
        KernelArg::F32(x) => Some(fuse_ir::HostScalar::Float(f64::from(*x))),
        a => scalar_value(Some(a)).map(fuse_ir::HostScalar::Int),
    }
}

/// The launch word of one of [`fuse_ir::Kernel::host_scalars`] (its `fuse_host<i>` parameter):
/// the value for these arguments.
fn host_scalar_word(
    k: &Kernel,
    program: &fuse_ir::HostProgram,
    consts: &[u64],
    args: &[KernelArg<'_>],
) -> Result<u64> {
    // `host_scalars` keeps only programs the evaluator runs for any argument values (it refuses
    // by operation, not by value), so `None` means arguments that do not fit the parameters,
    // which `validate_args` rejected before.
    match program.eval(&|p| host_arg(args, p), consts) {
        Some(v) => Ok(v.launch_word()),
        None => Err(Error::InvalidLaunch(format!(
            "kernel `{}`: the host could not compute the scalar `{}` from this launch's arguments",
            k.name,
            k.var(program.var()).name
        ))),
    }
}

/// A device buffer's address (`None` for host memory, cudarc memory not yet resolved at launch,
/// and scalars).
pub(crate) fn device_address(a: &KernelArg<'_>) -> Option<u64> {
    match a {
        KernelArg::Buffer(BufferArg { data: Data::Cuda { ptr, .. }, .. })
        | KernelArg::BufferMut(BufferArgMut { data: DataMut::Cuda { ptr, .. }, .. }) => Some(*ptr),
        _ => None,
    }
}

pub(crate) fn scalar_value(a: Option<&KernelArg<'_>>) -> Option<i128> {
    Some(match a? {
        KernelArg::I32(v) => (*v).into(),
        KernelArg::I64(v) => (*v).into(),
        KernelArg::U32(v) => (*v).into(),
        KernelArg::U64(v) => (*v).into(),
        _ => return None,
    })
}

/// What [`crate::cost`] needs of a launch argument.
fn cost_arg(a: &KernelArg<'_>) -> crate::CostArg {
    match (a, scalar_value(Some(a)), buffer_len(a)) {
        (_, Some(v), _) => crate::CostArg::Int(v),
        (_, _, Some(n)) => crate::CostArg::Len(n),
        (KernelArg::F32(x), ..) => crate::CostArg::F32(*x),
        _ => crate::CostArg::F32(0.0),
    }
}

pub(crate) fn buffer_len(a: &KernelArg<'_>) -> Option<u64> {
    match a {
        KernelArg::Buffer(b) => Some(b.len as u64),
        KernelArg::BufferMut(b) => Some(b.len as u64),
        _ => None,
    }
}

/// [`crate::bounds::BoundsPlan::prove`] over this launch's values.
fn prove(info: &KernelInfo, consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>]) -> Proof {
    let scalars: Vec<Option<i128>> = args.iter().map(|a| scalar_value(Some(a))).collect();
    let lens: Vec<Option<u64>> = args.iter().map(buffer_len).collect();
    info.bounds.prove(&LaunchFacts { consts, grid, scalars: &scalars, lens: &lens })
}

/// [`prove`] for this launch, reusing the last launch's answer when its inputs (const
/// generics, grid, integer scalars, buffer lengths) are the same.
fn memo_proof(info: &KernelInfo, consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>]) -> Proof {
    let key = LaunchKey::new(consts, grid, args, false);
    info.last_proof.get_or_compute(key, || prove(info, consts, grid, args))
}

fn run_cpu(k: &Kernel, consts: &[u64], grid: [u32; 3], args: &mut [KernelArg<'_>]) -> Result<()> {
    use crate::cpu::{CpuArg, CpuError};
    let mut cpu_args: Vec<CpuArg<'_>> = Vec::with_capacity(args.len());
    for a in args.iter_mut() {
        cpu_args.push(match a {
            KernelArg::Buffer(BufferArg { data: Data::Host(b), .. }) => CpuArg::Read(b),
            KernelArg::BufferMut(BufferArgMut { data: DataMut::Host(b), .. }) => CpuArg::Write(b),
            KernelArg::Buffer(_) | KernelArg::BufferMut(_) => {
                return Err(Error::WrongDevice("a GPU buffer reached a CPU launch".into()))
            }
            KernelArg::I32(v) => CpuArg::I32(*v),
            KernelArg::I64(v) => CpuArg::I64(*v),
            KernelArg::U32(v) => CpuArg::U32(*v),
            KernelArg::U64(v) => CpuArg::U64(*v),
            KernelArg::F32(v) => CpuArg::F32(*v),
        });
    }
    crate::cpu::run(k, consts, grid, &mut cpu_args).map_err(|e| match e {
        CpuError::OutOfBounds { param, index, len, program } => Error::OutOfBounds {
            kernel: k.name.clone(),
            param,
            index,
            len: Some(len),
            program: Some(program),
        },
        CpuError::InvalidKernel(m) => Error::InvalidKernel(format!("kernel `{}`: {m}", k.name)),
    })
}
