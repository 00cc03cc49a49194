//! The checks a launch makes of its grid and arguments, against the kernel's parameters and the
//! launching device: counts, kinds, dtypes, mutability, whose memory each buffer is, and lengths
//! that the kernel's 32-bit offsets can reach. Every failure is an `Err` naming the parameter.
//!
//! Layer: above `args`; imports `args`, `config`, `device` (the device's grid limits and CUDA
//! context) and `error`.

use crate::args::{Home, KernelArg};
use crate::config::Grid;
use crate::device::Device;
use crate::error::{Error, Result};
use fuse_ir::{DType, Kernel, ParamKind};
use std::sync::Arc;

/// CPU grid limits (the same as CUDA's on current GPUs).
const CPU_MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// The grid limits of `device`: the GPU's, or the CPU's [`CPU_MAX_GRID`].
fn max_grid(device: &Device) -> [u32; 3] {
    device.cuda_inner().map_or(CPU_MAX_GRID, |d| d.max_grid)
}

/// Every dimension of `grid` at least 1 and within `device`'s limits.
pub(crate) fn validate_grid(grid: Grid, device: &Device) -> Result<()> {
    let dims = [grid.x, grid.y, grid.z];
    for (axis, (&d, &m)) in dims.iter().zip(&max_grid(device)).enumerate() {
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
pub(crate) fn validate_args(
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
