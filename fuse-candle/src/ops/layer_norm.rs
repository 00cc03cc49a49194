//! A fused LayerNorm as a candle `CustomOp3` of `(x, weight, bias)`: `y = (x - mean) * rstd *
//! weight + bias` over the last dimension of `x`, in one read and one write of `x`.
//!
//! The kernel is fuse-kernels' generic [`fuse_kernels::layernorm::layernorm`] (one row per
//! program, the whole row in one tile), instantiated for f32, f16 and bf16: f16/bf16 are loaded,
//! computed in f32 and rounded once at the store.
//!
//! Why `CustomOp3` rather than a `CustomOp1` holding `weight` and `bias`: as arguments they are
//! tensors like `x`, on `x`'s device (candle checks that), with their own layouts and dtypes,
//! which the op checks like `x`'s; an op holding tensors would have to reach into their storage
//! itself and could not follow `x` from one device to another.
//!
//! Rules (errors, not panics): `x` has at least one dimension; `weight` and `bias` have the shape
//! `[n_cols]` (the last dimension of `x`) and `x`'s dtype (F32, F16 or BF16); all three are
//! contiguous (a transpose is an error that says to call `.contiguous()?`), and may start at
//! any offset in their storage; rows up to 16384 wide (one tile per row).

use crate::{
    cpu_device, cpu_slice, cpu_storage, to_i32, to_u32, unsupported_dtype, KernelDType, KernelResultExt,
};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape};
use fuse::{DeviceRead, DeviceWrite};

/// The widest row one tile holds here.
pub const MAX_COLS: usize = 16384;

use fuse_kernels::layernorm as kernels;

/// One launch of the LayerNorm kernel for element type `T`, over any memory fuse accepts: host
/// slices on the CPU, cudarc views and slices on the GPU (one program per row, `rows` rows of
/// `cols` elements, BLOCK = cols rounded up to a power of two). One generic launch serves both
/// `cpu_fwd` and `cuda_fwd`.
#[allow(clippy::too_many_arguments)]
fn launch<T, R, W>(
    dev: &fuse::Device,
    rows: u32,
    x: &R,
    y: &mut W,
    w: &R,
    b: &R,
    cols: i32,
    eps: f32,
) -> fuse::Result<()>
where
    T: fuse::Float,
    R: DeviceRead<T> + ?Sized,
    W: DeviceWrite<T> + ?Sized,
{
    let block = (cols.max(1) as usize).next_power_of_two();
    fuse::with_block!(block, B => kernels::layernorm::launch::<T, B>(dev, rows, x, y, w, b, cols, cols, eps))
}

/// The op: `x.apply_op3_no_bwd(&weight, &bias, &FusedLayerNorm { eps: 1e-5 })?`.
#[derive(Clone, Copy, Debug)]
pub struct FusedLayerNorm {
    /// Added to the variance before the square root.
    pub eps: f32,
}

const NAME: &str = "fused-layernorm";
const DTYPES: &[DType] = &[DType::F32, DType::F16, DType::BF16];

impl FusedLayerNorm {
    /// `(rows, cols)` of `x`, after checking the shapes of `x`, `weight` and `bias`.
    fn rows_cols(&self, lx: &Layout, lw: &Layout, lb: &Layout) -> candle_core::Result<(usize, usize)> {
        let Some((&cols, outer)) = lx.dims().split_last() else {
            candle_core::bail!("`{NAME}`: x is a scalar; it needs at least one dimension")
        };
        for (name, l) in [("weight", lw), ("bias", lb)] {
            if l.dims() != [cols] {
                candle_core::bail!(
                    "`{NAME}`: {name} has shape {:?} but x's rows have {cols} elements",
                    l.dims()
                )
            }
        }
        if cols > MAX_COLS {
            candle_core::bail!(
                "`{NAME}`: rows of {cols} elements are wider than this op's one tile ({MAX_COLS})"
            )
        }
        Ok((outer.iter().product(), cols))
    }

    fn cpu<T: KernelDType + fuse::Float>(
        &self,
        x: &CpuStorage,
        lx: &Layout,
        w: &CpuStorage,
        lw: &Layout,
        b: &CpuStorage,
        lb: &Layout,
    ) -> candle_core::Result<CpuStorage> {
        let (rows, cols) = self.rows_cols(lx, lw, lb)?;
        let (x, w, b) = (
            cpu_slice::<T>(NAME, "x", x, lx)?,
            cpu_slice::<T>(NAME, "weight", w, lw)?,
            cpu_slice::<T>(NAME, "bias", b, lb)?,
        );
        // NaN-poisoned (floats): an element the kernel failed to write cannot pass for a result.
        let mut y = vec![T::from_f64(f64::NAN); x.len()];
        if rows > 0 && cols > 0 {
            let (grid, n) = (to_u32(NAME, "rows", rows)?, to_i32(NAME, "cols", cols)?);
            launch(&cpu_device(), grid, x, &mut y, w, b, n, self.eps).in_op(NAME)?;
        }
        Ok(cpu_storage(y))
    }

    #[cfg(feature = "cuda")]
    fn cuda<T: KernelDType + fuse::Float>(
        &self,
        x: &candle_core::CudaStorage,
        lx: &Layout,
        w: &candle_core::CudaStorage,
        lw: &Layout,
        b: &candle_core::CudaStorage,
        lb: &Layout,
    ) -> candle_core::Result<candle_core::CudaStorage> {
        use crate::cuda;
        let (rows, cols) = self.rows_cols(lx, lw, lb)?;
        let (xv, wv, bv) = (
            cuda::view::<T>(NAME, "x", x, lx)?,
            cuda::view::<T>(NAME, "weight", w, lw)?,
            cuda::view::<T>(NAME, "bias", b, lb)?,
        );
        let mut y = cuda::alloc::<T>(NAME, &x.device, rows * cols)?;
        if rows > 0 && cols > 0 {
            let (grid, n) = (to_u32(NAME, "rows", rows)?, to_i32(NAME, "cols", cols)?);
            let dev = cuda::device(&x.device)?; // fuse on candle's stream, cached
            launch(&dev, grid, &xv, &mut y, &wv, &bv, n, self.eps).in_op(NAME)?;
        }
        Ok(cuda::storage(y, &x.device))
    }
}

impl CustomOp3 for FusedLayerNorm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        lx: &Layout,
        w: &CpuStorage,
        lw: &Layout,
        b: &CpuStorage,
        lb: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let y = match x.dtype() {
            DType::F32 => self.cpu::<f32>(x, lx, w, lw, b, lb)?,
            DType::F16 => self.cpu::<fuse::half::f16>(x, lx, w, lw, b, lb)?,
            DType::BF16 => self.cpu::<fuse::half::bf16>(x, lx, w, lw, b, lb)?,
            other => return Err(unsupported_dtype(NAME, "x", other, DTYPES)),
        };
        Ok((y, lx.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &candle_core::CudaStorage,
        lx: &Layout,
        w: &candle_core::CudaStorage,
        lw: &Layout,
        b: &candle_core::CudaStorage,
        lb: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let y = match x.dtype() {
            DType::F32 => self.cuda::<f32>(x, lx, w, lw, b, lb)?,
            DType::F16 => self.cuda::<fuse::half::f16>(x, lx, w, lw, b, lb)?,
            DType::BF16 => self.cuda::<fuse::half::bf16>(x, lx, w, lw, b, lb)?,
            other => return Err(unsupported_dtype(NAME, "x", other, DTYPES)),
        };
        Ok((y, lx.shape().clone()))
    }
}
