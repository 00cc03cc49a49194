//! Checks of the `matmul_int8` and `ffn_sublayer` examples (fuse-kernels/), shared by their tests
//! on every backend (`tests/quant_ffn.rs`) and the host emulation
//! (`tests/emulated_tensor_cores.rs`): fresh random inputs, outputs poisoned (NaN for floats; for
//! int8, per element a value the rounding rule forbids there), every edge masked.
use super::{bias_gelu_dropout, ffn_sublayer, matmul_int8, Elem, Rng};
use fuse::Device;

/// Uniform bytes in `lo..=hi`.
pub fn int8s(rng: &mut Rng, len: usize, lo: i8, hi: i8) -> Vec<i8> {
    let span = (i16::from(hi) - i16::from(lo) + 1) as u64;
    (0..len).map(|_| (i64::from(lo) + (rng.next_u64() % span) as i64) as i8).collect()
}

fn uniform(rng: &mut Rng, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    rng.vec(len, 1.0).iter().map(|&v| lo + (v + 1.0) * 0.5 * (hi - lo)).collect()
}

/// The i32 accumulator `a @ w^T` (K-major `w`) against the exact i64 product, bit for bit; the
/// output is filled with a sentinel first.
pub fn check_int8_accumulator(
    d: &Device,
    rng: &mut Rng,
    cfg: matmul_int8::Config,
    (m, n, k): (usize, usize, usize),
) {
    let (a, w) = (int8s(rng, m * k, i8::MIN, i8::MAX), int8s(rng, n * k, i8::MIN, i8::MAX));
    let (ab, wb) = (d.upload(&a).unwrap(), d.upload(&w).unwrap());
    let sentinel = i32::MIN + 12345;
    let mut c = d.upload(&vec![sentinel; m * n]).unwrap();
    matmul_int8::launch_i32(d, cfg, &ab, &wb, &mut c, (m, n, k)).unwrap();
    let what = format!("int8 accumulator {m}x{n}x{k} {cfg:?} on {}", d.description());
    assert_accumulator(&what, &c.to_vec().unwrap(), &a, &w, (m, n, k));
}

/// `got`, an i32 accumulator of `a @ w^T`, equals the exact product element for element.
pub fn assert_accumulator(what: &str, got: &[i32], a: &[i8], w: &[i8], (m, n, k): (usize, usize, usize)) {
    let want = matmul_int8::reference_i32(a, w, m, n, k);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(i64::from(g), w, "{what}: element ({}, {})", i / n, i % n);
    }
}

/// How [`check_int8_requant`] draws its scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scales {
    /// Random per-row and per-column scales and an `out_scale` that saturates about 1 % of outputs.
    Random { bias: bool },
    /// Unit scales, no bias, `out_scale` 2 and small bytes: every f32 step is exact and every odd
    /// accumulator is a tie, so the output is checked exactly (ties to even).
    Ties,
}

/// The inputs of one requantisation check, drawn for `scales`, with the float64 value `t` of
/// every output and the bound within which a neighbouring integer is accepted.
pub struct Int8Case {
    pub a: Vec<i8>,
    pub w: Vec<i8>,
    pub sa: Vec<f32>,
    pub sw: Vec<f32>,
    pub bias: Vec<f32>,
    pub out_scale: f32,
    pub with_bias: bool,
    pub t: Vec<f64>,
    pub bound: Vec<f64>,
}

impl Int8Case {
    pub fn draw(rng: &mut Rng, (m, n, k): (usize, usize, usize), scales: Scales) -> Int8Case {
        let (a, w, sa, sw, bias, out_scale) = match scales {
            Scales::Ties => (
                int8s(rng, m * k, -4, 4),
                int8s(rng, n * k, -4, 4),
                vec![1.0f32; m],
                vec![1.0f32; n],
                vec![0.0f32; n],
                2.0,
            ),
            Scales::Random { .. } => {
                let (a, w) = (int8s(rng, m * k, i8::MIN, i8::MAX), int8s(rng, n * k, i8::MIN, i8::MAX));
                let (sa, sw) = (uniform(rng, m, 0.005, 0.015), uniform(rng, n, 0.01, 0.03));
                let out_scale = 5461.0 * (k as f32).sqrt() * 0.01 * 0.02 / 50.0;
                let bias = uniform(rng, n, -20.0 * out_scale, 20.0 * out_scale);
                (a, w, sa, sw, bias, out_scale)
            }
        };
        let with_bias = scales == Scales::Random { bias: true };
        let acc = matmul_int8::reference_i32(&a, &w, m, n, k);
        let t = matmul_int8::reference_t(&acc, &sa, &sw, with_bias.then_some(&bias[..]), out_scale);
        let bound: Vec<f64> = match scales {
            Scales::Ties => vec![0.0; m * n],
            Scales::Random { .. } => (0..m * n)
                .map(|i| {
                    let bj = if with_bias { bias[i % n] } else { 0.0 };
                    matmul_int8::t_error_bound(acc[i], sa[i / n], sw[i % n], bj, out_scale)
                })
                .collect(),
        };
        Int8Case { a, w, sa, sw, bias, out_scale, with_bias, t, bound }
    }

    /// The requantised output `got` (`n` columns) by the rule: panics naming `what` at the first
    /// wrong element, and unless the ties case holds ties; returns the verdict.
    pub fn verify(&self, what: &str, got: &[i8], n: usize, scales: Scales) -> matmul_int8::Verdict {
        let v = matmul_int8::verify(got, &self.t, &self.bound);
        if let Some((i, g, want, t)) = v.first_bad {
            panic!(
                "{what}: {} elements wrong; first ({}, {}): got {g}, want {want} (t = {t})",
                v.bad,
                i / n,
                i % n
            );
        }
        if scales == Scales::Ties {
            assert!(v.ties > 0, "the ties case must hold ties");
        }
        v
    }
}

/// The requantised int8 output against the float64 rule (`matmul_int8::verify`); returns the
/// verdict for the caller's statistics.
pub fn check_int8_requant(
    d: &Device,
    rng: &mut Rng,
    cfg: matmul_int8::Config,
    (m, n, k): (usize, usize, usize),
    scales: Scales,
) -> matmul_int8::Verdict {
    let case = Int8Case::draw(rng, (m, n, k), scales);
    let up = |v: &[f32]| d.upload(v).unwrap();
    let (ab, wb) = (d.upload(&case.a).unwrap(), d.upload(&case.w).unwrap());
    let (sab, swb, bb) = (up(&case.sa), up(&case.sw), up(&case.bias));
    let mut c = d.upload(&matmul_int8::poison(&case.t)).unwrap();
    let bias = case.with_bias.then_some(&bb);
    matmul_int8::launch(d, cfg, &ab, &wb, &sab, &swb, bias, &mut c, (m, n, k), case.out_scale).unwrap();
    let what = format!("int8 requant {scales:?} {m}x{n}x{k} {cfg:?} on {}", d.description());
    case.verify(&what, &c.to_vec().unwrap(), n, scales)
}

/// One FFN sublayer in `T` at `m x d` against float64 within the reference's per-element bound.
pub fn check_ffn<T: Elem + fuse::Half>(
    d: &Device,
    rng: &mut Rng,
    cfg: ffn_sublayer::Config,
    (m, dim): (usize, usize),
) {
    let gen = |rng: &mut Rng, len: usize, scale: f32, shift: f32| -> Vec<T> {
        T::from_f32s(&rng.vec(len, scale).iter().map(|v| v + shift).collect::<Vec<_>>())
    };
    let x = gen(rng, m * dim, 3.0, 0.5);
    let w = gen(rng, dim * dim, (3.0 / dim as f32).sqrt(), 0.0);
    let (b, gamma, beta) = (gen(rng, dim, 0.5, 0.0), gen(rng, dim, 0.4, 1.0), gen(rng, dim, 0.5, 0.0));
    let eps = 1e-5f32;
    let up = |v: &[T]| d.upload(v).unwrap();
    let (xb, wb, bb, gb, betab) = (up(&x), up(&w), up(&b), up(&gamma), up(&beta));
    let mut y = d.upload(&vec![T::NAN; m * dim]).unwrap();
    ffn_sublayer::launch(d, cfg, &xb, &wb, &bb, &gb, &betab, &mut y, (m, dim), eps).unwrap();
    let u = if T::NAME == "f16" { 2f64.powi(-11) } else { 2f64.powi(-8) };
    let (want, bound) = ffn_sublayer::reference(
        &T::to_f64s(&x),
        &T::to_f64s(&w),
        &T::to_f64s(&b),
        &T::to_f64s(&gamma),
        &T::to_f64s(&beta),
        m,
        dim,
        f64::from(eps),
        u,
        bias_gelu_dropout::erf64,
    );
    let got = T::to_f64s(&y.to_vec().unwrap());
    for (i, ((&g, &w), &e)) in got.iter().zip(&want).zip(&bound).enumerate() {
        assert!(
            (g - w).abs() <= e,
            "ffn_sublayer {} {m}x{dim} {cfg:?} on {}: element ({}, {}): got {g}, want {w} (bound {e:e})",
            T::NAME,
            d.description(),
            i / dim,
            i % dim
        );
    }
}

/// The kernels of both examples for an NVRTC compile, each with its const generics, warps, the
/// architecture and whether the launch-time specialisations are on: `matmul_int8` at three
/// configurations (the default, a 64 x 64 one and the CPU's; both architectures, both
/// specialisation values), the accumulator kernel at the default, `ffn_sublayer` f16 and bf16 at
/// one configuration each (one compile of it takes 20–40 s on a 2-core machine). The GPU tests
/// compile every configuration.
pub fn specs() -> Vec<super::CompileCase> {
    let consts = |bm: usize, bn: usize, bk: usize| vec![bm as u64, bn as u64, bk as u64];
    let mut v = Vec::new();
    for (i, arch, all) in [(0, "sm_80", true), (2, "sm_90", false), (4, "sm_80", false)] {
        let c = matmul_int8::CONFIGS[i];
        v.push((&matmul_int8::matmul_int8::SPEC, consts(c.bm, c.bn, c.bk), c.warps, arch, all));
    }
    let c = matmul_int8::CONFIGS[0];
    v.push((&matmul_int8::matmul_int8_i32::SPEC, consts(c.bm, c.bn, c.bk), c.warps, "sm_90", true));
    let (c, e) = (ffn_sublayer::CONFIGS[0], ffn_sublayer::CONFIGS[2]);
    v.push((&ffn_sublayer::ffn_sublayer::f16::SPEC, consts(c.bm, c.bn, c.bk), c.warps, "sm_80", true));
    v.push((&ffn_sublayer::ffn_sublayer::bf16::SPEC, consts(e.bm, e.bn, e.bk), e.warps, "sm_90", false));
    v
}
