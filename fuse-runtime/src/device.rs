//! [`Device`] (the CPU interpreter or one CUDA GPU) and [`Buffer`] (typed memory on a device).
//!
//! Layer: above the back ends; imports `cuda` (a GPU device is a `CudaDevice`), `element`,
//! `error` and `util`. The arguments made from buffers (`args.rs`, `memory.rs`) sit above it.

use crate::cuda::CudaDevice;
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::{drv, Error, Result};
use crate::util::median;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// Where kernels run and buffers live. Cheap to clone; `Send + Sync`.
///
/// `Device::cuda(n)` returns the same device (context, stream, caches) every time it is called
/// with the same `n`; [`Device::from_cudarc`] makes one over the caller's cudarc context and
/// stream. Two devices are equal when they are the same one (clones of one `Device`).
#[derive(Clone)]
pub struct Device {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Cpu,
    Cuda(Arc<CudaDevice>),
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        match (&self.inner, &other.inner) {
            (Inner::Cpu, Inner::Cpu) => true,
            (Inner::Cuda(a), Inner::Cuda(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
impl Eq for Device {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.description())
    }
}

impl Device {
    /// The CPU interpreter (multi-threaded with rayon).
    pub fn cpu() -> Device {
        Device { inner: Inner::Cpu }
    }

    /// CUDA GPU number `ordinal`. Errors (never panics) when the driver library is missing
    /// ([`Error::LibraryNotFound`]), there is no such device ([`Error::NoDevice`]) or the driver
    /// fails ([`Error::DriverError`]).
    pub fn cuda(ordinal: usize) -> Result<Device> {
        CudaDevice::get(ordinal).map(|d| Device { inner: Inner::Cuda(d) })
    }

    /// A GPU device that launches, allocates and copies on the caller's cudarc `stream` (of
    /// context `ctx`), so fuse's work is ordered with the caller's other work on that stream by
    /// the stream itself. Kernels compiled for the GPU's architecture are shared with every other
    /// device of that architecture; each device loads its own modules, so make the device once
    /// and clone it (cheap) rather than calling this per launch.
    ///
    /// cudarc memory (`CudaSlice`, `CudaView`, `CudaViewMut`) of the same context can be passed
    /// to kernels launched here; cudarc's event tracking (when its context has several streams)
    /// orders the launch with the memory's other users, as a cudarc launch would.
    ///
    /// ```ignore
    /// let ctx = cudarc::driver::CudaContext::new(0)?;
    /// let stream = ctx.new_stream()?;
    /// let dev = fuse::Device::from_cudarc(ctx, stream.clone())?;
    /// let x = stream.clone_htod(&host)?;               // a CudaSlice<f32>
    /// let mut y = stream.alloc_zeros::<f32>(host.len())?;
    /// k::launch::<1024>(&dev, grid, &x, &mut y, n)?;    // queued on `stream`
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongDevice`] when `stream` does not belong to `ctx`; [`Error::DriverError`] when
    /// the driver cannot describe the device.
    pub fn from_cudarc(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Device> {
        CudaDevice::borrowed(ctx, stream).map(|d| Device { inner: Inner::Cuda(Arc::new(d)) })
    }

    /// How many CUDA GPUs the driver reports (each is `Device::cuda(i)` for `i` below it).
    ///
    /// # Errors
    /// As [`Device::cuda`]: [`Error::LibraryNotFound`] without the driver library,
    /// [`Error::NoDevice`] when the driver cannot be initialised.
    pub fn cuda_count() -> Result<usize> {
        crate::cuda::device_count()
    }

    /// The cudarc stream this device launches on (`None` on the CPU): order your own cudarc work
    /// with fuse's through it, or allocate cudarc memory on it to pass to kernels.
    pub fn cudarc_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda_inner().map(|d| &d.stream)
    }

    /// The cudarc context of this device (`None` on the CPU).
    pub fn cudarc_context(&self) -> Option<&Arc<CudaContext>> {
        self.cuda_inner().map(|d| &d.ctx)
    }

    /// GPU 0 if it is usable (driver, device and NVRTC all present), else the CPU together with the
    /// reason no GPU was used. `FUSE_DEVICE=cpu` forces the CPU.
    pub fn best() -> (Device, Option<String>) {
        if std::env::var("FUSE_DEVICE").is_ok_and(|v| v.eq_ignore_ascii_case("cpu")) {
            return (Device::cpu(), Some("FUSE_DEVICE=cpu".into()));
        }
        let short = |e: Error| match e {
            Error::LibraryNotFound { library, searched, hint } => {
                format!("{library} was not found ({} places searched). {hint}", searched.len())
            }
            other => other.to_string(),
        };
        match Device::cuda(0) {
            Ok(d) => match crate::cuda::nvrtc::version() {
                Ok(_) => (d, None),
                Err(e) => (
                    Device::cpu(),
                    Some(format!("{} is present but cannot compile kernels: {}", d.description(), short(e))),
                ),
            },
            Err(e) => (Device::cpu(), Some(short(e))),
        }
    }

    /// Whether this is a CUDA GPU.
    pub fn is_cuda(&self) -> bool {
        matches!(self.inner, Inner::Cuda(_))
    }

    /// Whether this is the CPU interpreter.
    pub fn is_cpu(&self) -> bool {
        matches!(self.inner, Inner::Cpu)
    }

    /// `"CPU (16 threads)"` or `"NVIDIA H100 80GB HBM3, sm_90"`.
    pub fn description(&self) -> String {
        match &self.inner {
            Inner::Cpu => format!("CPU ({} threads)", rayon::current_num_threads()),
            Inner::Cuda(d) if d.borrowed => {
                format!("{} (device {}, caller's stream)", d.description(), d.ordinal)
            }
            Inner::Cuda(d) => d.description(),
        }
    }

    /// The GPU's architecture, e.g. `"sm_90"`; `None` on the CPU.
    pub fn arch(&self) -> Option<String> {
        self.cuda_inner().map(|d| d.arch.clone())
    }

    /// The CUDA device ordinal; `None` on the CPU.
    pub fn ordinal(&self) -> Option<usize> {
        self.cuda_inner().map(|d| d.ordinal)
    }

    pub(crate) fn cuda_inner(&self) -> Option<&Arc<CudaDevice>> {
        match &self.inner {
            Inner::Cuda(d) => Some(d),
            Inner::Cpu => None,
        }
    }

    /// A new buffer holding a copy of `host`.
    ///
    /// # Errors
    /// [`Error::Cuda`] when the allocation or the copy fails; [`Error::InvalidArgument`] for a
    /// size no allocation can hold, or one the host cannot give on the CPU.
    pub fn upload<T: Element>(&self, host: &[T]) -> Result<Buffer<T>> {
        let storage = match &self.inner {
            Inner::Cpu => {
                let mut v = host_vec::<T>(host.len(), "on the CPU")?;
                v.extend_from_slice(host);
                Storage::Cpu(v)
            }
            Inner::Cuda(d) => {
                let (slice, ptr) = alloc::<T>(d, host.len())?;
                if !host.is_empty() {
                    d.ctx.bind_to_thread().map_err(|e| Error::Cuda(drv(e)))?;
                    // SAFETY: `ptr` addresses the new allocation's `host.len()` elements; the copy
                    // is queued on the device's stream before any use of the buffer. `host` is
                    // pageable memory, which the driver stages before returning (what cudarc's
                    // own `memcpy_htod` of a slice relies on, and `copy_from_host` below).
                    unsafe { cudarc::driver::result::memcpy_htod_async(ptr, host, d.stream.cu_stream()) }
                        .map_err(|e| {
                            Error::Cuda(format!("copying {} elements to the GPU: {}", host.len(), drv(e)))
                        })?;
                }
                Storage::Cuda { slice: Arc::new(slice), ptr }
            }
        };
        Ok(Buffer { device: self.clone(), len: host.len(), storage })
    }

    /// A new buffer of `len` zeros.
    ///
    /// # Errors
    /// [`Error::Cuda`] when a GPU allocation fails; [`Error::InvalidArgument`] for a size no
    /// allocation can hold, or one the host cannot give on the CPU.
    pub fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let storage = match &self.inner {
            Inner::Cpu => {
                let mut v = host_vec::<T>(len, "on the CPU")?;
                v.resize(len, T::default());
                Storage::Cpu(v)
            }
            Inner::Cuda(d) => {
                let (slice, ptr) = alloc::<T>(d, len)?;
                Storage::Cuda { slice: Arc::new(slice), ptr }
            }
        };
        Ok(Buffer { device: self.clone(), len, storage })
    }

    /// Waits for all work on the device and reports the first out-of-bounds access recorded by a
    /// kernel since the last check ([`Error::OutOfBounds`]). Immediate on the CPU (the interpreter
    /// reports out-of-bounds accesses at the launch).
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            Inner::Cpu => Ok(()),
            Inner::Cuda(d) => d.synchronize(),
        }
    }

    /// Mean milliseconds per call of `f` over `iters` calls, after one warm-up call: CUDA events
    /// around the calls on a GPU (device time of the queued work), `Instant` on the CPU.
    pub fn time_ms(&self, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        if iters == 0 {
            return Err(Error::InvalidArgument("time_ms needs at least 1 iteration, got 0".into()));
        }
        match &self.inner {
            Inner::Cpu => {
                f()?;
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    f()?;
                }
                Ok(t.elapsed().as_secs_f64() * 1e3 / iters as f64)
            }
            Inner::Cuda(d) => d.time_ms(iters, &mut f),
        }
    }
}

impl Device {
    /// Median milliseconds of one `f()` over `reps` runs, each preceded by an untimed `setup()`
    /// (e.g. an L2 flush): CUDA events around each call on a GPU, `Instant` on the CPU. This is how
    /// `triton.testing.do_bench` measures, so the two can be compared side by side.
    pub fn median_ms(
        &self,
        reps: usize,
        mut setup: impl FnMut() -> Result<()>,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<f64> {
        if reps == 0 {
            return Err(Error::InvalidArgument("median_ms needs at least 1 repetition, got 0".into()));
        }
        match &self.inner {
            Inner::Cpu => {
                f()?;
                let mut times = Vec::with_capacity(reps);
                for _ in 0..reps {
                    setup()?;
                    let t = std::time::Instant::now();
                    f()?;
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                }
                Ok(median(&mut times))
            }
            Inner::Cuda(d) => d.median_ms(reps, &mut setup, &mut f),
        }
    }

    /// `triton.testing.do_bench(fn, warmup, rep, return_mode="median")` with `setup` as its L2
    /// flush: an untimed `setup(); f()`, an estimate from five more such pairs, then `warmup_ms`
    /// worth of back-to-back `f()` calls, then (after one more untimed `f()`) the median of
    /// `rep_ms` worth of calls, each timed alone after an untimed `setup()`; at most 20,000
    /// warm-up or timed calls. The schedule of Triton's own numbers.
    pub fn do_bench_ms(
        &self,
        warmup_ms: f64,
        rep_ms: f64,
        mut setup: impl FnMut() -> Result<()>,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<f64> {
        const ESTIMATE_CALLS: usize = 5;
        let estimate_ms = self.time_ms(ESTIMATE_CALLS, || {
            setup()?;
            f()
        })?;
        let (warmups, reps) = do_bench_counts(estimate_ms, warmup_ms, rep_ms);
        for _ in 0..warmups {
            f()?;
        }
        self.median_ms(reps, setup, f)
    }
}

/// `triton.testing.do_bench`'s call counts for a call estimated at `estimate_ms` (its setup
/// included), as [`Device::do_bench_ms`] takes them: `(warm-up calls, timed calls)`, each
/// `max(1, budget / estimate)` rounded down, and at most 20,000 (a call too short to measure
/// would otherwise ask for millions).
pub fn do_bench_counts(estimate_ms: f64, warmup_ms: f64, rep_ms: f64) -> (usize, usize) {
    let count = |budget_ms: f64| {
        let n = budget_ms / estimate_ms;
        if n.is_nan() || n < 1.0 {
            // A NaN budget or estimate asks for nothing; a zero estimate for as many as allowed.
            if estimate_ms == 0.0 && budget_ms > 0.0 {
                MAX_BENCH_CALLS
            } else {
                1
            }
        } else {
            (n as usize).min(MAX_BENCH_CALLS)
        }
    };
    (count(warmup_ms), count(rep_ms))
}

/// The most warm-up or timed calls `Device::do_bench_ms` makes.
const MAX_BENCH_CALLS: usize = 20_000;

/// An empty host vector with room for `len` elements: a size the host cannot give is an
/// [`Error::InvalidArgument`] naming `place`, where `vec!` or `to_vec` would panic (a size past
/// `isize::MAX` bytes) or abort the process (memory exhausted).
fn host_vec<T: Element>(len: usize, place: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|e| {
        Error::InvalidArgument(format!("allocating {len} elements of {} {place}: {e}", T::DTYPE))
    })?;
    Ok(v)
}

/// A new zeroed GPU buffer of `len` elements. One of `PAGE_ALIGNED_FROM` bytes or more starts at
/// a multiple of `page_alignment(bytes)`, so it spans no more 2 MiB pages than it must: the
/// stream-ordered pool hands out addresses 16 KiB or more into a page, and a buffer that starts
/// inside a page spans one more of them, which slows short kernels that stream it (PyTorch's
/// caching allocator puts large tensors at page starts). The cost is one whole
/// alignment of padding behind each large buffer (a 1 or 2 MiB buffer takes twice its size);
/// `FUSE_PAGE_ALIGN=0` turns it off. Returns the allocation and the address of the buffer's
/// first element in it.
fn alloc<T: Element>(d: &CudaDevice, len: usize) -> Result<(CudaSlice<T>, u64)> {
    d.capture.refuse_on_this_thread("allocate device memory")?;
    // Zero-length allocations are refused by the driver: keep one element behind empty buffers.
    let n = len.max(1);
    let size = std::mem::size_of::<T>();
    // Sizes are checked here, in bytes and within `isize::MAX` as for host memory: cudarc
    // multiplies the element count by the element size unchecked.
    let within_isize_max = |b: Option<usize>| b.filter(|&b| b <= isize::MAX as usize);
    let too_large = || {
        Error::InvalidArgument(format!(
            "allocating {len} elements of {} on device {}: more bytes than an allocation can hold",
            T::DTYPE,
            d.ordinal
        ))
    };
    let bytes = within_isize_max(n.checked_mul(size)).ok_or_else(too_large)?;
    let align = if d.page_align { page_alignment(bytes) } else { 0 };
    // `align` is 0 or a power of two of at least 1 MiB: a whole number of elements.
    let padded = within_isize_max(bytes.checked_add(align)).ok_or_else(too_large)? / size;
    let slice = d.stream.alloc_zeros::<T>(padded).map_err(|e| {
        let padding =
            if align == 0 { String::new() } else { format!(" (+{align} to start on a page boundary)") };
        Error::Cuda(format!("allocating {bytes} bytes{padding} on device {}: {}", d.ordinal, drv(e)))
    })?;
    let (base, guard) = slice.device_ptr(&d.stream);
    drop(guard);
    // `base` is element-aligned, so this is at most `align - size` bytes past it: inside the
    // padding.
    let ptr = if align == 0 { base } else { base.next_multiple_of(align as u64) };
    Ok((slice, ptr))
}

/// Buffers of this many bytes or more start on a page boundary ([`page_alignment`]).
const PAGE_ALIGNED_FROM: usize = 1 << 20;
/// The GPU's large page.
const LARGE_PAGE: usize = 2 << 20;

/// Where a buffer of `bytes` starts: a multiple of the largest power of two not above `bytes`,
/// at most the 2 MiB page, for buffers of at least `PAGE_ALIGNED_FROM` bytes; `0` (wherever the
/// pool puts it) for smaller ones.
fn page_alignment(bytes: usize) -> usize {
    if bytes < PAGE_ALIGNED_FROM {
        0
    } else {
        (1usize << bytes.ilog2()).min(LARGE_PAGE)
    }
}

/// A buffer's memory. On a GPU the allocation is shared with the graphs that launched kernels on
/// it (so a graph's replay never reaches freed memory); every access goes through the device's
/// one stream, which orders them.
pub(crate) enum Storage<T: Element> {
    Cpu(Vec<T>),
    Cuda { slice: Arc<CudaSlice<T>>, ptr: u64 },
}

/// `len` elements of `T` on a [`Device`].
pub struct Buffer<T: Element> {
    pub(crate) device: Device,
    pub(crate) len: usize,
    pub(crate) storage: Storage<T>,
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer<{}>(len {}, on {})", T::DTYPE, self.len, self.device.description())
    }
}

impl<T: Element> Buffer<T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The element type.
    pub fn dtype(&self) -> fuse_ir::DType {
        T::DTYPE
    }

    /// Copies the contents to the host. On a GPU this waits for all queued work first and reports
    /// an out-of-bounds access recorded since the last check (see [`Device::synchronize`]).
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for such an access, [`Error::Cuda`] when a kernel or the copy
    /// failed, [`Error::InvalidArgument`] for a copy the host has no memory for.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.range_to_vec(0, self.len)
    }

    /// Elements `start..start + len` (inside the buffer) copied to the host, as [`Buffer::to_vec`].
    pub(crate) fn range_to_vec(&self, start: usize, len: usize) -> Result<Vec<T>> {
        match &self.storage {
            Storage::Cpu(v) => {
                let mut out = host_vec::<T>(len, "on the host")?;
                out.extend_from_slice(&v[start..start + len]);
                Ok(out)
            }
            Storage::Cuda { ptr, .. } => {
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.synchronize()?;
                // The copy fills the reserved capacity directly: zeroing it first would be one
                // more pass over host memory for every read back.
                let mut out = host_vec::<T>(len, "on the host")?;
                if len > 0 {
                    d.ctx.bind_to_thread().map_err(|e| Error::Cuda(drv(e)))?;
                    let size = std::mem::size_of::<T>();
                    let src = ptr + (start * size) as u64;
                    // SAFETY: `start..start + len` lies inside this buffer (the caller's
                    // contract), so `src` addresses `len` elements of it; `out` has room for `len`
                    // elements and outlives the copy, which the stream synchronisation below
                    // waits for before the elements are marked initialised.
                    unsafe {
                        cudarc::driver::sys::cuMemcpyDtoHAsync_v2(
                            out.as_mut_ptr().cast(),
                            src,
                            len * size,
                            d.stream.cu_stream(),
                        )
                    }
                    .result()
                    .map_err(|e| Error::Cuda(format!("copying {len} elements from the GPU: {}", drv(e))))?;
                    d.stream.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
                    // SAFETY: the copy above wrote all `len` elements (any bit pattern is a valid
                    // `Element`: plain integers and floats) and has completed.
                    unsafe { out.set_len(len) };
                }
                Ok(out)
            }
        }
    }

    /// Overwrites the contents with `host`, which must have exactly [`Buffer::len`] elements.
    pub fn copy_from_host(&mut self, host: &[T]) -> Result<()> {
        if host.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "copy_from_host: the buffer holds {} elements of {} but {} were given",
                self.len,
                T::DTYPE,
                host.len()
            )));
        }
        match &mut self.storage {
            Storage::Cpu(v) => {
                v.copy_from_slice(host);
                Ok(())
            }
            Storage::Cuda { ptr, .. } => {
                if host.is_empty() {
                    return Ok(());
                }
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.capture.refuse_on_this_thread("copy to the device")?;
                d.ctx.bind_to_thread().map_err(|e| Error::Cuda(drv(e)))?;
                // SAFETY: `ptr` addresses this buffer's `len` elements, which `host` matches in
                // length; the copy is queued on the device's stream, behind every use of the
                // buffer, and reads `host` before returning (pageable memory is staged).
                unsafe { cudarc::driver::result::memcpy_htod_async(*ptr, host, d.stream.cu_stream()) }
                    .map_err(|e| {
                        Error::Cuda(format!("copying {} elements to the GPU: {}", host.len(), drv(e)))
                    })
            }
        }
    }

    /// Overwrites the contents with `src`'s, on the device (no host round trip). Both buffers
    /// must live on the same device and have the same length.
    pub fn copy_from(&mut self, src: &Buffer<T>) -> Result<()> {
        if src.len != self.len {
            return Err(Error::InvalidArgument(format!(
                "copy_from: the destination holds {} elements of {} but the source {}",
                self.len,
                T::DTYPE,
                src.len
            )));
        }
        if src.device != self.device {
            return Err(Error::WrongDevice(format!(
                "copy_from: the source is on {} but the destination on {}",
                src.device.description(),
                self.device.description()
            )));
        }
        match (&mut self.storage, &src.storage) {
            (Storage::Cpu(dst), Storage::Cpu(s)) => {
                dst.copy_from_slice(s);
                Ok(())
            }
            (Storage::Cuda { ptr: dst, .. }, Storage::Cuda { ptr: src, .. }) => {
                if self.len == 0 {
                    return Ok(());
                }
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.capture.refuse_on_this_thread("copy on the device")?;
                d.ctx.bind_to_thread().map_err(|e| Error::Cuda(drv(e)))?;
                // SAFETY: both addresses hold `len` elements of `T` (checked above) in two distinct
                // buffers (`&mut self` and `&src`); the copy is ordered on the device's stream.
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        *dst,
                        *src,
                        self.len * std::mem::size_of::<T>(),
                        d.stream.cu_stream(),
                    )
                }
                .map_err(|e| Error::Cuda(format!("copying {} elements on the GPU: {}", self.len, drv(e))))
            }
            _ => Err(Error::WrongDevice("copy_from: buffers on different kinds of device".into())),
        }
    }

    /// The elements, for a buffer on the CPU; `None` on a GPU.
    pub fn as_host_slice(&self) -> Option<&[T]> {
        match &self.storage {
            Storage::Cpu(v) => Some(v),
            Storage::Cuda { .. } => None,
        }
    }

    /// The elements' native bytes, for a buffer on the CPU (what the interpreter reads).
    pub fn as_host_bytes(&self) -> Option<&[u8]> {
        self.as_host_slice().map(as_bytes)
    }

    /// The elements' native bytes, mutably, for a buffer on the CPU (what the interpreter writes).
    pub fn as_host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.storage {
            Storage::Cpu(v) => Some(as_bytes_mut(v)),
            Storage::Cuda { .. } => None,
        }
    }

    /// The raw CUDA device address (`CUdeviceptr`), for interop; `None` on the CPU.
    pub fn cuda_device_ptr(&self) -> Option<u64> {
        match &self.storage {
            Storage::Cuda { ptr, .. } => Some(*ptr),
            Storage::Cpu(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn do_bench_counts_follow_triton() {
        // do_bench: n = max(1, int(budget / estimate)).
        assert_eq!(do_bench_counts(0.07, 25.0, 100.0), (357, 1428));
        assert_eq!(do_bench_counts(30.0, 25.0, 100.0), (1, 3));
        assert_eq!(do_bench_counts(1e-6, 25.0, 100.0), (MAX_BENCH_CALLS, MAX_BENCH_CALLS));
        assert_eq!(do_bench_counts(0.0, 25.0, 100.0), (MAX_BENCH_CALLS, MAX_BENCH_CALLS));
        assert_eq!(do_bench_counts(f64::NAN, 25.0, 100.0), (1, 1));
        assert_eq!(do_bench_counts(1.0, 0.0, f64::INFINITY), (1, MAX_BENCH_CALLS));
    }

    #[test]
    fn do_bench_on_the_cpu_runs_setup_before_every_timed_call() {
        let dev = Device::cpu();
        let (mut setups, mut calls) = (0usize, 0usize);
        let ms = dev
            .do_bench_ms(
                0.0,
                0.0,
                || {
                    setups += 1;
                    Ok(())
                },
                || {
                    calls += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert!(ms >= 0.0 && ms.is_finite(), "{ms}");
        // estimate: 1 + 5 pairs; warm-up: 1 call; timed: 1 call after one untimed call.
        assert_eq!(setups, 6 + 1);
        assert_eq!(calls, 6 + 1 + 2);
    }

    #[test]
    fn impossible_cpu_buffers_are_errors() {
        let e = Device::cpu().zeros::<f32>(usize::MAX / 2).unwrap_err();
        assert!(e.to_string().contains("elements of f32 on the CPU"), "{e}");
        // Uploads and reads back to the host reserve through the same check (only the impossible
        // size is testable here; running out of memory takes the same path).
        let e = host_vec::<f32>(usize::MAX / 2, "on the host").unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("f32 on the host"), "{e}");
        assert!(host_vec::<f32>(3, "on the host").unwrap().capacity() >= 3);
    }

    #[test]
    fn large_buffers_start_on_page_boundaries_small_ones_anywhere() {
        assert_eq!(page_alignment(0), 0);
        assert_eq!(page_alignment((1 << 20) - 1), 0);
        assert_eq!(page_alignment(1 << 20), 1 << 20);
        assert_eq!(page_alignment(3 << 19), 1 << 20); // 1.5 MiB: within one 2 MiB page
        assert_eq!(page_alignment(2 << 20), 2 << 20);
        assert_eq!(page_alignment(usize::MAX), 2 << 20);
    }
}
