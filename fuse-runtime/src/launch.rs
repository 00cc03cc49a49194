//! [`launch`]: validation, then the CPU interpreter or a CUDA launch (the pointers of cudarc
//! memory taken on the launching stream, the variant picked and loaded, the arguments packed
//! into the kernel's C parameters).
//!
//! Top layer: imports the layers below (`config`, `args`, `validate`, `specialize`,
//! `tensor_maps`, `spec`, `cost`, `device`, the CPU and CUDA back ends, `util`); nothing but the
//! crate root imports it.

use crate::args::{cost_arg, ArgMemory, ArgMemoryMut, BufferArg, BufferArgMut, KernelArg};
use crate::config::{
    describe_config, validate_consts_with, validate_num_stages, validate_num_warps, LaunchConfig,
};
use crate::cost::CostArg;
use crate::cpu::{CpuArg, CpuError};
use crate::cuda::{CudaDevice, HotKey, Loaded};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::spec::{full_source_for, KernelInfo, KernelSpec};
use crate::specialize::{host_scalar_word, specialization_bits};
use crate::tensor_maps::{tensor_maps, tma_bits};
use crate::util::stack_or_heap;
use crate::validate::{validate_args, validate_grid};
use cudarc::driver::{CudaStream, SyncOnDrop};
use fuse_ir::Kernel;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// Kernel argument words kept on the stack at launch.
const STACK_WORDS: usize = 48;

/// Launches `spec` on `device` over `config.grid` programs (what a generated `k::launch` calls).
///
/// Everything is validated before anything runs, each failure an `Err` (never a panic): the
/// const generics (count, powers of two, tile lengths), the grid (non-zero, within the device's
/// limits), `num_warps` (a power of two in 1..=32), `num_stages` (1..=8, also on the CPU, which
/// ignores it), and the arguments (count, kinds, dtypes, mutability, the launching device,
/// lengths reachable by 32-bit offsets).
///
/// On the CPU the interpreter runs to completion and reports an out-of-bounds access at once. On a
/// GPU the launch is queued; an out-of-bounds access is reported by the next
/// [`Device::synchronize`] or [`Buffer::to_vec`](crate::Buffer::to_vec). `num_warps` defaults to
/// [`crate::default_num_warps`]. The first launch of each specialization compiles it (or takes
/// it from the on-disk cache); later ones take it from memory.
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
    validate_grid(config.grid, device)?;
    validate_args(k, &info.narrow_index, device, args)?;
    let grid = [config.grid.x, config.grid.y, config.grid.z];
    if crate::cost::recording() {
        let cost_args: Vec<CostArg> = args.iter().map(cost_arg).collect();
        crate::cost::record(spec.name(), spec.cost(consts, config.grid, &cost_args));
    }
    match device.cuda_inner() {
        // The interpreter has no warps or pipelines: both only shape the GPU code.
        None => run_cpu(k, consts, grid, args),
        Some(cuda) => launch_cuda(spec, info, cuda, consts, grid, (num_warps, num_stages), args),
    }
}

/// The GPU half of [`launch`], after validation: the cudarc memory's pointers taken, the variant
/// picked and loaded, the arguments packed, the kernel queued.
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
    let guards = take_cudarc_pointers(args, &cuda.stream);
    let specs = spec.specializations();
    let (mut maps, tma_on) = tensor_maps(info, cuda.tma, consts, grid, args);
    let bits = specialization_bits(specs, info, consts, grid, args) | tma_bits(specs, &tma_on);
    let variant = Variant { spec, consts, num_warps, num_stages, bits };
    let loaded = load_variant(cuda, k, &variant, capturing)?;
    let mut stack = [0u64; STACK_WORDS];
    let mut heap = Vec::new();
    let words = stack_or_heap(word_count(info, args), &mut stack, &mut heap, 0);
    pack_words(words, info, consts, args, loaded.err_ptr)?;
    if capturing {
        cuda.keep_for_capture(args.iter().filter_map(retained_allocation));
    }
    let smem = loaded.smem.map_err(|t| {
        t.error(&k.name, &describe_config(k, consts, num_warps, num_stages), &cuda.description())
    })?;
    let queued = cuda.launch(&loaded, grid, num_warps, smem.dynamic, words, &mut maps, capture_stream);
    drop(guards);
    queued
}

/// Takes the pointer of each cudarc memory argument on the launching `stream` (waiting for its
/// pending writes where its context tracks them) and leaves the plain address in the argument.
/// The guards returned record the kernel's use when they are dropped, after the launch is queued.
fn take_cudarc_pointers<'a: 's, 's>(
    args: &mut [KernelArg<'a>],
    stream: &'s CudaStream,
) -> Vec<SyncOnDrop<'s>> {
    let mut guards = Vec::new();
    for a in args.iter_mut() {
        match a {
            KernelArg::Buffer(b) if matches!(b.data, ArgMemory::Cudarc(_)) => {
                let placeholder = ArgMemory::Cuda { ptr: 0, keep: None };
                let ArgMemory::Cudarc(m) = std::mem::replace(&mut b.data, placeholder) else {
                    unreachable!()
                };
                let (ptr, guard) = m.read_ptr(stream);
                b.data = ArgMemory::Cuda { ptr, keep: None };
                guards.push(guard);
            }
            KernelArg::BufferMut(b) if matches!(b.data, ArgMemoryMut::Cudarc(_)) => {
                let placeholder = ArgMemoryMut::Cuda { ptr: 0, keep: None, _exclusive: PhantomData };
                let ArgMemoryMut::Cudarc(m) = std::mem::replace(&mut b.data, placeholder) else {
                    unreachable!()
                };
                let (ptr, guard) = m.write_ptr(stream);
                b.data = ArgMemoryMut::Cuda { ptr, keep: None, _exclusive: PhantomData };
                guards.push(guard);
            }
            _ => {}
        }
    }
    guards
}

/// The compiled variant a launch runs: the spec at these const generics, warps and stages, with
/// the specialization values of `bits` (bit `i` for the spec's `i`-th specialization).
struct Variant<'l> {
    spec: &'static KernelSpec,
    consts: &'l [u64],
    num_warps: u32,
    num_stages: u32,
    bits: u64,
}

impl Variant<'_> {
    /// The hot-path cache key; `None` for more const generics or specializations than it holds.
    fn hot_key(&self) -> Option<HotKey> {
        let (consts, specs) = (self.consts, self.spec.specializations());
        (consts.len() <= 16 && specs.len() <= 64).then(|| {
            let mut consts_log2 = [0u8; 16];
            for (slot, c) in consts_log2.iter_mut().zip(consts) {
                *slot = c.trailing_zeros() as u8;
            }
            HotKey {
                spec: self.spec as *const KernelSpec as usize,
                consts_log2,
                nconsts: consts.len() as u8,
                num_warps: self.num_warps,
                num_stages: self.num_stages,
                spec_bits: self.bits,
            }
        })
    }

    /// The source NVRTC compiles for it.
    fn source(&self, k: &Kernel) -> String {
        let specs = self.spec.specializations();
        let values: Vec<bool> = (0..specs.len()).map(|i| i < 64 && self.bits & (1 << i) != 0).collect();
        full_source_for(k, self.spec.source(), specs, self.consts, (self.num_warps, self.num_stages), &values)
    }
}

/// `variant` loaded on `cuda`: from the hot map, the caches or a compile; inside a graph capture,
/// which cannot compile or load a module, only if it is loaded already.
fn load_variant(
    cuda: &CudaDevice,
    k: &Kernel,
    variant: &Variant<'_>,
    capturing: bool,
) -> Result<Arc<Loaded>> {
    let key = variant.hot_key();
    let make_source = || variant.source(k);
    if !capturing {
        return cuda.function(key, variant.spec.name(), k, make_source);
    }
    cuda.loaded_function(key, &make_source).ok_or_else(|| {
        Error::InvalidLaunch(format!(
            "kernel `{}` has not been compiled for this configuration (const generics {:?}, {} \
             warps, {} stages, this launch's specializations) on {}: a graph capture cannot compile or load a module; \
             launch it once with the same arguments before capturing",
            k.name,
            variant.consts,
            variant.num_warps,
            variant.num_stages,
            cuda.description()
        ))
    })
}

/// The C parameters of a launch: one per argument, one more per buffer (its length), one per
/// host-computed scalar, and the error pointer.
fn word_count(info: &KernelInfo, args: &[KernelArg<'_>]) -> usize {
    let buffers = args.iter().filter(|a| matches!(a, KernelArg::Buffer(_) | KernelArg::BufferMut(_))).count();
    args.len() + buffers + info.host_scalars.len() + 1
}

/// Packs the C parameters into `words` ([`word_count`] of them), one little-endian word each (a
/// 4-byte parameter reads the low half): the arguments in order (a buffer as its device
/// address), each buffer's length, the host-computed scalars, then `err_ptr`.
fn pack_words(
    words: &mut [u64],
    info: &KernelInfo,
    consts: &[u64],
    args: &[KernelArg<'_>],
    err_ptr: u64,
) -> Result<()> {
    let mut lens = args.len();
    for (i, a) in args.iter().enumerate() {
        words[i] = match a {
            KernelArg::Buffer(BufferArg { data: ArgMemory::Cuda { ptr, .. }, .. }) => *ptr,
            KernelArg::BufferMut(BufferArgMut { data: ArgMemoryMut::Cuda { ptr, .. }, .. }) => *ptr,
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
        *slot = host_scalar_word(&info.kernel, p, consts, args)?;
    }
    let last = words.len() - 1;
    words[last] = err_ptr;
    Ok(())
}

/// The fuse allocation behind argument `a`, for a graph capture to keep alive.
fn retained_allocation(a: &KernelArg<'_>) -> Option<Arc<dyn Any + Send + Sync>> {
    match a {
        KernelArg::Buffer(BufferArg { data: ArgMemory::Cuda { keep, .. }, .. })
        | KernelArg::BufferMut(BufferArgMut { data: ArgMemoryMut::Cuda { keep, .. }, .. }) => {
            keep.map(|k| k.retain())
        }
        _ => None,
    }
}

/// A graph keeps the allocations of the fuse buffers it launches on alive; cudarc and host
/// memory it could not keep, so a capture refuses them.
fn refuse_uncapturable(k: &Kernel, args: &[KernelArg<'_>]) -> Result<()> {
    for (p, a) in k.params.iter().zip(args) {
        let foreign = matches!(
            a,
            KernelArg::Buffer(BufferArg { data: ArgMemory::Cudarc(_), .. })
                | KernelArg::BufferMut(BufferArgMut { data: ArgMemoryMut::Cudarc(_), .. })
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

fn run_cpu(k: &Kernel, consts: &[u64], grid: [u32; 3], args: &mut [KernelArg<'_>]) -> Result<()> {
    let mut cpu_args: Vec<CpuArg<'_>> = Vec::with_capacity(args.len());
    for a in args.iter_mut() {
        cpu_args.push(match a {
            KernelArg::Buffer(BufferArg { data: ArgMemory::Host(b), .. }) => CpuArg::Read(b),
            KernelArg::BufferMut(BufferArgMut { data: ArgMemoryMut::Host(b), .. }) => CpuArg::Write(b),
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
