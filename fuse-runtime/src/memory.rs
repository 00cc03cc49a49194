//! What a kernel's pointer parameters accept: [`DeviceRead`] (for `*const T`) and [`DeviceWrite`]
//! (for `*mut T`), implemented for fuse [`Buffer`]s and their views ([`BufferView`],
//! [`BufferViewMut`]), cudarc's `CudaSlice`/`CudaView`/`CudaViewMut`, and host slices (CPU only).
//!
//! The element type is checked by the Rust compiler (`&Buffer<f16>` is not `DeviceRead<f32>`); a
//! writable parameter takes only exclusive borrows, so passing one buffer both as an input and as
//! an output of one launch is a borrow error. The length a launch's bounds checks and proofs use
//! is the view's, never the allocation's.
//!
//! Also the conversions of a whole [`Buffer`] into a [`KernelArg`] and a
//! [`CostArg`](crate::cost::CostArg).
//!
//! Layer: above `args` and `device`; imports them, `cost`, `element` and `error`.

use crate::args::{
    home_of, ArgMemory, ArgMemoryMut, BufferArg, BufferArgMut, CudarcMemory, CudarcMemoryMut, Home, KernelArg,
};
use crate::cost::CostArg;
use crate::device::{Buffer, Storage};
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

/// Memory a kernel may read: a `*const T` parameter of a generated `launch` takes `&M` for any
/// `M: DeviceRead<T>` (a `&mut M` coerces).
///
/// Implemented for [`Buffer<T>`], [`BufferView`], [`BufferViewMut`], cudarc's `CudaSlice<T>`,
/// `CudaView<T>` and `CudaViewMut<T>`, host memory `[T]` and `Vec<T>` (which only a CPU device
/// runs on), and references to any of these. Implement it for your own wrapper by delegating to
/// one of them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory of `{T}` that a kernel can read",
    label = "expected `&` of a `Buffer<{T}>`, a view of one, a cudarc `CudaSlice<{T}>`/`CudaView<{T}>` or a `[{T}]`",
    note = "the element type must match the kernel's `*const {T}` parameter exactly"
)]
pub trait DeviceRead<T: Element> {
    /// The type-erased launch argument, borrowing `self` for the launch.
    fn kernel_arg(&self) -> KernelArg<'_>;
}

/// Memory a kernel may write: a `*mut T` parameter of a generated `launch` takes `&mut M` for
/// any `M: DeviceWrite<T>`, an exclusive borrow, so one launch cannot alias it with another
/// argument.
///
/// Implemented for [`Buffer<T>`], [`BufferViewMut`], cudarc's `CudaSlice<T>` and
/// `CudaViewMut<T>`, host memory `[T]` and `Vec<T>` (CPU only), and `&mut` of any of these.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not writable device memory of `{T}`",
    label = "expected `&mut` of a `Buffer<{T}>`, a `buffer.slice_mut(..)?` view, a cudarc `CudaSlice<{T}>`/`CudaViewMut<{T}>` or a `[{T}]`",
    note = "a `*mut {T}` parameter needs an exclusive borrow of memory of exactly `{T}`"
)]
pub trait DeviceWrite<T: Element> {
    /// The type-erased writable launch argument, borrowing `self` mutably for the launch.
    fn kernel_arg_mut(&mut self) -> KernelArg<'_>;
}

fn range_of(bounds: impl RangeBounds<usize>, len: usize, what: &str) -> Result<(usize, usize)> {
    let start = match bounds.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match bounds.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e - s)),
        _ => Err(Error::InvalidArgument(format!(
            "{what}: the range {} is not within the buffer's {len} elements",
            describe_range(&bounds)
        ))),
    }
}

fn describe_range(bounds: &impl RangeBounds<usize>) -> String {
    let s = match bounds.start_bound() {
        Bound::Included(s) => s.to_string(),
        Bound::Excluded(s) => format!("{s}+1"),
        Bound::Unbounded => String::new(),
    };
    match bounds.end_bound() {
        Bound::Included(e) => format!("{s}..={e}"),
        Bound::Excluded(e) => format!("{s}..{e}"),
        Bound::Unbounded => format!("{s}.."),
    }
}

/// A read-only view of `len` elements of a [`Buffer`] from element `start`: `buf.slice(a..b)`.
#[derive(Clone, Copy, Debug)]
pub struct BufferView<'a, T: Element> {
    buf: &'a Buffer<T>,
    start: usize,
    len: usize,
}

/// A writable view of part of a [`Buffer`]: `buf.slice_mut(a..b)`.
#[derive(Debug)]
pub struct BufferViewMut<'a, T: Element> {
    buf: &'a mut Buffer<T>,
    start: usize,
    len: usize,
}

impl<T: Element> Buffer<T> {
    /// A read-only view of the elements in `range` (e.g. `buf.slice(16..1040)`), which a kernel
    /// sees as a buffer of `range`'s length: its bounds checks use that length.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is not within `0..len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferView<'_, T>> {
        let (start, len) = range_of(range, self.len, "Buffer::slice")?;
        Ok(BufferView { buf: self, start, len })
    }

    /// A writable view of the elements in `range`; see [`Buffer::slice`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is not within `0..len()`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<BufferViewMut<'_, T>> {
        let (start, len) = range_of(range, self.len, "Buffer::slice_mut")?;
        Ok(BufferViewMut { buf: self, start, len })
    }

    /// The launch argument for elements `start..start + len` (already checked to be inside).
    pub(crate) fn read_arg(&self, start: usize, len: usize) -> KernelArg<'_> {
        let data = match &self.storage {
            Storage::Cpu(v) => ArgMemory::Host(as_bytes(&v[start..start + len])),
            Storage::Cuda { slice, ptr } => {
                ArgMemory::Cuda { ptr: ptr + (start * std::mem::size_of::<T>()) as u64, keep: Some(slice) }
            }
        };
        KernelArg::Buffer(BufferArg { dtype: T::DTYPE, len, home: Home::Fuse(&self.device), data })
    }

    pub(crate) fn write_arg(&mut self, start: usize, len: usize) -> KernelArg<'_> {
        // Disjoint borrows of the fields: the device shared, the storage mutable.
        let Buffer { device, storage, .. } = self;
        let data = match storage {
            Storage::Cpu(v) => ArgMemoryMut::Host(as_bytes_mut(&mut v[start..start + len])),
            Storage::Cuda { slice, ptr } => ArgMemoryMut::Cuda {
                ptr: *ptr + (start * std::mem::size_of::<T>()) as u64,
                keep: Some(&*slice),
                _exclusive: PhantomData,
            },
        };
        KernelArg::BufferMut(BufferArgMut { dtype: T::DTYPE, len, home: Home::Fuse(&*device), data })
    }
}

impl<T: Element> BufferView<'_, T> {
    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The view's elements, copied to the host (waits for the device as [`Buffer::to_vec`]).
    ///
    /// # Errors
    /// As [`Buffer::to_vec`].
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.buf.range_to_vec(self.start, self.len)
    }
}

impl<T: Element> BufferViewMut<'_, T> {
    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// A whole buffer as a launch argument (`(&buf).into()`) and as a cost argument.
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
impl<T: Element> From<&Buffer<T>> for CostArg {
    fn from(b: &Buffer<T>) -> CostArg {
        CostArg::Len(b.len() as u64)
    }
}
impl<T: Element> From<&mut Buffer<T>> for CostArg {
    fn from(b: &mut Buffer<T>) -> CostArg {
        CostArg::Len(b.len() as u64)
    }
}
impl<T: Element> DeviceRead<T> for Buffer<T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        self.read_arg(0, self.len)
    }
}
impl<T: Element> DeviceWrite<T> for Buffer<T> {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        let len = self.len;
        self.write_arg(0, len)
    }
}
impl<T: Element> DeviceRead<T> for BufferView<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        self.buf.read_arg(self.start, self.len)
    }
}
impl<T: Element> DeviceRead<T> for BufferViewMut<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        self.buf.read_arg(self.start, self.len)
    }
}
impl<T: Element> DeviceWrite<T> for BufferViewMut<'_, T> {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        self.buf.write_arg(self.start, self.len)
    }
}

// References to memory are memory (`&&Buffer` from a pattern, `&mut &mut Buffer`).
impl<T: Element, R: DeviceRead<T> + ?Sized> DeviceRead<T> for &R {
    fn kernel_arg(&self) -> KernelArg<'_> {
        (**self).kernel_arg()
    }
}
impl<T: Element, R: DeviceRead<T> + ?Sized> DeviceRead<T> for &mut R {
    fn kernel_arg(&self) -> KernelArg<'_> {
        (**self).kernel_arg()
    }
}
impl<T: Element, R: DeviceWrite<T> + ?Sized> DeviceWrite<T> for &mut R {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        (**self).kernel_arg_mut()
    }
}

// Host slices: the CPU interpreter reads and writes them in place (a GPU launch refuses them).
fn host_read<T: Element>(v: &[T]) -> KernelArg<'_> {
    KernelArg::Buffer(BufferArg {
        dtype: T::DTYPE,
        len: v.len(),
        home: Home::Host,
        data: ArgMemory::Host(as_bytes(v)),
    })
}
fn host_write<T: Element>(v: &mut [T]) -> KernelArg<'_> {
    let len = v.len();
    KernelArg::BufferMut(BufferArgMut {
        dtype: T::DTYPE,
        len,
        home: Home::Host,
        data: ArgMemoryMut::Host(as_bytes_mut(v)),
    })
}
impl<T: Element> DeviceRead<T> for [T] {
    fn kernel_arg(&self) -> KernelArg<'_> {
        host_read(self)
    }
}
impl<T: Element> DeviceWrite<T> for [T] {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        host_write(self)
    }
}
impl<T: Element> DeviceRead<T> for Vec<T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        host_read(self)
    }
}
impl<T: Element> DeviceWrite<T> for Vec<T> {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        host_write(self)
    }
}

fn cudarc_read<T: Element, M: CudarcMemory>(m: &M, len: usize) -> KernelArg<'_> {
    KernelArg::Buffer(BufferArg {
        dtype: T::DTYPE,
        len,
        home: home_of(m.context()),
        data: ArgMemory::Cudarc(m),
    })
}
fn cudarc_write<T: Element, M: CudarcMemoryMut>(m: &mut M, len: usize) -> KernelArg<'_> {
    let home = home_of(m.context());
    KernelArg::BufferMut(BufferArgMut { dtype: T::DTYPE, len, home, data: ArgMemoryMut::Cudarc(m) })
}

impl<T: Element> DeviceRead<T> for CudaSlice<T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        cudarc_read::<T, _>(self, self.len())
    }
}
impl<T: Element> DeviceWrite<T> for CudaSlice<T> {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        let len = self.len();
        cudarc_write::<T, _>(self, len)
    }
}
impl<T: Element> DeviceRead<T> for CudaView<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        cudarc_read::<T, _>(self, self.len())
    }
}
impl<T: Element> DeviceRead<T> for CudaViewMut<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        cudarc_read::<T, _>(self, self.len())
    }
}
impl<T: Element> DeviceWrite<T> for CudaViewMut<'_, T> {
    fn kernel_arg_mut(&mut self) -> KernelArg<'_> {
        let len = self.len();
        cudarc_write::<T, _>(self, len)
    }
}
