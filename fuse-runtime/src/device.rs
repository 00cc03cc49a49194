//! [`Device`] (the CPU interpreter or one CUDA GPU) and [`Buffer`] (typed memory on a device).

use crate::cuda::{drv, CudaDevice};
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::Arc;

/// Where kernels run and buffers live. Cheap to clone; `Send + Sync`.
///
/// `Device::cuda(n)` returns the same device (context, stream, caches) every time it is called
/// with the same `n`.
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

    pub fn is_cuda(&self) -> bool {
        matches!(self.inner, Inner::Cuda(_))
    }

    pub fn is_cpu(&self) -> bool {
        matches!(self.inner, Inner::Cpu)
    }

    /// `"CPU (16 threads)"` or `"NVIDIA H100 80GB HBM3, sm_90"`.
    pub fn description(&self) -> String {
        match &self.inner {
            Inner::Cpu => format!("CPU ({} threads)", rayon::current_num_threads()),
            Inner::Cuda(d) => format!("{}, {}", d.name, d.arch),
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
    pub fn upload<T: Element>(&self, host: &[T]) -> Result<Buffer<T>> {
        let storage = match &self.inner {
            Inner::Cpu => Storage::Cpu(host.to_vec()),
            Inner::Cuda(d) => {
                let mut slice = alloc::<T>(d, host.len())?;
                if !host.is_empty() {
                    d.stream.memcpy_htod(host, &mut slice).map_err(|e| {
                        Error::Cuda(format!("copying {} elements to the GPU: {}", host.len(), drv(e)))
                    })?;
                }
                cuda_storage(d, slice)
            }
        };
        Ok(Buffer { device: self.clone(), len: host.len(), storage })
    }

    /// A new buffer of `len` zeros.
    pub fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let storage = match &self.inner {
            Inner::Cpu => Storage::Cpu(vec![T::default(); len]),
            Inner::Cuda(d) => cuda_storage(d, alloc::<T>(d, len)?),
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
                times.sort_by(f64::total_cmp);
                Ok(times[reps / 2])
            }
            Inner::Cuda(d) => d.median_ms(reps, &mut setup, &mut f),
        }
    }
}

fn alloc<T: Element>(d: &CudaDevice, len: usize) -> Result<CudaSlice<T>> {
    // Zero-length allocations are refused by the driver: keep one element behind empty buffers.
    let n = len.max(1);
    d.stream.alloc_zeros::<T>(n).map_err(|e| {
        Error::Cuda(format!(
            "allocating {} bytes on device {}: {}",
            n.saturating_mul(std::mem::size_of::<T>()),
            d.ordinal,
            drv(e)
        ))
    })
}

fn cuda_storage<T: Element>(d: &CudaDevice, slice: CudaSlice<T>) -> Storage<T> {
    let (ptr, guard) = slice.device_ptr(&d.stream);
    drop(guard);
    Storage::Cuda { slice, ptr }
}

pub(crate) enum Storage<T: Element> {
    Cpu(Vec<T>),
    Cuda { slice: CudaSlice<T>, ptr: u64 },
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
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> fuse_ir::DType {
        T::DTYPE
    }

    /// Copies the contents to the host. On a GPU this waits for all queued work first and reports
    /// an out-of-bounds access recorded since the last check (see [`Device::synchronize`]).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        match &self.storage {
            Storage::Cpu(v) => Ok(v.clone()),
            Storage::Cuda { slice, .. } => {
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.synchronize()?;
                let mut out = vec![T::default(); self.len];
                if self.len > 0 {
                    d.stream.memcpy_dtoh(&slice.slice(0..self.len), &mut out).map_err(|e| {
                        Error::Cuda(format!("copying {} elements from the GPU: {}", self.len, drv(e)))
                    })?;
                    d.stream.synchronize().map_err(|e| Error::Cuda(drv(e)))?;
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
            Storage::Cuda { slice, .. } => {
                if host.is_empty() {
                    return Ok(());
                }
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.stream.memcpy_htod(host, slice).map_err(|e| {
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
            (Storage::Cuda { slice: dst, .. }, Storage::Cuda { slice: s, .. }) => {
                if self.len == 0 {
                    return Ok(());
                }
                let d = self.device.cuda_inner().expect("a CUDA buffer's device is CUDA");
                d.stream
                    .memcpy_dtod(&s.slice(0..self.len), &mut dst.slice_mut(0..self.len))
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
