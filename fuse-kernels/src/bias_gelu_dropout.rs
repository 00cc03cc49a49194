//! `dropout(gelu(x + bias))` over a `rows x h` matrix flattened to `n` elements: erf GELU, then
//! Philox dropout that keeps an element with probability `1 - p` and scales it by `1 / (1 - p)`.
//! One kernel for f32, f16 and bf16 (the math in f32 either way); `bias_gelu_dropout16` draws
//! the mask with `rand16` (eight elements per Philox call; four in f32, whose vectors hold four).
use fuse::fused_kernel;

#[fused_kernel]
pub fn bias_gelu_dropout<T: Float, const BLOCK: usize>(
    x: *const T,
    bias: *const T,
    out: *mut T,
    seed: u64,
    p: f32,
    n: i32,
    h: i32,
) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let v = load(x + offs, m) + load(bias + offs % h, m);
    // gelu(v) / (1 - p) as (0.5 / (1 - p)) v (1 + erf(v / sqrt 2)): the dropout scale folded into
    // GELU's 1/2, one division per program and two multiplies per element.
    let half_scale = 0.5 / (1.0 - p);
    let g = half_scale * v * (1.0 + erf(v * 0.7071067811865476));
    let r = rand(seed, offs);
    store(out + offs, where_(r > p, g, 0.0), m);
}

/// The same with `rand16`: one Philox4x32-10 call per eight elements (16 threshold bits each)
/// instead of one per four (in f32, whose vectors hold four elements, one per four: four lanes
/// take half of a call's half-words), so `p` acts rounded to a multiple of 2^-16 (exact for
/// p = 0.1 to within 6e-6; see `rand16` in the language reference, docs/LANGUAGE.md). The mask is still bit-identical on the GPU
/// and the CPU.
#[fused_kernel]
pub fn bias_gelu_dropout16<T: Float, const BLOCK: usize>(
    x: *const T,
    bias: *const T,
    out: *mut T,
    seed: u64,
    p: f32,
    n: i32,
    h: i32,
) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let v = load(x + offs, m) + load(bias + offs % h, m);
    let half_scale = 0.5 / (1.0 - p); // as above
    let g = half_scale * v * (1.0 + erf(v * 0.7071067811865476));
    let r = rand16(seed, offs);
    store(out + offs, where_(r > p, g, 0.0), m);
}

/// Float64 GELU(x + bias) before dropout; `h` is the row length.
pub fn reference_gelu(x: &[f64], bias: &[f64], h: usize) -> Vec<f64> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let v = v + bias[i % h];
            0.5 * v * (1.0 + erf64(v / std::f64::consts::SQRT_2))
        })
        .collect()
}

/// erf in float64 (std has none): the Taylor series below 3 (cancellation costs ~4 digits, leaving
/// ~1e-12, far below f32 rounding) and the asymptotic erfc expansion above.
pub fn erf64(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 3.0 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut sum = 0.0f64;
        let mut term = ax; // x^(2n+1)/n!
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs().max(1e-300) || n < 5.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x2 / n;
            if n > 200.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc asymptotic expansion: erfc(x) ~ exp(-x^2)/(x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - ...)
        let x2 = ax * ax;
        let mut s = 1.0;
        let mut t = 1.0;
        for k in 1..12 {
            t *= -((2 * k - 1) as f64) / (2.0 * x2);
            s += t;
        }
        1.0 - (-x2).exp() / (ax * std::f64::consts::PI.sqrt()) * s
    };
    r.copysign(x)
}
