//! Shared by the integration tests: the example kernels (one definition, in examples/kernels/) and
//! small helpers for fresh random inputs and float64 comparisons.
#![allow(dead_code)]

#[path = "../../examples/kernels/add_mul.rs"]
pub mod add_mul;
#[path = "../../examples/kernels/add_rmsnorm.rs"]
pub mod add_rmsnorm;
#[path = "../../examples/kernels/bias_gelu_dropout.rs"]
pub mod bias_gelu_dropout;
#[path = "../../examples/kernels/l2norm.rs"]
pub mod l2norm;
#[path = "../../examples/kernels/layernorm.rs"]
pub mod layernorm;
#[path = "../../examples/kernels/layernorm_quant.rs"]
pub mod layernorm_quant;
#[path = "../../examples/kernels/silu_and_mul.rs"]
pub mod silu_and_mul;
#[path = "../../examples/kernels/softmax.rs"]
pub mod softmax;

use fuse::{Buffer, Device, KernelSpec, LaunchConfig};

/// Kernels that exercise emitter paths the examples do not.
pub mod paths {
    use fuse::fused_kernel;

    /// A rem-indexed gather (`(offs - shift) % h`, negative for the first lanes when `shift > 0`) and
    /// a two-sided mask: the vector paths the emitter licenses by chunk-uniform masks and
    /// chunk-consecutive remainders, against the CPU interpreter bit for bit, over shapes that take
    /// both the specialised (multiples of 16) and the per-lane paths.
    #[fused_kernel]
    pub fn rem_gather<const BLOCK: usize>(
        x: *const f16,
        bias: *const f16,
        out: *mut f16,
        n: i32,
        lo: i32,
        h: i32,
        shift: i32,
    ) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = (offs < n) & (offs >= lo);
        let r = (offs - shift) % h;
        let b = load(bias + r, m & (r >= 0), 0.5);
        store(out + offs, load(x + offs, m, 0.0) * 2.0 + b, m);
    }

    /// `erf` alone, for its accuracy over the whole float range.
    #[fused_kernel]
    pub fn erf_only<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        store(out + offs, erf(load(x + offs, m)), m);
    }

    /// `rand(seed, offs) > p` and `p < rand(seed, offs)` (the GPU tests them on the Philox words
    /// with integer bounds) next to `rand(seed, offs) >= p` (tested on the floats).
    #[fused_kernel]
    pub fn rand_threshold<const BLOCK: usize>(out: *mut f32, seed: u64, p: f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let r = rand(seed, offs);
        let v = where_(r > p, 1.0, 0.0) + where_(p < r, 2.0, 0.0) + where_(r >= p, 4.0, 0.0);
        store(out + offs, v, m);
    }
}

/// Every example kernel (and the [`paths`] kernels) with the const-generic values it is compiled for in tests;
/// a generic kernel's every instantiation.
pub fn example_specs() -> Vec<(&'static KernelSpec, Vec<u64>)> {
    vec![
        (&add_mul::add_mul::f32::SPEC, vec![1024]),
        (&add_mul::add_mul::f16::SPEC, vec![1024]),
        (&add_mul::add_mul::bf16::SPEC, vec![1024]),
        (&softmax::softmax::f32::SPEC, vec![1024]),
        (&softmax::softmax::f16::SPEC, vec![4096]),
        (&softmax::softmax::bf16::SPEC, vec![4096]),
        (&layernorm::layernorm::f32::SPEC, vec![1024]),
        (&layernorm::layernorm::f16::SPEC, vec![8192]),
        (&layernorm::layernorm::bf16::SPEC, vec![8192]),
        (&layernorm::layernorm_wide::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::f32::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::f16::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::bf16::SPEC, vec![1024]),
        (&add_rmsnorm::add_rmsnorm::SPEC, vec![4096]),
        (&silu_and_mul::silu_and_mul::SPEC, vec![1024]),
        (&layernorm_quant::layernorm_quant::SPEC, vec![4096]),
        (&l2norm::l2norm::SPEC, vec![1024]),
        (&paths::rem_gather::SPEC, vec![1024]),
        (&paths::rand_threshold::SPEC, vec![1024]),
        (&paths::erf_only::SPEC, vec![1024]),
    ]
}

/// A small deterministic-per-run generator (xorshift*), seeded from the clock so every run sees
/// fresh inputs; the seed is printed for replay.
pub struct Rng(u64);

impl Rng {
    pub fn fresh(test: &str) -> Rng {
        let seed = std::env::var("FUSE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
        println!("{test}: seed {seed} (replay with FUSE_TEST_SEED={seed})");
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1) scaled by `scale`.
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale).collect()
    }
}

/// Max abs error where every element is within `atol + rtol*|want|`; panics with the first
/// offender otherwise (NaN never passes).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

pub fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

pub fn f16s(v: &[f32]) -> Vec<fuse::half::f16> {
    v.iter().map(|&x| fuse::half::f16::from_f32(x)).collect()
}

pub fn bf16s(v: &[f32]) -> Vec<fuse::half::bf16> {
    v.iter().map(|&x| fuse::half::bf16::from_f32(x)).collect()
}

pub fn bf16_to_f64(v: &[fuse::half::bf16]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

pub fn f16_to_f64(v: &[fuse::half::f16]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

/// f32, f16 or bf16: the element types of the generic add_mul, softmax and LayerNorm kernels, with
/// what a test needs to state a case once for all of them.
pub trait Elem: fuse::Float {
    /// "f32", "f16" or "bf16", for failure messages.
    const NAME: &'static str;
    const NAN: Self;
    fn from_f32s(v: &[f32]) -> Vec<Self>;
    fn to_f64s(v: &[Self]) -> Vec<f64>;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    const NAN: Self = f32::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        v.to_vec()
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        f64s(v)
    }
}

impl Elem for fuse::half::f16 {
    const NAME: &'static str = "f16";
    const NAN: Self = fuse::half::f16::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        f16s(v)
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        f16_to_f64(v)
    }
}

impl Elem for fuse::half::bf16 {
    const NAME: &'static str = "bf16";
    const NAN: Self = fuse::half::bf16::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        bf16s(v)
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        bf16_to_f64(v)
    }
}

/// Uploads every input to `d`, runs `launch` into a NaN-poisoned output of `len` elements and
/// returns it as f64.
pub fn run_on<T: Elem>(
    d: &Device,
    inputs: &[&[T]],
    len: usize,
    launch: impl FnOnce(&[&Buffer<T>], &mut Buffer<T>) -> fuse::Result<()>,
) -> Vec<f64> {
    let bufs: Vec<Buffer<T>> = inputs.iter().map(|v| d.upload(v).unwrap()).collect();
    let refs: Vec<&Buffer<T>> = bufs.iter().collect();
    let mut out = d.upload(&vec![T::NAN; len]).unwrap();
    launch(&refs, &mut out).unwrap();
    T::to_f64s(&out.to_vec().unwrap())
}

/// `add_mul` on `d` in blocks of `B` (`warps`: the runtime's choice if `None`).
pub fn add_mul_on<T: Elem, const B: usize>(
    d: &Device,
    warps: Option<u32>,
    x: &[T],
    y: &[T],
    z: &[T],
) -> Vec<f64> {
    let n = x.len();
    let c = LaunchConfig::new(n.div_ceil(B) as u32);
    let c = match warps {
        Some(w) => c.num_warps(w),
        None => c,
    };
    run_on(d, &[x, y, z], n, |inputs, out| {
        add_mul::add_mul::launch::<T, B>(d, c, inputs[0], inputs[1], inputs[2], out, n as i32)
    })
}

/// Row-wise softmax of `x` (`rows` x `cols`) on `d`, one row per tile of `B`.
pub fn softmax_on<T: Elem, const B: usize>(d: &Device, x: &[T], rows: usize, cols: usize) -> Vec<f64> {
    run_on(d, &[x], rows * cols, |inputs, out| {
        let cols = cols as i32;
        softmax::softmax::launch::<T, B>(d, rows as u32, out, inputs[0], cols, cols, cols)
    })
}

/// LayerNorm (weight `w`, bias `b`, eps 1e-5) of `x` (`rows` x `cols`) on `d`, one row per tile of `B`.
pub fn layernorm_on<T: Elem, const B: usize>(
    d: &Device,
    x: &[T],
    w: &[T],
    b: &[T],
    rows: usize,
    cols: usize,
) -> Vec<f64> {
    run_on(d, &[x, w, b], rows * cols, |inputs, y| {
        let ([x, w, b], cols) = ([inputs[0], inputs[1], inputs[2]], cols as i32);
        layernorm::layernorm::launch::<T, B>(d, rows as u32, x, y, w, b, cols, cols, 1e-5)
    })
}

/// The looped f32 LayerNorm (`layernorm_wide`: any row width, column blocks of `B`) on `d`.
pub fn layernorm_wide_on<const B: usize>(
    d: &Device,
    warps: u32,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    rows: usize,
    cols: usize,
) -> Vec<f64> {
    run_on(d, &[x, w, b], rows * cols, |inputs, y| {
        let c = LaunchConfig::new(rows as u32).num_warps(warps);
        let [x, w, b] = [inputs[0], inputs[1], inputs[2]];
        layernorm::layernorm_wide::launch::<B>(d, c, x, y, w, b, cols as i32, cols as i32, 1e-5)
    })
}
