//! Checks of the `attention` example (fuse-kernels/src/attention.rs), used by its tests on every
//! backend (`tests/attention.rs`): fresh random inputs, NaN-poisoned outputs, sequence lengths that are not multiples of the blocks, the output
//! against float64 within the per-element bound of `attention::error_bound`, the log-sum-exp, and
//! dropout against the kernel's own Philox decisions recomputed on the host.
use super::{attention, Elem, Rng};
use attention::{Config, Options, Shape};
use fuse::Device;

/// Whether dropout keeps (batch-head, query, key).
type Keep<'a> = dyn Fn(usize, usize, usize) -> bool + 'a;

/// One launch and its checks (panics naming the first element past its bound).
pub fn check_attention<T: Elem + fuse::Half>(
    d: &Device,
    rng: &mut Rng,
    cfg: Config,
    s: Shape,
    causal: bool,
    p_drop: f32,
) {
    let q = T::from_f32s(&rng.vec(s.batch * s.heads * s.n * s.d, 2.0));
    let k = T::from_f32s(&rng.vec(s.batch * s.kv_heads * s.n * s.d, 2.0));
    let v = T::from_f32s(&rng.vec(s.batch * s.kv_heads * s.n * s.d, 1.0));
    let up = |x: &[T]| d.upload(x).unwrap();
    let (qb, kb, vb) = (up(&q), up(&k), up(&v));
    let mut o = d.upload(&vec![T::NAN; q.len()]).unwrap();
    let mut lse = d.upload(&vec![f32::NAN; s.batch * s.heads * s.n]).unwrap();
    let seed = rng.next_u64();
    let opt = Options { scale: 1.0 / (s.d as f32).sqrt(), causal, p_drop, seed };
    attention::launch(d, cfg, s, &qb, &kb, &vb, &mut o, &mut lse, opt).unwrap();
    let n = s.n as u64;
    let keep = |bh: usize, i: usize, j: usize| {
        fuse::fuse_ir::philox::rand(seed, (bh as u64 * n + i as u64) * n + j as u64) > p_drop
    };
    let dropout: Option<(&Keep<'_>, f64)> =
        if p_drop > 0.0 { Some((&keep, 1.0 / (1.0 - f64::from(p_drop)))) } else { None };
    let (want, want_lse, o_abs) = attention::reference(
        &T::to_f64s(&q),
        &T::to_f64s(&k),
        &T::to_f64s(&v),
        s,
        f64::from(opt.scale),
        causal,
        dropout,
    );
    let u = if T::NAME == "f16" { 2f64.powi(-11) } else { 2f64.powi(-8) };
    let what = format!(
        "attention {} {s:?} causal {causal} dropout {p_drop} {cfg:?} on {}",
        T::NAME,
        d.description()
    );
    let got = T::to_f64s(&o.to_vec().unwrap());
    for (i, ((&g, &w), &a)) in got.iter().zip(&want).zip(&o_abs).enumerate() {
        let bound = attention::error_bound(a, u);
        assert!(
            (g - w).abs() <= bound,
            "{what}: o element {i} (row {}): got {g}, want {w} (bound {bound:e})",
            i / s.d
        );
    }
    let got = lse.to_vec().unwrap();
    for (i, (&g, &w)) in got.iter().zip(&want_lse).enumerate() {
        // f32 exp2/log2 of sums of f32 products: a few ulps of the row's scale.
        let bound = 1e-5 * (1.0 + w.abs()) + 1e-5 * s.d as f64;
        assert!((f64::from(g) - w).abs() <= bound, "{what}: lse row {i}: got {g}, want {w}");
    }
}

/// The attention kernel for an NVRTC compile: const generics (BM, BN, D), warps, architecture
/// and whether the launch-time specialisations are on, at the GPU configurations.
pub fn specs() -> Vec<super::CompileCase> {
    let c = attention::CONFIGS;
    let consts = |cfg: Config, d: u64| vec![cfg.bm as u64, cfg.bn as u64, d];
    vec![
        (&attention::attention::f16::SPEC, consts(c[0], 128), c[0].warps, "sm_90", true),
        (&attention::attention::bf16::SPEC, consts(c[0], 64), c[0].warps, "sm_80", false),
        (&attention::attention::f16::SPEC, consts(c[1], 128), c[1].warps, "sm_80", true),
        (&attention::attention::bf16::SPEC, consts(c[3], 64), c[3].warps, "sm_90", false),
        // Hopper's wgmma: `q k^T` from shared memory, `p v` with A from registers.
        (&attention::attention::f16::SPEC, consts(c[0], 128), c[0].warps, "sm_90a", true),
        (&attention::attention::bf16::SPEC, consts(c[3], 64), c[3].warps, "sm_90a", false),
    ]
}
