//! What the example and the tests share: fresh random inputs (seed printed, `FUSE_TEST_SEED` to
//! replay), LayerNorm from candle's own ops (the reference), and an error measure that NaN fails.

use candle_core::{DType, Device, Tensor, D};

/// A small generator (SplitMix64), so a failing run can be replayed from its printed seed.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `FUSE_TEST_SEED` if set, else from the clock; prints the seed with `what`.
    pub fn fresh(what: &str) -> Rng {
        let seed = crate::fresh_seed("FUSE_TEST_SEED");
        eprintln!("{what}: seed {seed} (replay with FUSE_TEST_SEED={seed})");
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` normal samples (Box-Muller) times `scale` plus `shift`.
    pub fn normal(&mut self, n: usize, scale: f64, shift: f64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let (u, v) = (1.0 - self.uniform(), self.uniform());
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos() * scale + shift) as f32
            })
            .collect()
    }

    /// A tensor of shape `dims` from `normal(.., scale, shift)`, as `dtype`, on `device`.
    pub fn tensor(
        &mut self,
        dims: &[usize],
        scale: f64,
        shift: f64,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let n = dims.iter().product();
        Tensor::from_vec(self.normal(n, scale, shift), dims, &Device::Cpu)?.to_dtype(dtype)?.to_device(device)
    }
}

/// LayerNorm over the last dimension from candle's own ops, computed in f64 from the inputs'
/// values (whatever their dtype), so the reference's own rounding is negligible.
pub fn candle_layernorm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let (x, w, b) = (x.to_dtype(DType::F64)?, w.to_dtype(DType::F64)?, b.to_dtype(DType::F64)?);
    let mean = x.mean_keepdim(D::Minus1)?;
    let xc = x.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let rstd = (var + eps)?.sqrt()?.recip()?;
    xc.broadcast_mul(&rstd)?.broadcast_mul(&w)?.broadcast_add(&b)
}

/// The same in `x`'s dtype, the way a candle model would write it (for timing and for the
/// end-to-end check in f32).
pub fn candle_layernorm_native(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let xc = x.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let rstd = (var + eps)?.sqrt()?.recip()?;
    xc.broadcast_mul(&rstd)?.broadcast_mul(w)?.broadcast_add(b)
}

/// The largest `|got - want| / (atol + rtol * |want|)` over all elements (both of one shape),
/// with the largest absolute error: a result passes when the first is at most 1. A NaN anywhere
/// gives infinity.
pub fn error_ratio(got: &Tensor, want: &Tensor, atol: f64, rtol: f64) -> candle_core::Result<(f64, f64)> {
    if got.dims() != want.dims() {
        candle_core::bail!("shapes differ: got {:?}, want {:?}", got.dims(), want.dims())
    }
    let g = got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let w = want.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let (mut ratio, mut max_abs) = (0.0f64, 0.0f64);
    for (g, w) in g.iter().zip(&w) {
        let e = (g - w).abs();
        if e.is_nan() || !w.is_finite() {
            return Ok((f64::INFINITY, f64::INFINITY));
        }
        ratio = ratio.max(e / (atol + rtol * w.abs()));
        max_abs = max_abs.max(e);
    }
    Ok((ratio, max_abs))
}

/// The tolerances a LayerNorm in `dtype` must meet against the f64 reference: f32 as the root
/// examples (2e-5 abs + 1e-5 rel); f16 and bf16 a few units of their rounding of the output.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (8e-3, 8e-3),
        _ => (2e-5, 1e-5),
    }
}
