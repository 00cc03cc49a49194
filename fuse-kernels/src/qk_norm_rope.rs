//! vLLM's fused QK-norm + RoPE (Qwen3-style attention input), in place on the packed `qkv`
//! projection `[tokens, (n_q + n_k + n_v) * head_dim]` (row-major; per token the q heads, then
//! the k heads, then the v heads, each `head_dim` wide).
//!
//! For each q and k head of each token: RMSNorm over the head, `x * rsqrt(mean(x^2) + eps) * w`
//! (`q_w` for q heads, `k_w` for k heads, both `[head_dim]`), then the rotary embedding at the
//! token's position from a cos/sin cache `[max_pos, head_dim]` (row `p`: `head_dim / 2` cosines,
//! then `head_dim / 2` sines, of `p * theta_i`). Two pairings of the rotated columns:
//! - NeoX ([`qk_norm_rope`]): column `i` pairs with `i + head_dim / 2` (rotate halves);
//! - GPT-J ([`qk_norm_rope_gptj`]): column `2i` pairs with `2i + 1` (interleaved),
//!
//! and in both the pair `(a, b)` with angle `i` becomes `(a cos - b sin, b cos + a sin)`.
//! v is neither read nor written.
//!
//! A program handles `HEADS` consecutive heads of one token (q then k numbered together, so a
//! program may hold q and k heads at once), `2 * HALF >= head_dim` columns wide (`HALF` a power of
//! two): launch on the grid `(tokens, cdiv(n_q + n_k, HEADS))`. Each element of q and k is read
//! from memory once and written once, with the statistics in registers.
//! - NeoX holds each head as two `[HEADS, HALF]` tiles, the first and the second half: a pair is
//!   one lane of each, so every access is a contiguous (vector) one and nothing moves between lanes.
//! - GPT-J ([`qk_norm_rope_gptj`]) loads each head as one `[HEADS, 2 * HALF]` tile and `split`s it
//!   into its even and odd columns, joined back for one store: registers only, as in Triton's
//!   fastest GPT-J kernel; loading each column's partner `c ^ 1` from its own address instead
//!   is about 15 % slower.
use fuse::fused_kernel;

#[fused_kernel]
pub fn qk_norm_rope<T: Float, const HEADS: usize, const HALF: usize>(
    qkv: *mut T,
    positions: *const i64,
    cos_sin: *const T,
    q_w: *const T,
    k_w: *const T,
    n_q_heads: i32,
    n_k_heads: i32,
    n_v_heads: i32,
    head_dim: i32,
    eps: f32,
) {
    let token = program_id(0);
    let half = head_dim / 2;
    let base = qkv + token * ((n_q_heads + n_k_heads + n_v_heads) * head_dim);
    let pos = load(positions + token).to(i32);
    let row = cos_sin + pos * head_dim; // cosines, then sines
    let inv_dim = 1.0 / head_dim as f32;

    // Pair j is (j, j + half), rotated by angle j.
    let heads = program_id(1) * HEADS + arange(0, HEADS); // [HEADS]: q heads, then k heads
    let head_ok = (heads < n_q_heads + n_k_heads).expand_dims(1); // [HEADS, 1]
    let is_q = (heads < n_q_heads).expand_dims(1);
    let head_offs = heads.expand_dims(1) * head_dim;
    let j = arange(0, HALF); // [HALF]
    let j_ok = j < half;
    let mask = head_ok & j_ok.expand_dims(0);
    let lo = head_offs + j.expand_dims(0); // [HEADS, HALF]
    let x1 = load(base + lo, mask, 0.0);
    let x2 = load(base + lo + half, mask, 0.0);
    let rstd = rsqrt((x1 * x1 + x2 * x2).sum(1) * inv_dim + eps).expand_dims(1);
    let w1 = where_(is_q, load(q_w + j, j_ok).expand_dims(0), load(k_w + j, j_ok).expand_dims(0));
    let w2 =
        where_(is_q, load(q_w + half + j, j_ok).expand_dims(0), load(k_w + half + j, j_ok).expand_dims(0));
    let cos = load(row + j, j_ok).expand_dims(0);
    let sin = load(row + half + j, j_ok).expand_dims(0);
    let a = x1 * rstd * w1;
    let b = x2 * rstd * w2;
    store(base + lo, a * cos - b * sin, mask);
    store(base + lo + half, b * cos + a * sin, mask);
}

/// GPT-J's pairing as Triton's fastest kernel writes it: each head's `[HEADS, 2 * HALF]` tile
/// loaded once and split into its even and odd columns (`x1`, `x2`: `[HEADS, HALF]`, pair `i`
/// is `(x1[i], x2[i])`), the rotated halves joined back for one contiguous store; `split` and
/// `join` stay in registers (the half tiles' vectors are half as wide as the whole's). The
/// weights are read the same way: each head row of the tile reads the whole weight row of its
/// kind (q or k; L1 hits after the first) in the tile's own layout, one vector per chunk, and
/// splits it: reading the even and odd entries apart with a stride of 2 would take four scalar
/// loads per element pair. Launch with [`launch`] and `neox` false.
#[fused_kernel]
pub fn qk_norm_rope_gptj<T: Float, const HEADS: usize, const HALF: usize>(
    qkv: *mut T,
    positions: *const i64,
    cos_sin: *const T,
    q_w: *const T,
    k_w: *const T,
    n_q_heads: i32,
    n_k_heads: i32,
    n_v_heads: i32,
    head_dim: i32,
    eps: f32,
) {
    let token = program_id(0);
    let half = head_dim / 2;
    let base = qkv + token * ((n_q_heads + n_k_heads + n_v_heads) * head_dim);
    let pos = load(positions + token).to(i32);
    let row = cos_sin + pos * head_dim; // cosines, then sines
    let inv_dim = 1.0 / head_dim as f32;
    let heads = program_id(1) * HEADS + arange(0, HEADS); // [HEADS]: q heads, then k heads
    let head_ok = (heads < n_q_heads + n_k_heads).expand_dims(1);
    let is_q = (heads < n_q_heads).expand_dims(1);
    let cols = arange(0, 2 * HALF);
    let mask = head_ok & (cols < head_dim).expand_dims(0);
    // [HEADS, 2 * HALF] offsets; x1, x2: [HEADS, HALF] each, columns 2i and 2i + 1.
    let offs = heads.expand_dims(1) * head_dim + cols.expand_dims(0);
    let (x1, x2) = split(load(base + offs, mask, 0.0));
    // Every store of a head depends on every read of it through `rstd` (the in-place order).
    let rstd = rsqrt((x1 * x1 + x2 * x2).sum(1) * inv_dim + eps).expand_dims(1);
    let j = arange(0, HALF);
    let j_ok = j < half;
    // The weight row in the tile's layout (a `[2 * HALF]` tile split and broadcast down the heads
    // would move through shared memory).
    let wc = broadcast_to(cols.expand_dims(0), [HEADS, 2 * HALF]);
    let wq = load(q_w + wc, mask & is_q, 0.0);
    let wk = load(k_w + wc, mask & !is_q, 0.0);
    let (w1, w2) = split(where_(is_q, wq, wk));
    let cos = load(row + j, j_ok).expand_dims(0);
    let sin = load(row + half + j, j_ok).expand_dims(0);
    let a = x1 * rstd * w1;
    let b = x2 * rstd * w2;
    store(base + offs, join(a * cos - b * sin, b * cos + a * sin), mask);
}

/// The cos/sin cache `[max_pos, head_dim]` of rotary base `theta`, in float64 (round it to the
/// kernel's element type before uploading): row `p` holds `cos(p * theta^(-2i / head_dim))` for
/// `i < head_dim / 2`, then the sines.
pub fn cos_sin_cache(max_pos: usize, head_dim: usize, theta: f64) -> Vec<f64> {
    let half = head_dim / 2;
    let mut cache = vec![0.0; max_pos * head_dim];
    for p in 0..max_pos {
        for i in 0..half {
            let angle = p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64);
            cache[p * head_dim + i] = angle.cos();
            cache[p * head_dim + half + i] = angle.sin();
        }
    }
    cache
}

/// The shape of one launch: heads per kind and the head width.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub dim: usize,
}

/// Float64 reference: `qkv` after the kernel (q and k heads normalised and rotated, v as it was).
#[allow(clippy::too_many_arguments)]
pub fn reference(
    qkv: &[f64],
    positions: &[i64],
    cos_sin: &[f64],
    q_w: &[f64],
    k_w: &[f64],
    h: Heads,
    eps: f64,
    neox: bool,
) -> Vec<f64> {
    let (d, half) = (h.dim, h.dim / 2);
    let row_len = (h.q + h.k + h.v) * d;
    let mut out = qkv.to_vec();
    for (t, &pos) in positions.iter().enumerate() {
        let cache = &cos_sin[pos as usize * d..(pos as usize + 1) * d];
        for head in 0..h.q + h.k {
            let at = t * row_len + head * d;
            let x = &qkv[at..at + d];
            let w = if head < h.q { q_w } else { k_w };
            let rstd = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
            let n: Vec<f64> = (0..d).map(|c| x[c] * rstd * w[c]).collect();
            for i in 0..half {
                let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
                let (cos, sin) = (cache[i], cache[half + i]);
                out[at + a] = n[a] * cos - n[b] * sin;
                out[at + b] = n[b] * cos + n[a] * sin;
            }
        }
    }
    out
}

/// Heads per program for a head width: a tile of about 1024 lanes (8 heads of 128), never more
/// heads than there are.
pub fn heads_per_program(h: Heads) -> usize {
    (1024 / h.dim.next_power_of_two()).clamp(1, (h.q + h.k).next_power_of_two())
}

/// The warps a launch takes when it names none, for both pairings: with 8 heads per program
/// (the tile [`heads_per_program`] picks for head dim 128), 2 warps are the fastest of 2, 4 and 8
/// on Hopper for NeoX ([`qk_norm_rope`]) and GPT-J ([`qk_norm_rope_gptj`]) alike, and 4 or 16
/// heads per program are slower.
pub const DEFAULT_WARPS: u32 = 2;

/// Launches [`qk_norm_rope`] (`neox`) or [`qk_norm_rope_gptj`] over `tokens` tokens of `qkv`
/// with `heads` heads per program (a power of two up to 64) and the tile width the head width
/// rounds up to (64, 128 or 256; `HALF` is half of it), with `warps` warps ([`DEFAULT_WARPS`] if
/// `None`). The head width must be even (the rotation pairs columns); an odd one is refused.
#[allow(clippy::too_many_arguments)]
pub fn launch<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    tokens: usize,
    heads: usize,
    qkv: &mut fuse::Buffer<T>,
    positions: &fuse::Buffer<i64>,
    cos_sin: &fuse::Buffer<T>,
    q_w: &fuse::Buffer<T>,
    k_w: &fuse::Buffer<T>,
    h: Heads,
    eps: f32,
    neox: bool,
) -> fuse::Result<()> {
    if h.dim % 2 != 0 {
        // Both pairings rotate columns in pairs; an odd width would leave one column unpaired
        // (GPT-J's kernel would zero it, NeoX's would leave it out of the norm and unrotated).
        return Err(fuse::Error::InvalidLaunch(format!(
            "qk_norm_rope: head width {} is odd; rotary embedding pairs the columns",
            h.dim
        )));
    }
    let too_big =
        |what: &str| fuse::Error::InvalidLaunch(format!("qk_norm_rope: {what} does not fit an i32"));
    let n = |v: usize, what: &str| i32::try_from(v).map_err(|_| too_big(what));
    let grid = fuse::LaunchConfig::new((
        u32::try_from(tokens).map_err(|_| too_big("tokens"))?,
        u32::try_from((h.q + h.k).div_ceil(heads.max(1))).map_err(|_| too_big("heads"))?,
    ));
    let grid = grid.num_warps(warps.unwrap_or(DEFAULT_WARPS));
    let (nq, nk, nv, dim) = (n(h.q, "n_q")?, n(h.k, "n_k")?, n(h.v, "n_v")?, n(h.dim, "head_dim")?);
    macro_rules! go {
        ($H:literal, $HALF:literal) => {
            if neox {
                qk_norm_rope::launch::<T, $H, $HALF>(
                    device, grid, qkv, positions, cos_sin, q_w, k_w, nq, nk, nv, dim, eps,
                )
            } else {
                qk_norm_rope_gptj::launch::<T, $H, $HALF>(
                    device, grid, qkv, positions, cos_sin, q_w, k_w, nq, nk, nv, dim, eps,
                )
            }
        };
    }
    macro_rules! width {
        ($H:literal) => {
            match h.dim.next_power_of_two() {
                64 => go!($H, 32),
                128 => go!($H, 64),
                256 => go!($H, 128),
                other => Err(fuse::Error::InvalidLaunch(format!(
                    "qk_norm_rope: head width {other} not in 64/128/256"
                ))),
            }
        };
    }
    match heads {
        1 => width!(1),
        2 => width!(2),
        4 => width!(4),
        8 => width!(8),
        16 => width!(16),
        32 => width!(32),
        64 => width!(64),
        other => {
            Err(fuse::Error::InvalidLaunch(format!("qk_norm_rope: {other} heads per program not in 1..=64")))
        }
    }
}
