//! The launch arguments: [`KernelArg`] (one per kernel parameter) and the type-erased buffers
//! [`BufferArg`]/[`BufferArgMut`] (their dtype, the length a kernel may reach, whose memory they
//! are and where their data is, cudarc memory included), and what the launch-time analyses read
//! of the arguments (scalar values, buffer lengths and addresses, a launch's [`LaunchKey`]).
//!
//! Layer: above `device` (a fuse buffer's argument names its [`Device`]); imports `device`,
//! `cost` (an argument as a [`CostArg`]) and `launch_memo`. Arguments are type-erased: the
//! typed conversions into them are in `memory.rs`.

use crate::cost::CostArg;
use crate::device::Device;
use crate::launch_memo::LaunchKey;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice,
    SyncOnDrop,
};
use fuse_ir::DType;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

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
pub(crate) enum ArgMemory<'a> {
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

pub(crate) enum ArgMemoryMut<'a> {
    Host(&'a mut [u8]),
    Cuda { ptr: u64, keep: Option<&'a dyn KeepAlive>, _exclusive: PhantomData<&'a mut [u8]> },
    Cudarc(&'a mut dyn CudarcMemoryMut),
}

/// A read-only buffer argument, type-erased (dtype and length remembered).
pub struct BufferArg<'a> {
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) home: Home<'a>,
    pub(crate) data: ArgMemory<'a>,
}

/// A writable buffer argument, type-erased.
pub struct BufferArgMut<'a> {
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) home: Home<'a>,
    pub(crate) data: ArgMemoryMut<'a>,
}

macro_rules! buffer_arg_accessors {
    ($($arg:ident),*) => {$(
        impl $arg<'_> {
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
    )*};
}
buffer_arg_accessors!(BufferArg, BufferArgMut);

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

/// A device buffer's address (`None` for host memory, cudarc memory not yet resolved at launch,
/// and scalars).
pub(crate) fn device_address(a: &KernelArg<'_>) -> Option<u64> {
    match a {
        KernelArg::Buffer(BufferArg { data: ArgMemory::Cuda { ptr, .. }, .. })
        | KernelArg::BufferMut(BufferArgMut { data: ArgMemoryMut::Cuda { ptr, .. }, .. }) => Some(*ptr),
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

pub(crate) fn buffer_len(a: &KernelArg<'_>) -> Option<u64> {
    match a {
        KernelArg::Buffer(b) => Some(b.len as u64),
        KernelArg::BufferMut(b) => Some(b.len as u64),
        _ => None,
    }
}

/// Scalar argument `p` as the host programs read it.
pub(crate) fn host_arg(args: &[KernelArg<'_>], p: u32) -> Option<fuse_ir::HostScalar> {
    match args.get(p as usize)? {
        KernelArg::F32(x) => Some(fuse_ir::HostScalar::Float(f64::from(*x))),
        a => scalar_value(Some(a)).map(fuse_ir::HostScalar::Int),
    }
}

/// What [`crate::cost`] needs of a launch argument.
pub(crate) fn cost_arg(a: &KernelArg<'_>) -> CostArg {
    match (a, scalar_value(Some(a)), buffer_len(a)) {
        (_, Some(v), _) => CostArg::Int(v),
        (_, _, Some(n)) => CostArg::Len(n),
        (KernelArg::F32(x), ..) => CostArg::F32(*x),
        _ => CostArg::F32(0.0),
    }
}

/// The [`LaunchKey`] of what a launch-time analysis reads of a launch: the const generics, the
/// grid, per argument a scalar's bits (kinds are fixed per kernel), a buffer's length or 0 for an
/// `f32`, and, with `addresses`, each device buffer's address (0 for the others). `None` past
/// the key's size: that launch is analysed afresh.
pub(crate) fn launch_key(
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
    addresses: bool,
) -> Option<LaunchKey> {
    let words = args.iter().flat_map(|a| {
        let value = scalar_value(Some(a)).map(|v| v as u64).or_else(|| buffer_len(a)).unwrap_or(0);
        let address = addresses.then(|| device_address(a).unwrap_or(0));
        std::iter::once(value).chain(address)
    });
    LaunchKey::new(consts, grid, words)
}

/// cudarc memory, type-erased: its pointer is taken at launch through cudarc's `DevicePtr` /
/// `DevicePtrMut` on the launching stream, so cudarc's stream synchronisation (events, where its
/// context tracks them) orders the kernel with the memory's other users.
pub(crate) trait CudarcMemory {
    fn context(&self) -> &Arc<CudaContext>;
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>);
}

pub(crate) trait CudarcMemoryMut: CudarcMemory {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>);
}

impl<T> CudarcMemory for CudaSlice<T> {
    fn context(&self) -> &Arc<CudaContext> {
        CudaSlice::context(self)
    }
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr(stream)
    }
}

impl<T> CudarcMemoryMut for CudaSlice<T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
}

impl<T> CudarcMemory for CudaView<'_, T> {
    fn context(&self) -> &Arc<CudaContext> {
        self.stream().context()
    }
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr(stream)
    }
}

impl<T> CudarcMemory for CudaViewMut<'_, T> {
    fn context(&self) -> &Arc<CudaContext> {
        self.stream().context()
    }
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr(stream)
    }
}

impl<T> CudarcMemoryMut for CudaViewMut<'_, T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
}

/// Which cudarc context a piece of cudarc memory belongs to, read when the argument is made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CudarcHome {
    /// The driver context (`CUcontext`): memory is usable by any stream of the same one.
    pub(crate) cu_ctx: usize,
    /// The cudarc `CudaContext` object: its event tracking is what orders the memory's users.
    pub(crate) object: usize,
    /// Whether that object synchronises streams with events (multi-stream mode, tracking on).
    pub(crate) tracked: bool,
}

pub(crate) fn home_of(ctx: &Arc<CudaContext>) -> Home<'static> {
    Home::Cudarc(CudarcHome {
        cu_ctx: ctx.cu_ctx() as usize,
        object: Arc::as_ptr(ctx) as usize,
        tracked: ctx.is_managing_stream_synchronization(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>], addresses: bool) -> Vec<u64> {
        launch_key(consts, grid, args, addresses).expect("fits").words().to_vec()
    }

    /// A device buffer argument of `len` f32 elements at `ptr` (never dereferenced here).
    fn device_buffer(ptr: u64, len: usize) -> KernelArg<'static> {
        KernelArg::Buffer(BufferArg {
            dtype: fuse_ir::DType::F32,
            len,
            home: Home::Host,
            data: ArgMemory::Cuda { ptr, keep: None },
        })
    }

    #[test]
    fn every_input_an_analysis_reads_changes_the_key() {
        let args = |n: i32, big: u64, x: f32| [KernelArg::I32(n), KernelArg::U64(big), KernelArg::F32(x)];
        let k0 = key(&[64, 32], [10, 1, 1], &args(7, 1 << 40, 1.5), false);
        assert_ne!(k0, key(&[64, 16], [10, 1, 1], &args(7, 1 << 40, 1.5), false), "a const generic");
        assert_ne!(k0, key(&[64, 32], [11, 1, 1], &args(7, 1 << 40, 1.5), false), "the grid");
        assert_ne!(k0, key(&[64, 32], [10, 1, 1], &args(8, 1 << 40, 1.5), false), "an i32");
        assert_ne!(k0, key(&[64, 32], [10, 1, 1], &args(7, 1, 1.5), false), "a u64");
        // A float scalar is read by no memoised analysis.
        assert_eq!(k0, key(&[64, 32], [10, 1, 1], &args(7, 1 << 40, -3.0), false));
        assert_eq!(key(&[], [1, 1, 1], &[KernelArg::I64(-1)], false), vec![1, 1, 1, u64::MAX]);
    }

    #[test]
    fn a_buffers_length_always_and_its_address_where_asked_change_the_key() {
        let (a, b, c) = (device_buffer(0x1000, 64), device_buffer(0x2000, 64), device_buffer(0x1000, 65));
        let k = |arg: &KernelArg<'_>, addresses| key(&[], [1, 1, 1], std::slice::from_ref(arg), addresses);
        assert_eq!(k(&a, false), k(&b, false), "the proof reads lengths only");
        assert_ne!(k(&a, true), k(&b, true), "a tensor map holds the address");
        assert_ne!(k(&a, false), k(&c, false));
        assert_ne!(k(&a, true), k(&c, true));
        assert_eq!(k(&a, true).len(), k(&a, false).len() + 1, "a word more per argument");
    }

    #[test]
    fn too_many_arguments_are_not_memoised() {
        let args: Vec<KernelArg<'_>> = (0..LaunchKey::MAX as i32).map(KernelArg::I32).collect();
        assert!(launch_key(&[], [1, 1, 1], &args, false).is_none());
    }
}
