//! The GPU side (feature `cuda`): kernels launched on candle's own CUDA stream, over candle's
//! `CudaSlice`s, without copies.
//!
//! In a `cuda_fwd`:
//!
//! ```ignore
//! let dev = fuse_candle::cuda::device(&x.device)?;              // fuse over candle's stream (cached)
//! let xv = fuse_candle::cuda::view::<f32>(NAME, "x", x, lx)?;    // a CudaView from start_offset
//! let mut y = fuse_candle::cuda::alloc::<f32>(NAME, &x.device, n)?; // on candle's stream
//! k::launch::<B>(&dev, grid, &xv, &mut y, ..).in_op(NAME)?;      // queued on candle's stream
//! Ok((fuse_candle::cuda::storage(y, &x.device), shape))
//! ```
//!
//! Ordering: the kernel is queued on the stream candle queues its own work on, so it runs after
//! the ops that produced its inputs and before the ops that consume its output, with no
//! synchronisation (and where candle's context tracks events across several streams, cudarc's
//! events order the views as a candle kernel's would).
//!
//! Out-of-bounds accesses: a fuse kernel never touches memory outside its arguments' views; on a
//! GPU a masked-on lane outside its view is skipped and recorded, and fuse reports it as
//! `fuse::Error::OutOfBounds` at that device's next `synchronize()` — which candle never calls.
//! Call `fuse_candle::cuda::device(&dev)?.synchronize()` where you want that check (tests do).

use crate::{check_dtype, contiguous_range, within, KernelDType};
use candle_core::backend::BackendStorage;
use candle_core::cuda::cudarc::driver::{CudaSlice, CudaView};
use candle_core::cuda::DeviceId;
use candle_core::{CudaDevice, CudaStorage, Layout};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The fuse device of each candle CUDA device this process has used, by candle's device id.
static DEVICES: OnceLock<Mutex<HashMap<DeviceId, fuse::Device>>> = OnceLock::new();

/// The fuse device that launches on `device`'s stream (`fuse::Device::from_cudarc` over candle's
/// context and stream), made on first use and then returned from a process-wide cache keyed by
/// candle's `DeviceId`.
///
/// The cache matters: a fuse device loads each kernel's module once (compiled cubins are also
/// shared process-wide and on disk), so making a new one per call would reload modules on every
/// launch. Each entry keeps candle's context and stream alive for the life of the process (a
/// fuse device is small: its loaded modules and two words of error state); candle devices are
/// normally made once per GPU, so this is a handful of entries. [`forget`] drops one.
///
/// # Errors
/// When fuse cannot use the device (`fuse::Error::DriverError`, a missing NVRTC is reported at the
/// first launch instead), converted as [`crate::kernel_error`] with the op name `fuse-candle`.
pub fn device(device: &CudaDevice) -> candle_core::Result<fuse::Device> {
    let cache = DEVICES.get_or_init(Default::default);
    // A poisoned lock only means another thread panicked while holding it; the map is still valid.
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = map.get(&device.id()) {
        return Ok(d.clone());
    }
    let stream = device.cuda_stream();
    let fused = fuse::Device::from_cudarc(stream.context().clone(), stream)
        .map_err(|e| crate::kernel_error("fuse-candle", e))?;
    map.insert(device.id(), fused.clone());
    Ok(fused)
}

/// Drops the cached fuse device of `device` (see [`device`]); the next call makes a new one.
/// Returns whether there was one. Kernels already queued are unaffected.
pub fn forget(device: &CudaDevice) -> bool {
    DEVICES
        .get()
        .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).remove(&device.id()).is_some())
        .unwrap_or(false)
}

/// The elements of a GPU tensor, in place (no copy), as a kernel's `*const T` argument: a cudarc
/// view of its `CudaSlice` from `layout.start_offset()` for `layout`'s element count.
///
/// # Errors
/// The dtype is not `T` ([`crate::check_dtype`]); the layout is not contiguous
/// ([`crate::contiguous_range`]); the layout reaches past the storage.
pub fn view<'a, T: KernelDType>(
    op: &str,
    arg: &str,
    storage: &'a CudaStorage,
    layout: &Layout,
) -> candle_core::Result<CudaView<'a, T>> {
    check_dtype::<T>(op, arg, storage.dtype())?;
    let range = contiguous_range(op, arg, layout)?;
    let slice = storage.as_cuda_slice::<T>()?;
    let range = within(op, arg, range, slice.len())?;
    // `within` checked the range; `try_slice` cannot fail here, but stays the non-panicking form.
    slice.try_slice(range.clone()).ok_or_else(|| {
        candle_core::Error::msg(format!("`{op}`: argument `{arg}`: cannot view elements {range:?}"))
    })
}

/// A new zeroed `CudaSlice` of `len` elements on `device`'s stream, for a kernel's `*mut T`
/// output (pass it as `&mut slice`).
///
/// Zeroed with an asynchronous memset on the stream (a few microseconds for a few MB), so that
/// an element the kernel does not write is 0, never leftover memory.
///
/// # Errors
/// When the allocation fails (candle's CUDA error), with the op and size in the message.
pub fn alloc<T: KernelDType>(op: &str, device: &CudaDevice, len: usize) -> candle_core::Result<CudaSlice<T>> {
    device.alloc_zeros::<T>(len).map_err(|e| {
        e.context(format!(
            "`{op}`: allocating the output ({len} elements of {:?})",
            <T as candle_core::WithDType>::DTYPE
        ))
    })
}

/// A kernel's output `slice` as candle's storage on `device` (moved, not copied): the
/// `CudaStorage` a `cuda_fwd` returns.
pub fn storage<T: KernelDType>(slice: CudaSlice<T>, device: &CudaDevice) -> CudaStorage {
    CudaStorage::wrap_cuda_slice(slice, device.clone())
}
