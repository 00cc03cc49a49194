//! A fused LayerNorm as a candle `CustomOp3` of `(x, weight, bias)`: `y = (x - mean) * rstd *
//! weight + bias` over the last dimension of `x`, in one read and one write of `x`.
//!
//! Used by `examples/candle_layernorm.rs` and the tests (through `#[path]`). The three kernels
//! are `examples/kernels/layernorm.rs`'s one-tile form (one row per program, the whole row in one
//! tile) in f32, f16 and bf16: f16/bf16 are loaded, computed in f32 and rounded once at the store.
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
#![allow(dead_code)]

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape};
use fuse::{fused_kernel, DeviceRead, DeviceWrite};
use fuse_candle::{
    cpu_device, cpu_slice, cpu_storage, to_i32, to_u32, unsupported_dtype, KernelDType, KernelResultExt,
};

/// The widest row one tile holds here.
pub const MAX_COLS: usize = 16384;

/// One launch of the LayerNorm kernel for element type `Self`, over any memory fuse accepts:
/// host slices on the CPU, cudarc views and slices on the GPU. One generic launch serves both
/// `cpu_fwd` and `cuda_fwd`.
pub trait LayerNormKernel: KernelDType {
    /// Launches one program per row (`rows` rows of `cols` elements, BLOCK = cols rounded up to a
    /// power of two).
    #[allow(clippy::too_many_arguments)]
    fn launch<R, W>(
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
        R: DeviceRead<Self> + ?Sized,
        W: DeviceWrite<Self> + ?Sized;
}

/// The kernel for one element type (`$t` as the kernel spells it, `$host` as Rust does) and its
/// [`LayerNormKernel`] impl: one body for the three dtypes (f16/bf16 widen to f32 at the loads).
macro_rules! layernorm_kernel {
    ($k:ident, $t:ident, $host:ty) => {
        #[fused_kernel]
        pub fn $k<const BLOCK: usize>(
            x: *const $t,
            y: *mut $t,
            w: *const $t,
            b: *const $t,
            stride: i32,
            n_cols: i32,
            eps: f32,
        ) {
            let row = program_id(0);
            let cols = arange(0, BLOCK);
            let mask = cols < n_cols;
            let xs = load(x + row * stride + cols, mask, 0.0);
            let inv_n = 1.0 / n_cols as f32;
            let mean = sum(xs) * inv_n;
            let xc = where_(mask, xs - mean, 0.0);
            let rstd = rsqrt(sum(xc * xc) * inv_n + eps);
            store(y + row * stride + cols, xc * rstd * load(w + cols, mask) + load(b + cols, mask), mask);
        }

        impl LayerNormKernel for $host {
            fn launch<R, W>(
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
                R: DeviceRead<Self> + ?Sized,
                W: DeviceWrite<Self> + ?Sized,
            {
                let block = (cols.max(1) as usize).next_power_of_two();
                fuse::with_block!(block, B => $k::launch::<B>(dev, rows, x, y, w, b, cols, cols, eps))
            }
        }
    };
}
layernorm_kernel!(layernorm_f32, f32, f32);
layernorm_kernel!(layernorm_f16, f16, fuse::half::f16);
layernorm_kernel!(layernorm_bf16, bf16, fuse::half::bf16);

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

    fn cpu<T: LayerNormKernel>(
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
            T::launch(&cpu_device(), grid, x, &mut y, w, b, n, self.eps).in_op(NAME)?;
        }
        Ok(cpu_storage(y))
    }

    #[cfg(feature = "cuda")]
    fn cuda<T: LayerNormKernel>(
        &self,
        x: &candle_core::CudaStorage,
        lx: &Layout,
        w: &candle_core::CudaStorage,
        lw: &Layout,
        b: &candle_core::CudaStorage,
        lb: &Layout,
    ) -> candle_core::Result<candle_core::CudaStorage> {
        use fuse_candle::cuda;
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
            T::launch(&dev, grid, &xv, &mut y, &wv, &bv, n, self.eps).in_op(NAME)?;
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
