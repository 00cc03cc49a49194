//! The CUDA back end: devices, memory, the compile caches and launches through cudarc.
//!
//! One stream per device (the context's default stream for `Device::cuda`, the caller's for
//! `Device::from_cudarc`) orders every copy and launch. A graph capture records the capturing
//! thread's launches on a private capture stream instead (see `graph.rs`).
//!
//! Back-end layer: `cuda/` imports only the bottom layer (`error`, `util`, `disk_cache`); the
//! device, the launch and the autotuner above it pass it what it needs (the launch words, the
//! source to compile, the spec's address for the autotuning winners). Inside it, `libs.rs`,
//! `tma.rs`, `smem.rs`, `capture.rs` and `tunings.rs` are at the bottom, `nvrtc.rs` above
//! `libs.rs`, this file (the device, its caches and its launches) on top.

pub(crate) mod capture;
pub(crate) mod libs;
pub(crate) mod nvrtc;
pub(crate) mod smem;
pub(crate) mod tma;
pub(crate) mod tunings;

use crate::disk_cache::DiskCache;
use crate::error::{drv, Error, Result};
use crate::util::{lock, median, stack_or_heap};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr};
use fuse_ir::Kernel;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

#[cfg(not(target_endian = "little"))]
compile_error!("fuse-runtime passes kernel arguments as little-endian words");

/// Error-word slots per device: one per kernel (2 words each), so an out-of-bounds report names
/// its kernel and parameter exactly. Kernels beyond this share the last slot.
const MAX_SLOTS: usize = 1024;

/// `f`'s value for `key`, computed once however many threads ask at the same time (single
/// flight). A failure is returned to those threads but not kept: the entry is dropped, so a later
/// call tries again (a missing library may have been installed, a full disk freed).
fn single_flight<K: std::hash::Hash + Eq + Clone, T: Clone>(
    map: &Mutex<HashMap<K, Cell<T>>>,
    key: K,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let cell: Cell<T> = lock(map).entry(key.clone()).or_default().clone();
    let out = cell.get_or_init(f).clone();
    if out.is_err() {
        let mut m = lock(map);
        if m.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            m.remove(&key);
        }
    }
    out
}

/// Who owns an error slot.
struct Slot {
    kernel: String,
    params: Vec<String>,
    shared: bool,
}

/// A kernel loaded on a device.
pub(crate) struct Loaded {
    pub(crate) func: CudaFunction,
    /// Device address of this kernel's two error words.
    pub(crate) err_ptr: u64,
    /// Its dynamic shared memory (`smem.rs`), or why this device cannot launch it.
    pub(crate) smem: std::result::Result<smem::SmemPlan, smem::TooLarge>,
}

/// FxHash (rustc's): a multiply-rotate hash, plenty for the small fixed keys of the hot map.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The hot-path cache key: no string, no hashing of the source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct HotKey {
    pub(crate) spec: usize,
    pub(crate) consts_log2: [u8; 16],
    pub(crate) nconsts: u8,
    pub(crate) num_warps: u32,
    pub(crate) num_stages: u32,
    pub(crate) spec_bits: u64,
}

type Cell<T> = Arc<OnceLock<Result<T>>>;

pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    /// Made by `Device::from_cudarc` over the caller's context and stream.
    pub(crate) borrowed: bool,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) name: String,
    pub(crate) arch: String,
    /// What NVRTC compiles for ([`compile_target`]): `sm_90a` on Hopper (wgmma), else `arch`.
    pub(crate) target: String,
    /// Whether pipelined `dot` operands may be copied with TMA (`FUSE_TMA_<k>`): an `sm_90a`
    /// target, unless `FUSE_TMA=0` (then every copy is `cp.async`).
    pub(crate) tma: bool,
    /// Whether buffers of 1 MiB or more start on a page boundary (`Device::zeros`/`upload`),
    /// unless `FUSE_PAGE_ALIGN=0` (then wherever the pool puts them, with no padding).
    pub(crate) page_align: bool,
    pub(crate) max_grid: [u32; 3],
    /// Streaming multiprocessors (for the default `num_warps` of small grids).
    pub(crate) sm_count: u32,
    /// Shared memory per block, without and with opt-in.
    pub(crate) smem_limits: smem::SmemLimits,
    err_words: Mutex<CudaSlice<u64>>,
    err_base: u64,
    launched: AtomicBool,
    slots: Mutex<Vec<Slot>>,
    /// Full source → loaded kernel (single flight per source).
    modules: Mutex<HashMap<String, Cell<Arc<Loaded>>>>,
    hot: std::sync::RwLock<HashMap<HotKey, Arc<Loaded>, BuildHasherDefault<FxHasher>>>,
    /// The graph captures in progress, one per capturing thread (see `capture.rs`).
    pub(crate) capture: capture::CaptureSlot,
    /// Autotuning winners on this device (`tunings.rs`).
    pub(crate) tunings: tunings::Tunings,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({}: {}, {})", self.ordinal, self.name, self.arch)
    }
}

/// CUDA GPUs the driver reports.
pub(crate) fn device_count() -> Result<usize> {
    libs::ensure(libs::Lib::Driver)?;
    nvrtc::guard("CUDA driver", || {
        CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| Error::NoDevice(format!("cuInit/cuDeviceGetCount failed: {}", drv(e))))
    })
}

/// The process-wide devices: `Device::cuda(n)` returns the same one every time.
static DEVICES: LazyLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = LazyLock::new(Default::default);

impl CudaDevice {
    pub(crate) fn get(ordinal: usize) -> Result<Arc<CudaDevice>> {
        // Hold the registry lock while creating, so two threads get the same device.
        let mut devices = lock(&DEVICES);
        if let Some(d) = devices.get(&ordinal) {
            return Ok(d.clone());
        }
        let d = Arc::new(Self::create(ordinal)?);
        devices.insert(ordinal, d.clone());
        Ok(d)
    }

    fn create(ordinal: usize) -> Result<CudaDevice> {
        libs::ensure(libs::Lib::Driver)?;
        nvrtc::guard("CUDA driver", || {
            let count = CudaContext::device_count()
                .map_err(|e| Error::NoDevice(format!("cuInit/cuDeviceGetCount failed: {}", drv(e))))?;
            if count <= 0 {
                return Err(Error::NoDevice("the CUDA driver reports no device".into()));
            }
            if ordinal >= count as usize {
                return Err(Error::NoDevice(format!(
                    "device {ordinal} was asked for but there are {count} (0..{count})"
                )));
            }
            let ctx = CudaContext::new(ordinal).map_err(|e| {
                Error::DriverError(format!("creating a context on device {ordinal}: {}", drv(e)))
            })?;
            let stream = ctx.default_stream();
            Self::from_parts(ctx, stream, false)
        })
    }

    /// A device over the caller's cudarc context and stream (`Device::from_cudarc`).
    pub(crate) fn borrowed(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<CudaDevice> {
        if **stream.context() != *ctx {
            return Err(Error::WrongDevice(format!(
                "Device::from_cudarc: the stream belongs to a context of device {} but the context given is \
                 device {}'s {}",
                stream.context().ordinal(),
                ctx.ordinal(),
                if ctx.cu_ctx() == stream.context().cu_ctx() {
                    "(the same CUcontext)"
                } else {
                    "(another CUcontext)"
                }
            )));
        }
        // Launch and allocate through the stream's own `CudaContext` object, whose event
        // tracking orders the cudarc memory made on it.
        let ctx = stream.context().clone();
        nvrtc::guard("CUDA driver", || Self::from_parts(ctx, stream, true))
    }

    fn from_parts(ctx: Arc<CudaContext>, stream: Arc<CudaStream>, borrowed: bool) -> Result<CudaDevice> {
        // Load NVRTC while the driver works (~100 ms for a new context): a first launch served from
        // the disk cache still needs NVRTC's version for the cache key, and loading the library is
        // most of that launch's cost. `version()` is a OnceLock, so the launch waits for this load
        // instead of starting a second one; errors surface there.
        std::thread::spawn(|| {
            let _ = nvrtc::version();
        });
        ctx.bind_to_thread().map_err(|e| Error::DriverError(format!("binding the context: {}", drv(e))))?;
        let ordinal = ctx.ordinal();
        let (major, minor) = ctx.compute_capability().map_err(|e| Error::DriverError(drv(e)))?;
        let name = ctx.name().map_err(|e| Error::DriverError(drv(e)))?;
        let attr = |a| ctx.attribute(a).map(|v| v.max(1) as u32).map_err(|e| Error::DriverError(drv(e)));
        let max_grid = [
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ];
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let default = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
        let opt_in = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        // A device without opt-in reports 0 (1 after `attr`): its default is its limit.
        let smem_limits = smem::SmemLimits { default, opt_in: opt_in.max(default) };
        let err_words = stream
            .alloc_zeros::<u64>(2 * MAX_SLOTS)
            .map_err(|e| Error::Cuda(format!("allocating the error words: {}", drv(e))))?;
        let (err_base, _guard) = err_words.device_ptr(&stream);
        drop(_guard);
        stream.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
        let target = compile_target(major, minor, std::env::var("FUSE_MMA_SYNC").ok().as_deref());
        Ok(CudaDevice {
            ordinal,
            borrowed,
            name,
            arch: format!("sm_{major}{minor}"),
            tma: target == "sm_90a" && std::env::var("FUSE_TMA").ok().as_deref() != Some("0"),
            target,
            page_align: std::env::var("FUSE_PAGE_ALIGN").ok().as_deref() != Some("0"),
            max_grid,
            sm_count,
            smem_limits,
            err_words: Mutex::new(err_words),
            err_base,
            launched: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
            modules: Mutex::new(HashMap::new()),
            hot: std::sync::RwLock::new(HashMap::default()),
            capture: Default::default(),
            tunings: Default::default(),
            ctx,
            stream,
        })
    }

    /// `"NVIDIA H200, sm_90"`.
    pub(crate) fn description(&self) -> String {
        format!("{}, {}", self.name, self.arch)
    }

    fn slot_for(&self, kernel: &Kernel) -> usize {
        let params: Vec<String> = kernel.params.iter().map(|p| p.name.clone()).collect();
        let mut slots = lock(&self.slots);
        if let Some(i) = slots.iter().position(|s| !s.shared && s.kernel == kernel.name && s.params == params)
        {
            return i;
        }
        if slots.len() < MAX_SLOTS - 1 {
            slots.push(Slot { kernel: kernel.name.clone(), params, shared: false });
            return slots.len() - 1;
        }
        if slots.len() < MAX_SLOTS {
            slots.push(Slot { kernel: String::new(), params: Vec::new(), shared: true });
        }
        let last = MAX_SLOTS - 1;
        let s = &mut slots[last];
        if !s.kernel.split(" or ").any(|k| k == kernel.name) {
            if !s.kernel.is_empty() {
                s.kernel.push_str(" or ");
            }
            s.kernel.push_str(&kernel.name);
        }
        last
    }

    /// Compiles (or takes from the caches) and loads `source`; single flight per source.
    pub(crate) fn load_source(&self, name: &str, kernel: &Kernel, source: &str) -> Result<Arc<Loaded>> {
        single_flight(&self.modules, source.to_owned(), || {
            let cubin = cubin(name, source, &self.target)?;
            let module = nvrtc::guard("cuModuleLoadData", || {
                self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).map_err(|e| {
                    Error::Cuda(format!(
                        "loading the cubin of `{name}` ({}) on device {} failed: {} (a cubin from an NVRTC newer than \
                         the driver can be refused: update the driver or use an NVRTC matching it)",
                        self.target,
                        self.ordinal,
                        drv(e)
                    ))
                })
            })?;
            let func = module.load_function(name).map_err(|e| {
                Error::Cuda(format!("the compiled module has no entry point `{name}`: {}", drv(e)))
            })?;
            let smem = nvrtc::guard("reading the shared memory request", || {
                smem::prepare(&module, &func, &self.stream, self.smem_limits, name)
            })?;
            let path = nvrtc::guard("reading the dot path", || {
                smem::global_u32(&module, &self.stream, name, DOT_PATH_SYMBOL)
            })?;
            // Bits 8 and up: the loads this module copies with TMA.
            let tma = path.map_or(0, |p| p >> 8);
            let path = DotPath::from_symbol(path.map(|p| p & 0xff));
            if path != DotPath::None {
                log::debug!(
                    "fuse: `{name}` ({}): dot on {}, {tma} operand load(s) through TMA",
                    self.target,
                    path.describe()
                );
                record_dot_path(name, (path, tma));
            }
            let slot = self.slot_for(kernel);
            Ok(Arc::new(Loaded { func, err_ptr: self.err_base + 16 * slot as u64, smem }))
        })
    }

    /// The hot path: cached function for `key`, else build the source and load it.
    pub(crate) fn function(
        &self,
        key: Option<HotKey>,
        name: &str,
        kernel: &Kernel,
        make_source: impl FnOnce() -> String,
    ) -> Result<Arc<Loaded>> {
        if let Some(k) = key {
            if let Some(l) = self.hot.read().unwrap_or_else(|p| p.into_inner()).get(&k) {
                return Ok(l.clone());
            }
        }
        let loaded = self.load_source(name, kernel, &make_source())?;
        if let Some(k) = key {
            self.hot.write().unwrap_or_else(|p| p.into_inner()).insert(k, loaded.clone());
        }
        Ok(loaded)
    }

    /// The function for `key` (or `make_source`'s source) if it is already loaded on this device;
    /// never compiles or loads (what a graph capture may call).
    pub(crate) fn loaded_function(
        &self,
        key: Option<HotKey>,
        make_source: &dyn Fn() -> String,
    ) -> Option<Arc<Loaded>> {
        if let Some(k) = key {
            if let Some(l) = self.hot.read().unwrap_or_else(|p| p.into_inner()).get(&k) {
                return Some(l.clone());
            }
        }
        let cell = lock(&self.modules).get(&make_source()).cloned()?;
        cell.get().and_then(|r| r.as_ref().ok().cloned())
    }

    /// Launches with `words`: each C parameter as a little-endian word (user parameters, then the
    /// lengths, the host scalars, the error pointer), already checked against the kernel's parameters, then
    /// `maps` (the kernel's tensor-map parameters, [`tma`]), and `smem_bytes` of dynamic shared
    /// memory (`loaded.smem`'s, which the caller checked).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch(
        &self,
        loaded: &Loaded,
        grid: [u32; 3],
        num_warps: u32,
        smem_bytes: u32,
        words: &mut [u64],
        maps: &mut [cudarc::driver::sys::CUtensorMap],
        capture_stream: Option<cudarc::driver::sys::CUstream>,
    ) -> Result<()> {
        const STACK: usize = 48;
        let mut stack = [std::ptr::null_mut::<c_void>(); STACK];
        let mut heap = Vec::new();
        let params = stack_or_heap(words.len() + maps.len(), &mut stack, &mut heap, std::ptr::null_mut());
        for (p, w) in params.iter_mut().zip(words.iter_mut()) {
            *p = (w as *mut u64).cast();
        }
        for (p, m) in params[words.len()..].iter_mut().zip(maps.iter_mut()) {
            *p = (m as *mut cudarc::driver::sys::CUtensorMap).cast();
        }
        self.ctx.bind_to_thread().map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        let stream = capture_stream.unwrap_or_else(|| self.stream.cu_stream());
        // SAFETY: `launch::launch` checked the arguments against the kernel's parameters (the C
        // signature the emitter writes from them), `words` and `maps` outlive the call, the
        // buffers are live, device-side bounds checks guard every access, and each tensor map in
        // use reaches only elements inside its buffer (`tma::encode` checks it).
        unsafe {
            cudarc::driver::result::launch_kernel(
                loaded.func.cu_function(),
                (grid[0], grid[1], grid[2]),
                (32 * num_warps, 1, 1),
                smem_bytes,
                stream,
                params,
            )
        }
        .map_err(|e| Error::Cuda(format!("launching: {}", drv(e))))?;
        if capture_stream.is_some() {
            return Ok(());
        }
        // Set only once the kernel is queued: a `synchronize` on another thread that clears the
        // flag before this point has not read the error words this kernel may write.
        self.launched.store(true, Ordering::Release);
        Ok(())
    }

    /// The stream this thread's launches are captured on, if this thread is capturing.
    pub(crate) fn capture_stream_of_this_thread(&self) -> Option<cudarc::driver::sys::CUstream> {
        self.capture.stream_of_this_thread()
    }

    /// Records allocations this thread's capture must keep alive, and counts one kernel.
    pub(crate) fn keep_for_capture(&self, keep: impl Iterator<Item = Arc<dyn std::any::Any + Send + Sync>>) {
        self.capture.keep(keep)
    }

    /// Starts capturing this thread's launches on this device ([`capture::CaptureSlot::begin`]).
    pub(crate) fn begin_capture(&self) -> Result<()> {
        self.capture.begin(&self.ctx, || self.description())
    }

    /// Ends the capture this thread began ([`capture::CaptureSlot::end`]).
    pub(crate) fn end_capture(&self) -> Result<capture::Captured> {
        self.capture.end(&self.ctx)
    }

    /// Marks that kernels were queued (so the next `synchronize` reads the error words).
    pub(crate) fn mark_launched(&self) {
        self.launched.store(true, Ordering::Release);
    }

    /// Waits for all work and reports the first out-of-bounds access recorded since the last check.
    /// The error words are per device: with several threads launching on one device, whichever
    /// synchronises first reports (and clears) what any of their kernels recorded.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.capture.refuse_on_this_thread("synchronize or copy from the device")?;
        let dirty = self.launched.swap(false, Ordering::AcqRel);
        self.stream.synchronize().map_err(|e| {
            Error::Cuda(format!(
                "a kernel or copy on device {} failed: {} (after errors such as an illegal address the CUDA \
                 context is unusable; restart the process)",
                self.ordinal,
                drv(e)
            ))
        })?;
        if !dirty {
            return Ok(());
        }
        let used = lock(&self.slots).len().clamp(1, MAX_SLOTS);
        let mut words = vec![0u64; 2 * used];
        let mut err = lock(&self.err_words);
        self.stream
            .memcpy_dtoh(&err.slice(0..2 * used), &mut words)
            .map_err(|e| Error::Cuda(format!("reading the error words: {}", drv(e))))?;
        self.stream.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
        let Some(slot) = (0..used).find(|&i| words[2 * i] != 0) else { return Ok(()) };
        self.stream
            .memset_zeros(&mut *err)
            .map_err(|e| Error::Cuda(format!("clearing the error words: {}", drv(e))))?;
        self.stream.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
        drop(err);
        let (param_index, index) = (words[2 * slot] - 1, words[2 * slot + 1] as i64);
        let slots = lock(&self.slots);
        let (kernel, param) = match slots.get(slot) {
            Some(s) if !s.shared => (
                s.kernel.clone(),
                s.params
                    .get(param_index as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("parameter #{param_index}")),
            ),
            Some(s) => (format!("one of {}", s.kernel), format!("parameter #{param_index}")),
            None => ("(unknown)".into(), format!("parameter #{param_index}")),
        };
        Err(Error::OutOfBounds { kernel, param, index, len: None, program: None })
    }

    pub(crate) fn time_ms(&self, iters: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        let ev = |what| {
            self.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::Cuda(format!("{what}: {}", drv(e))))
        };
        let (start, end) = (ev("creating an event")?, ev("creating an event")?);
        f()?;
        start.record(&self.stream).map_err(|e| Error::Cuda(drv(e)))?;
        for _ in 0..iters {
            f()?;
        }
        end.record(&self.stream).map_err(|e| Error::Cuda(drv(e)))?;
        end.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
        let ms = start.elapsed_ms(&end).map_err(|e| Error::Cuda(drv(e)))?;
        self.synchronize()?;
        Ok(f64::from(ms) / iters as f64)
    }

    /// Median over `reps` of the device time of one `f()`, each preceded by `setup()` outside the
    /// timed region (how `triton.testing.do_bench` measures, L2 flush included when `setup` flushes).
    pub(crate) fn median_ms(
        &self,
        reps: usize,
        setup: &mut dyn FnMut() -> Result<()>,
        f: &mut dyn FnMut() -> Result<()>,
    ) -> Result<f64> {
        let ev = || {
            self.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::Cuda(format!("creating an event: {}", drv(e))))
        };
        let pairs = (0..reps).map(|_| Ok((ev()?, ev()?))).collect::<Result<Vec<_>>>()?;
        f()?;
        for (start, end) in &pairs {
            setup()?;
            start.record(&self.stream).map_err(|e| Error::Cuda(drv(e)))?;
            f()?;
            end.record(&self.stream).map_err(|e| Error::Cuda(drv(e)))?;
        }
        self.synchronize()?;
        let mut times = pairs
            .iter()
            .map(|(s, e)| s.elapsed_ms(e).map(f64::from).map_err(|e| Error::Cuda(drv(e))))
            .collect::<Result<Vec<_>>>()?;
        Ok(median(&mut times))
    }
}

/// The target NVRTC compiles for on a device of compute capability `major.minor`: Hopper's
/// `sm_90a`, whose `wgmma` the tensor-core `dot` uses, unless `FUSE_MMA_SYNC=1` (then `sm_90`, and
/// `dot` takes `mma.sync`, the path of sm_80 and sm_89); `sm_XY` otherwise.
pub(crate) fn compile_target(major: i32, minor: i32, mma_sync: Option<&str>) -> String {
    if (major, minor) == (9, 0) && mma_sync != Some("1") {
        "sm_90a".to_string()
    } else {
        format!("sm_{major}{minor}")
    }
}

/// The global an emitted module defines to say which tensor-core path its `dot`s took.
const DOT_PATH_SYMBOL: &str = "fuse_dot_path";

/// Which tensor-core instructions a loaded kernel's `dot`s run on (decided when it is compiled,
/// from the target and the block's shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotPath {
    /// No tensor-core `dot` (or a module from before the symbol).
    None,
    /// `mma.sync` (sm_80 and later).
    MmaSync,
    /// Hopper's warpgroup MMA, `wgmma.mma_async` (sm_90a).
    Wgmma,
    /// Some `dot`s on `wgmma`, others on `mma.sync` (attention's `p v`, whose A is in registers).
    Mixed,
}

impl DotPath {
    fn from_symbol(v: Option<u32>) -> DotPath {
        match v {
            Some(3) => DotPath::Mixed,
            Some(2) => DotPath::Wgmma,
            Some(1) => DotPath::MmaSync,
            _ => DotPath::None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            DotPath::None => "no tensor cores",
            DotPath::MmaSync => "mma.sync",
            DotPath::Wgmma => "wgmma (warpgroup MMA)",
            DotPath::Mixed => "wgmma and mma.sync",
        }
    }
}

static DOT_PATHS: Mutex<Vec<(String, (DotPath, u32))>> = Mutex::new(Vec::new());

fn record_dot_path(kernel: &str, path: (DotPath, u32)) {
    let mut paths = DOT_PATHS.lock().unwrap_or_else(|p| p.into_inner());
    match paths.iter_mut().find(|(k, _)| k == kernel) {
        Some(entry) => entry.1 = path,
        None => paths.push((kernel.to_string(), path)),
    }
}

/// The tensor-core path of the last module of kernel `name` this process loaded, if it has a
/// tensor-core `dot` (what `FUSE_MMA_SYNC` and the block shape decided).
pub fn dot_path(name: &str) -> Option<DotPath> {
    let paths = DOT_PATHS.lock().unwrap_or_else(|p| p.into_inner());
    paths.iter().find(|(k, _)| k == name).map(|&(_, (p, _))| p)
}

/// How many of the `dot` operand loads of the last module of kernel `name` this process loaded
/// are copied with TMA (Hopper's bulk tensor copies; the rest use `cp.async`), if it has a
/// tensor-core `dot`: what the launch's buffers, strides and bounds allowed, and `FUSE_TMA`.
pub fn tma_loads(name: &str) -> Option<u32> {
    let paths = DOT_PATHS.lock().unwrap_or_else(|p| p.into_inner());
    paths.iter().find(|(k, _)| k == name).map(|&(_, (_, n))| n)
}

/// The process-wide in-memory cubin cache, keyed by (full source, arch); the options are fixed.
type CubinMap = HashMap<(String, String), Cell<Arc<[u8]>>>;
static CUBINS: LazyLock<Mutex<CubinMap>> = LazyLock::new(Default::default);

/// The process's on-disk cache ([`DiskCache::from_env`], read once).
pub(crate) fn disk_cache() -> Option<&'static DiskCache> {
    static DISK: OnceLock<Option<DiskCache>> = OnceLock::new();
    DISK.get_or_init(DiskCache::from_env).as_ref()
}

/// The cubin for `source` on `arch`: from memory, else from disk, else NVRTC (then stored on disk).
/// Threads asking for the same one wait for a single compile.
pub(crate) fn cubin(kernel: &str, source: &str, arch: &str) -> Result<Arc<[u8]>> {
    nvrtc::validate_arch(arch)?;
    single_flight(&CUBINS, (source.to_owned(), arch.to_owned()), || {
        let version = nvrtc::version()?;
        let disk = disk_cache().map(|d| (d, DiskCache::key(source, arch, &nvrtc::options(arch), version)));
        if let Some((d, key)) = &disk {
            if let Some(bytes) = d.load(key) {
                log::debug!("fuse: `{kernel}` for {arch} from the disk cache");
                return Ok(bytes.into());
            }
        }
        let t = std::time::Instant::now();
        let bytes = nvrtc::compile_cubin(kernel, source, arch)?;
        log::debug!("fuse: compiled `{kernel}` for {arch} in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        if let Some((d, key)) = &disk {
            d.store(key, &bytes);
        }
        Ok(bytes.into())
    })
}

#[cfg(test)]
mod single_flight_tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_failure_is_retried_a_success_is_kept_and_concurrent_callers_share_one_run() {
        let map: Mutex<HashMap<u32, Cell<u32>>> = Mutex::new(HashMap::new());
        let runs = AtomicUsize::new(0);
        let fail = || {
            runs.fetch_add(1, Ordering::SeqCst);
            Err(Error::Cuda("transient".into()))
        };
        assert!(single_flight(&map, 1, fail).is_err());
        assert!(single_flight(&map, 1, fail).is_err());
        assert_eq!(runs.load(Ordering::SeqCst), 2, "the failure was not kept");
        let ok = || {
            runs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            Ok(7)
        };
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| assert_eq!(single_flight(&map, 1, ok).unwrap(), 7));
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 3, "eight callers, one run");
        assert_eq!(single_flight(&map, 1, fail).unwrap(), 7, "the success is kept");
    }
}
