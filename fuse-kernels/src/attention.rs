//! FlashAttention-2's forward pass written in the language: `o = softmax(scale * q k^T) v` one
//! block of queries at a time, so the `[n, n]` attention matrix never reaches memory.
//!
//! Tensors are `[batch, heads, n, d]` row-major (torch's SDPA layout): `q` and `o` have `heads`
//! heads, `k` and `v` have `kv_heads` (grouped-query attention: query head `h` reads key/value head
//! `h / (heads / kv_heads)`). One program per `[BM]` block of queries of one (batch, head):
//! grid `(cdiv(n, BM), batch * heads)`. The loop walks `[BN]` blocks of keys with an **online
//! softmax** in the exp2 form (FlashAttention-2): a running row max `m_i` and row sum `l_i`, the
//! accumulator rescaled by `exp2(m_old - m_new)` when the max grows, and one division at the end.
//! `qk_scale` is the softmax scale (positive) times log2(e), so `exp2(qk_scale * s)` is `exp(scale * s)`.
//!
//! - **Causal** (`causal != 0`): query `i` sees keys `j <= i`; the loop stops at the block holding
//!   the diagonal (the key blocks above it are skipped, not masked), and only the blocks that cross
//!   the diagonal or the end of the sequence evaluate a mask.
//! - **Dropout** (`p_drop > 0`): each probability is kept with probability `1 - p_drop` and scaled
//!   by `1 / (1 - p_drop)`, decided by `rand(seed, (bh * n + i) * n + j)` (i64 offsets, so every
//!   element of every head has its own Philox lane). As in FlashAttention, the row sum `l_i` is
//!   taken before dropout: `o = dropout(softmax(s)) v`.
//! - **Log-sum-exp**: `lse[bh, i] = ln(sum_j exp(scale * s_ij))` (natural log, what a backward
//!   pass needs) is written per row.
//!
//! Every edge is masked (`n` need not be a multiple of the blocks): rows past `n` compute on zeros
//! and are not stored, keys past `n` get probability 0.
use fuse::fused_kernel;

#[fused_kernel]
pub fn attention<T: Half, const BM: usize, const BN: usize, const D: usize>(
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    n: i32,
    heads: i32,
    kv_heads: i32,
    qk_scale: f32,
    causal: i32,
    p_drop: f32,
    seed: u64,
) {
    let bh = program_id(1);
    let kvh = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);
    // A causal query block's work grows with its index: the grid runs the last block first, so
    // the programs left at the end of the launch are the short ones.
    let qb = num_programs(0) - 1 - program_id(0);
    let rm = qb * BM + arange(0, BM);
    let rd = arange(0, D);
    let row_ok = (rm < n).expand_dims(1); // [BM, 1]
    let q_tile = load(q + bh * n * D + rm.expand_dims(1) * D + rd.expand_dims(0), row_ok, 0.0);
    let kv = kvh * n * D;
    let mut m_i = full([BM], f32::NEG_INFINITY);
    let mut l_i = zeros([BM]);
    let mut acc = zeros([BM, D]);
    // Causal: the key blocks up to the one holding this block's last query.
    let end = where_(causal != 0, minimum(n, (qb + 1) * BM), n);
    let keep_scale = 1.0 / (1.0 - p_drop);
    for n0 in (0..end).step_by(BN) {
        let rn = n0 + arange(0, BN);
        let key_ok = (rn < n).expand_dims(1); // [BN, 1]
        let k_tile = load(k + kv + rn.expand_dims(1) * D + rd.expand_dims(0), key_ok, 0.0);
        // The raw scores: the scale is applied inside the exp2's argument (one fused multiply-add
        // per score, FlashAttention's form), and to the row max, which commutes with it for a
        // positive scale (the launcher refuses any other). `s`: [BM, BN].
        let mut s = dot(q_tile, trans(k_tile));
        // Only the block holding the diagonal (causal) and the one past `n` need a mask: a
        // uniform branch, so the blocks below the diagonal do no per-element test.
        if n0 + BN > n || (causal != 0 && n0 + BN > qb * BM) {
            let visible =
                (rn < n).expand_dims(0) & ((causal == 0) | (rm.expand_dims(1) >= rn.expand_dims(0)));
            s = where_(visible, s, f32::NEG_INFINITY);
        }
        let m_new = maximum(m_i, s.max(1) * qk_scale); // log2 units
        let mut p = exp2(s * qk_scale - m_new.expand_dims(1));
        let alpha = exp2(m_i - m_new);
        l_i = l_i * alpha + p.sum(1);
        if p_drop > 0.0 {
            let offs = (bh * n + rm).to(i64).expand_dims(1) * n.to(i64) + rn.to(i64).expand_dims(0);
            p = where_(rand(seed, offs) > p_drop, p * keep_scale, 0.0);
        }
        let v_tile = load(v + kv + rn.expand_dims(1) * D + rd.expand_dims(0), key_ok, 0.0);
        acc = dot(p.to(T), v_tile, acc * alpha.expand_dims(1));
        m_i = m_new;
    }
    // One division a row (l_i >= 1: the row max's own term), a multiply an element.
    store(
        o + bh * n * D + rm.expand_dims(1) * D + rd.expand_dims(0),
        acc * (1.0 / l_i).expand_dims(1),
        row_ok,
    );
    store(lse + bh * n + rm, (m_i + log2(l_i)) * 0.6931471805599453, rm < n);
}

/// The shape of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub n: usize,
    pub d: usize,
}

/// The kernel's dropout decisions `keep(bh, i, j)` and scale, for [`reference()`] (`None`: no
/// dropout).
pub type Keep<'a> = Option<(&'a dyn Fn(usize, usize, usize) -> bool, f64)>;

/// Float64 reference of [`attention`] without dropout (`keep` `None`), or with the kernel's
/// dropout decisions `keep(bh, i, j)` and scale: returns `(o, lse, o_abs)`, where `o_abs` is `o`
/// computed with `|v|` (what an error bound scales with). `scale` is the softmax scale (not
/// multiplied by log2(e)).
pub fn reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    s: Shape,
    scale: f64,
    causal: bool,
    keep: Keep<'_>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (n, d) = (s.n, s.d);
    let mut o = vec![0.0; s.batch * s.heads * n * d];
    let mut o_abs = vec![0.0; o.len()];
    let mut lse = vec![0.0; s.batch * s.heads * n];
    for bh in 0..s.batch * s.heads {
        for i in 0..n {
            let at = (bh * n + i) * d;
            let row = (&mut o[at..at + d], &mut o_abs[at..at + d]);
            lse[bh * n + i] = reference_row((q, k, v), s, (scale, causal), keep, (bh, i), row);
        }
    }
    (o, lse, o_abs)
}

/// Row `i` of head `bh` of [`reference()`]: `o` and `o_abs` (each `d` long, zeroed) filled, the
/// log-sum-exp returned. A bench checks sampled rows of a large launch with it.
pub fn reference_row(
    (q, k, v): (&[f64], &[f64], &[f64]),
    s: Shape,
    (scale, causal): (f64, bool),
    keep: Keep<'_>,
    (bh, i): (usize, usize),
    (o, o_abs): (&mut [f64], &mut [f64]),
) -> f64 {
    let (n, d) = (s.n, s.d);
    let kvh = (bh / s.heads) * s.kv_heads + (bh % s.heads) / (s.heads / s.kv_heads);
    let (qb, kb) = (bh * n * d, kvh * n * d);
    let seen = if causal { i + 1 } else { n };
    let mut w = vec![0.0; seen];
    let mut mx = f64::NEG_INFINITY;
    for (j, wj) in w.iter_mut().enumerate() {
        *wj = scale * (0..d).map(|c| q[qb + i * d + c] * k[kb + j * d + c]).sum::<f64>();
        mx = mx.max(*wj);
    }
    let mut total = 0.0;
    for wj in w.iter_mut() {
        *wj = (*wj - mx).exp();
        total += *wj;
    }
    for (j, &wj) in w.iter().enumerate() {
        let pj = match keep {
            None => wj / total,
            Some((kept, ks)) => {
                if kept(bh, i, j) {
                    wj / total * ks
                } else {
                    0.0
                }
            }
        };
        for c in 0..d {
            o[c] += pj * v[kb + j * d + c];
            o_abs[c] += pj * v[kb + j * d + c].abs();
        }
    }
    mx + total.ln()
}

/// The largest error the kernel may make in `o`, per element, from `o_abs` of [`reference()`] and
/// the unit roundoff `u` of the element type: `p` is rounded to it before `p v` (FlashAttention's
/// rule; each term off by `u` relative, dropout's scale included), `o` once more when stored,
/// and f32 exp2, sums and products, far smaller, are covered by the `u` and the small absolute
/// term.
pub fn error_bound(o_abs: f64, u: f64) -> f64 {
    3.0 * u * o_abs + 1e-5
}

/// A launch configuration: the query and key block sizes and the warps.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub bm: usize,
    pub bn: usize,
    pub warps: u32,
    pub stages: u32,
}

/// The configurations this example knows (the first is the default; the last is small enough for
/// the CPU interpreter).
pub const CONFIGS: &[Config] = &[
    Config { bm: 128, bn: 64, warps: 8, stages: 2 },
    Config { bm: 128, bn: 64, warps: 4, stages: 2 },
    Config { bm: 128, bn: 128, warps: 8, stages: 2 },
    Config { bm: 64, bn: 64, warps: 4, stages: 2 },
    Config { bm: 128, bn: 32, warps: 4, stages: 2 },
    Config { bm: 64, bn: 32, warps: 4, stages: 2 },
    Config { bm: 128, bn: 64, warps: 8, stages: 3 },
    Config { bm: 128, bn: 32, warps: 4, stages: 3 },
    Config { bm: 64, bn: 64, warps: 4, stages: 3 },
    Config { bm: 16, bn: 16, warps: 1, stages: 2 },
];

/// The launch arguments besides the tensors.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The softmax scale (usually `1 / sqrt(d)`): positive and finite, or the launch is refused.
    pub scale: f32,
    pub causal: bool,
    pub p_drop: f32,
    pub seed: u64,
}

/// Launches [`attention`] with configuration `cfg` for head dim 16, 64 or 128.
#[allow(clippy::too_many_arguments)]
pub fn launch<T: fuse::Half>(
    device: &fuse::Device,
    cfg: Config,
    s: Shape,
    q: &fuse::Buffer<T>,
    k: &fuse::Buffer<T>,
    v: &fuse::Buffer<T>,
    o: &mut fuse::Buffer<T>,
    lse: &mut fuse::Buffer<f32>,
    opt: Options,
) -> fuse::Result<()> {
    let bad = |what: String| fuse::Error::InvalidLaunch(format!("attention: {what}"));
    let dim = |v: usize| i32::try_from(v).map_err(|_| bad(format!("{v} does not fit an i32")));
    if s.kv_heads == 0 || s.heads % s.kv_heads != 0 {
        return Err(bad(format!("{} heads is not a multiple of {} kv heads", s.heads, s.kv_heads)));
    }
    if !(opt.scale > 0.0 && opt.scale.is_finite()) {
        return Err(bad(format!("softmax scale {} is not positive and finite", opt.scale)));
    }
    if !(0.0..1.0).contains(&opt.p_drop) {
        return Err(bad(format!("dropout probability {} is not in [0, 1)", opt.p_drop)));
    }
    let (n, heads, kv_heads) = (dim(s.n)?, dim(s.heads)?, dim(s.kv_heads)?);
    let grid = fuse::LaunchConfig::new((
        u32::try_from(s.n.div_ceil(cfg.bm)).map_err(|_| bad("too many query blocks".into()))?,
        u32::try_from(s.batch * s.heads).map_err(|_| bad("too many heads".into()))?,
    ))
    .num_warps(cfg.warps)
    .num_stages(cfg.stages);
    let qk_scale = opt.scale * std::f32::consts::LOG2_E;
    let causal = i32::from(opt.causal);
    macro_rules! go {
        ($bm:literal, $bn:literal, $d:literal) => {
            attention::launch::<T, $bm, $bn, $d>(
                device, grid, q, k, v, o, lse, n, heads, kv_heads, qk_scale, causal, opt.p_drop, opt.seed,
            )
        };
    }
    match (cfg.bm, cfg.bn, s.d) {
        (128, 64, 64) => go!(128, 64, 64),
        (128, 64, 128) => go!(128, 64, 128),
        (128, 128, 64) => go!(128, 128, 64),
        (128, 128, 128) => go!(128, 128, 128),
        (64, 64, 64) => go!(64, 64, 64),
        (64, 64, 128) => go!(64, 64, 128),
        (128, 32, 64) => go!(128, 32, 64),
        (128, 32, 128) => go!(128, 32, 128),
        (64, 32, 64) => go!(64, 32, 64),
        (64, 32, 128) => go!(64, 32, 128),
        (16, 16, 16) => go!(16, 16, 16),
        (16, 16, 32) => go!(16, 16, 32),
        other => Err(bad(format!("block/head dim {other:?} is not one this example instantiates"))),
    }
}
