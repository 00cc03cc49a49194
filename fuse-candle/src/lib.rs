//! # fuse-candle
//!
//! Run [`fuse`] kernels on [candle](candle_core) tensors without copies, by wrapping a kernel as a
//! candle [`CustomOp1`](candle_core::CustomOp1) / [`CustomOp2`](candle_core::CustomOp2) /
//! [`CustomOp3`](candle_core::CustomOp3):
//!
//! * its `cpu_fwd` runs the kernel on fuse's CPU interpreter ([`cpu_device`]), reading the input
//!   storages in place ([`cpu_slice`]) and writing a new `Vec` that becomes the output storage
//!   ([`cpu_storage`]);
//! * its `cuda_fwd` (feature `cuda`) launches the kernel on **candle's own CUDA stream** through a
//!   fuse device made over candle's context and stream (`cuda::device`, cached per candle
//!   device), reading the inputs' `CudaSlice`s in place (`cuda::view`) and writing a new
//!   `CudaSlice` allocated on that stream (`cuda::alloc`) that becomes the output storage
//!   (`cuda::storage`). The stream orders the kernel with candle's work before and after it:
//!   nothing is synchronised or copied.
//!
//! The rules every helper applies, the same on both back ends:
//!
//! * **Layouts.** An input must be contiguous (row-major, candle's `Layout::is_contiguous`); its
//!   `start_offset` is honoured (a `narrow` along the first dimension, or any view that starts
//!   inside a larger storage, is read where it starts, without a copy). A non-contiguous input (a
//!   transpose, a `narrow` along an inner dimension, a broadcast) is **an error**, never copied
//!   behind your back: the message names the op and the argument and says to call
//!   `.contiguous()?` on it first. A kernel then sees each input as a buffer of exactly the
//!   tensor's element count, so fuse's bounds checks cover the view, not the whole storage.
//! * **Element types.** A tensor's dtype must be the kernel's element type exactly: a typed
//!   accessor for `f32` given an `F16` tensor is an error naming the op, the argument and both
//!   dtypes, and [`unsupported_dtype`] is the error for a dtype an op has no kernel for. The types
//!   both sides know are [`KernelDType`]: `f32`, `f16`, `bf16`, `u8`, `u32`, `i32`, `i64`.
//! * **Errors.** Nothing here panics on bad input. A `fuse::Error` becomes a
//!   `candle_core::Error` naming the op ([`KernelResultExt::in_op`], [`kernel_error`]); sizes that
//!   do not fit a kernel's `i32`/`u32` arguments are errors ([`to_i32`], [`to_u32`]).
//!
//! A LayerNorm written this way is [`ops::FusedLayerNorm`], used by `examples/candle_layernorm.rs`; the root README's section "Using fuse with cudarc and
//! candle" walks through it.
//!
//! ## Features
//!
//! * default: the CPU side only. Builds anywhere (no CUDA toolkit, no GPU); `cuda_fwd` keeps
//!   candle's default ("no cuda implementation"), and candle itself has no CUDA device.
//! * `cuda`: candle's CUDA backend (`candle-core/cuda`) and the `cuda` module (documented when built with the feature). Building it needs
//!   `nvcc` (candle's kernels are compiled at build time) and the CUDA libraries at link time
//!   (candle links `libcuda`, `libnvrtc`, `libcublas`, `libcublasLt` and `libcurand`); the
//!   resulting binary needs them at start-up. `scripts/build_candle_gpu.sh` does such a build on a
//!   machine without CUDA; see this crate's README.
#![warn(missing_docs)]

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Layout, WithDType};
use std::ops::Range;

pub use candle_core;
pub use fuse;

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod ops;

mod sealed {
    /// Only the element types both crates share. With the `cuda` feature, also candle's
    /// `CudaDType` (how a `CudaStorage` holds the type).
    #[cfg(feature = "cuda")]
    pub trait Sealed: candle_core::cuda::CudaDType {}
    /// Only the element types both crates share.
    #[cfg(not(feature = "cuda"))]
    pub trait Sealed {}
}

/// An element type that both a fuse kernel's pointer parameter (`*const T`, `*mut T`) and a candle
/// tensor can hold: `f32`, `f16`, `bf16` (`half`'s types, the same ones for both crates), `u8`,
/// `u32`, `i32`, `i64`.
///
/// `<T as WithDType>::DTYPE` is the candle dtype a tensor must have for a kernel over `T`. Sealed.
pub trait KernelDType: fuse::Element + WithDType + sealed::Sealed {}

macro_rules! kernel_dtypes {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelDType for $t {}
    )*};
}
kernel_dtypes!(f32, fuse::half::f16, fuse::half::bf16, u8, u32, i32, i64);

/// A `fuse::Error` raised by a kernel inside a candle op: the op's name and fuse's error. Its
/// `Display` is ``fuse kernel in candle op `<op>`: <error>``; it reaches the caller wrapped in a
/// `candle_core::Error` ([`kernel_error`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelError {
    /// The candle op (`CustomOp::name`).
    pub op: String,
    /// What fuse reported.
    pub error: fuse::Error,
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fuse kernel in candle op `{}`: {}", self.op, self.error)
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `error`, raised by a kernel of the candle op `op`, as a `candle_core::Error` (a
/// [`KernelError`] wrapped with `candle_core::Error::wrap`, so its message names the op).
pub fn kernel_error(op: &str, error: fuse::Error) -> candle_core::Error {
    candle_core::Error::wrap(KernelError { op: op.to_string(), error })
}

/// Converts a fuse result into a candle one inside an op: `k::launch::<B>(..).in_op(NAME)?`.
pub trait KernelResultExt<T> {
    /// The result, its error converted with [`kernel_error`].
    ///
    /// # Errors
    /// The fuse error, converted.
    fn in_op(self, op: &str) -> candle_core::Result<T>;
}

impl<T> KernelResultExt<T> for fuse::Result<T> {
    fn in_op(self, op: &str) -> candle_core::Result<T> {
        self.map_err(|e| kernel_error(op, e))
    }
}

/// The error for an argument whose dtype an op has no kernel for, listing those it has:
/// "`<op>`: argument `<arg>` is a F64 tensor, but the op has kernels for F32, F16, BF16 only".
/// Use it for the fall-through arm of an op's dispatch on `storage.dtype()`.
pub fn unsupported_dtype(op: &str, arg: &str, got: DType, supported: &[DType]) -> candle_core::Error {
    let list = supported.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(", ");
    candle_core::Error::msg(format!(
        "`{op}`: argument `{arg}` is a {got:?} tensor, but the op has kernels for {list} only"
    ))
}

/// Checks that an argument of dtype `got` can be read as `T` (the dtypes are equal), else the
/// error "`<op>`: argument `<arg>` is a F16 tensor, but this kernel was written for F32".
///
/// # Errors
/// As described.
pub fn check_dtype<T: KernelDType>(op: &str, arg: &str, got: DType) -> candle_core::Result<()> {
    if got == <T as WithDType>::DTYPE {
        Ok(())
    } else {
        Err(candle_core::Error::msg(format!(
            "`{op}`: argument `{arg}` is a {got:?} tensor, but this kernel was written for {:?}",
            <T as WithDType>::DTYPE
        )))
    }
}

/// The element range of the storage that a contiguous `layout` covers:
/// `start_offset .. start_offset + elem_count`. This is the crate's one contiguity rule.
///
/// # Errors
/// When the layout is not contiguous: "`<op>`: argument `<arg>` is not contiguous (shape [..],
/// stride [..]); fuse kernels read contiguous row-major memory: call `.contiguous()?` on it
/// before applying the op". No copy is made for you.
pub fn contiguous_range(op: &str, arg: &str, layout: &Layout) -> candle_core::Result<Range<usize>> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(start..end),
        None => Err(candle_core::Error::msg(format!(
            "`{op}`: argument `{arg}` is not contiguous (shape {:?}, stride {:?}); fuse kernels read \
             contiguous row-major memory: call `.contiguous()?` on it before applying the op",
            layout.dims(),
            layout.stride()
        ))),
    }
}

/// The checked sub-range `range` of a storage of `len` elements.
pub(crate) fn within(
    op: &str,
    arg: &str,
    range: Range<usize>,
    len: usize,
) -> candle_core::Result<Range<usize>> {
    if range.start <= range.end && range.end <= len {
        Ok(range)
    } else {
        Err(candle_core::Error::msg(format!(
            "`{op}`: argument `{arg}`'s layout covers elements {range:?} but its storage holds {len}"
        )))
    }
}

/// The fuse device that runs kernels for `cpu_fwd`: fuse's CPU interpreter (parallel over
/// programs with rayon). Cheap: make it per call.
pub fn cpu_device() -> fuse::Device {
    fuse::Device::cpu()
}

/// The elements of a CPU tensor, in place (no copy), as a kernel's `*const T` argument: its
/// storage from `layout.start_offset()` for `layout`'s element count.
///
/// # Errors
/// The dtype is not `T` ([`check_dtype`]); the layout is not contiguous ([`contiguous_range`]);
/// the layout reaches past the storage.
pub fn cpu_slice<'a, T: KernelDType>(
    op: &str,
    arg: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a [T]> {
    check_dtype::<T>(op, arg, storage.dtype())?;
    let range = contiguous_range(op, arg, layout)?;
    let all = storage.as_slice::<T>()?;
    let range = within(op, arg, range, all.len())?;
    Ok(&all[range])
}

/// A kernel's output, written into a `Vec` on the CPU, as candle's storage (moved, not copied).
pub fn cpu_storage<T: KernelDType>(data: Vec<T>) -> CpuStorage {
    T::to_cpu_storage_owned(data)
}

/// `value` as a kernel's `i32` argument (a row length, a stride, an element count).
///
/// # Errors
/// ``"`<op>`: <what> = <value> does not fit the kernel's i32 argument"`` when it is above
/// `i32::MAX`.
pub fn to_i32(op: &str, what: &str, value: usize) -> candle_core::Result<i32> {
    i32::try_from(value).map_err(|_| {
        candle_core::Error::msg(format!("`{op}`: {what} = {value} does not fit the kernel's i32 argument"))
    })
}

/// `value` as a grid dimension (`u32`).
///
/// # Errors
/// ``"`<op>`: <what> = <value> does not fit a grid dimension (u32)"`` when it is above `u32::MAX`.
pub fn to_u32(op: &str, what: &str, value: usize) -> candle_core::Result<u32> {
    u32::try_from(value).map_err(|_| {
        candle_core::Error::msg(format!("`{op}`: {what} = {value} does not fit a grid dimension (u32)"))
    })
}
