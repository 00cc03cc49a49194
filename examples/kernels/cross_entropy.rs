//! Softmax cross-entropy per row with a label gather (torch's `F.cross_entropy(x, labels,
//! reduction="none")`): `loss[r] = logsumexp(x[r, :]) - x[r, label[r]]`, over a vocabulary wider
//! than a tile. One program per row loops over column blocks of `BLOCK` with an online
//! logsumexp: a running max `m` (a scalar: one block reduction per block) and per-lane running
//! sums of `exp(x - m)`, rescaled by `exp(m_old - m_new)` when the max grows, so each logit is
//! read once and exponentiated once. Each row is read from the aligned element at or before its
//! start, so every block but the row's first and last is read in whole 16-byte vectors whatever
//! the row length (vocabularies like GPT-2's 50257 leave most rows unaligned). The label, the
//! first block and the label's logit are read before the loop needs them, so a row pays one
//! memory round trip up front instead of three in sequence. A row whose label is `ignore_index`
//! (torch's -100) gets loss 0 having read only its first block; a label outside `[0, n_cols)`
//! otherwise gives NaN (torch raises).
//! Logits of any float type; the loss is f32.
use fuse::fused_kernel;

#[fused_kernel]
pub fn cross_entropy<T: Float, const BLOCK: usize>(
    logits: *const T,
    labels: *const i64,
    loss: *mut f32,
    stride: i32,
    n_cols: i32,
    ignore_index: i64,
) {
    let row = program_id(0);
    let label = load(labels + row);
    // The row read from an aligned element: `xa` is 8 elements (16 or 32 bytes) aligned and
    // the row is `xa[lead..end)`, so the blocks of `xa` are whole vectors for any `stride`
    // (a 50257-wide bf16 row starts mid-vector). The first block and the last hold the row's
    // ends, masked; the blocks between are read without a mask.
    let base = row * stride;
    let x = logits + base;
    let first = (base / 8) * 8;
    let lead = base - first;
    let end = lead + n_cols;
    let xa = logits + first;
    let body_end = maximum(BLOCK, (end / BLOCK) * BLOCK);
    // The first block is read before the label is known, so that its latency and the label's
    // overlap (a row waits for one memory round trip, not two; an ignored row reads one block
    // it does not use).
    let cols = arange(0, BLOCK);
    let v = load(xa + cols, (cols >= lead) & (cols < end), f32::NEG_INFINITY);
    if label == ignore_index {
        store(loss + row, 0.0);
    } else {
        // The label's logit, read now: its latency hides behind the loop.
        let valid = (label >= 0) & (label < n_cols.to(i64));
        let nan = f32::INFINITY - f32::INFINITY; // the language has no `f32::NAN`
        let target = load(x + label.to(i32), valid, nan);
        // `m`: the running max of the row so far (finite: the block holds a column). `s`: per
        // lane, the sum of exp(x - m) over its columns so far; exp(a) as exp2(a log2 e), as in
        // `softmax`, and exp2(-inf) = 0 for masked lanes.
        let mut m = max(v);
        let mut s = exp2((v - m) * 1.4426950408889634);
        for start in (BLOCK..body_end).step_by(BLOCK) {
            let v = load(xa + start + arange(0, BLOCK));
            let m_new = maximum(m, max(v));
            s = s * exp2((m - m_new) * 1.4426950408889634) + exp2((v - m_new) * 1.4426950408889634);
            m = m_new;
        }
        // The last block (no column if the row ended in the first block or at a block's end).
        let cols = body_end + arange(0, BLOCK);
        let v = load(xa + cols, cols < end, f32::NEG_INFINITY);
        let m_new = maximum(m, max(v));
        s = s * exp2((m - m_new) * 1.4426950408889634) + exp2((v - m_new) * 1.4426950408889634);
        m = m_new;
        // (m - target) + log(sum): `m - target` is exact when the two are close (a confident
        // row whose logits are in the thousands), so the loss is not rounded at the scale of `m`.
        store(loss + row, (m - target) + log(sum(s)));
    }
}

/// [`cross_entropy`] with a running max per run of 8 columns instead of one per row: a block is
/// a `[BLOCK / 8, 8]` tile, each run of 8 held by one thread (a 16-byte vector of 2-byte
/// logits), so the loop's max needs no shuffle, no shared memory and no barrier; the runs'
/// (max, sum) pairs fold into the row's once, at the end. A tuning variant (the bench's
/// `FUSE_BENCH_CE_VARIANT=runs`).
#[fused_kernel]
pub fn cross_entropy_runs<T: Float, const BLOCK: usize>(
    logits: *const T,
    labels: *const i64,
    loss: *mut f32,
    stride: i32,
    n_cols: i32,
    ignore_index: i64,
) {
    let row = program_id(0);
    let label = load(labels + row);
    let base = row * stride;
    let x = logits + base;
    let first = (base / 8) * 8;
    let lead = base - first;
    let end = lead + n_cols;
    let xa = logits + first;
    let body_end = maximum(BLOCK, (end / BLOCK) * BLOCK);
    // A block's columns as [BLOCK / 8, 8] (the same lanes in the same threads as `[BLOCK]`).
    let cols = arange(0, BLOCK);
    let v = load(xa + cols, (cols >= lead) & (cols < end), f32::NEG_INFINITY).reshape([BLOCK / 8, 8]);
    if label == ignore_index {
        store(loss + row, 0.0);
    } else {
        let valid = (label >= 0) & (label < n_cols.to(i64));
        let nan = f32::INFINITY - f32::INFINITY;
        let target = load(x + label.to(i32), valid, nan);
        // A run with no column yet keeps the lowest finite max, so its exp2(-inf - m) is 0.
        let mut m = maximum(max(v, 1), f32::MIN);
        let mut s = exp2((v - m.expand_dims(1)) * 1.4426950408889634);
        for start in (BLOCK..body_end).step_by(BLOCK) {
            let v = load(xa + start + arange(0, BLOCK)).reshape([BLOCK / 8, 8]);
            let m_new = maximum(m, max(v, 1));
            s = s * exp2((m - m_new) * 1.4426950408889634).expand_dims(1)
                + exp2((v - m_new.expand_dims(1)) * 1.4426950408889634);
            m = m_new;
        }
        let cols = body_end + arange(0, BLOCK);
        let v = load(xa + cols, cols < end, f32::NEG_INFINITY).reshape([BLOCK / 8, 8]);
        let m_new = maximum(m, max(v, 1));
        s = s * exp2((m - m_new) * 1.4426950408889634).expand_dims(1)
            + exp2((v - m_new.expand_dims(1)) * 1.4426950408889634);
        // The row's max as a full reduction of the runs' maxima broadcast over the block (free:
        // each run's max is in its thread), so the maxima stay in registers through the loop.
        let top = max(broadcast_to(m_new.expand_dims(1), [BLOCK / 8, 8]));
        let total = sum(s * exp2((m_new - top) * 1.4426950408889634).expand_dims(1));
        store(loss + row, (top - target) + log(total));
    }
}

/// Float64 reference (torch's rule: loss 0 where the label is `ignore_index`).
pub fn reference(x: &[f64], labels: &[i64], cols: usize, ignore_index: i64) -> Vec<f64> {
    labels
        .iter()
        .enumerate()
        .map(|(r, &label)| {
            if label == ignore_index {
                return 0.0;
            }
            let row = &x[r * cols..(r + 1) * cols];
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            lse - row[label as usize]
        })
        .collect()
}

/// torch's default `ignore_index`.
pub const IGNORE_INDEX: i64 = -100;

/// The column block of the loop for 4-byte logits: 4096 (16 KiB a step).
pub const BLOCK: usize = 4096;

/// The column block for 2-byte logits: 2048 (4 KiB a step, one 16-byte vector a thread at 8
/// warps). On an H100 (2026-11-25, bf16 4096x50257) 2048 ran 0.161 ms against 0.169 for 4096 and
/// 0.197 for 8192; f32 was fastest at 4096.
pub const BLOCK_16BIT: usize = 2048;

/// The warps of a 2-byte launch unless the caller picks: 4. On an H200 (2026-11-27, session 15,
/// bf16 at blocks of 2048) 4 warps took 0.130 / 0.145 / 0.294 ms at 4096x50257 / 8192x32000 /
/// 4096x128256 against 8 warps' 0.135 / 0.161 / 0.307 (2 warps 0.137 / 0.145; blocks of 4096 or
/// 8192 slower at every warp count); on an H100 (session 11) 4 and 8 warps were level (0.162
/// and 0.161 ms at 50257). 4-byte launches take the runtime's default (16 warps here), which was
/// the faster one at 128256 columns on the H100 (0.686 ms against 0.701 for 8 warps; 0.282 and
/// 0.290 at 50257 the other way round).
pub const WARPS_16BIT: u32 = 4;

/// Launches [`cross_entropy`] over a contiguous `rows x cols` matrix of logits in column blocks of
/// [`BLOCK`] ([`BLOCK_16BIT`] for f16 and bf16), with `warps` warps if given (else
/// [`WARPS_16BIT`] for f16 and bf16, the runtime's default for f32).
pub fn launch<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    logits: &fuse::Buffer<T>,
    labels: &fuse::Buffer<i64>,
    loss: &mut fuse::Buffer<f32>,
    rows: usize,
    cols: usize,
) -> fuse::Result<()> {
    launch_variant(device, warps, false, logits, labels, loss, rows, cols)
}

/// [`launch`] of [`cross_entropy`] (`runs` false) or [`cross_entropy_runs`].
#[allow(clippy::too_many_arguments)]
pub fn launch_variant<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    runs: bool,
    logits: &fuse::Buffer<T>,
    labels: &fuse::Buffer<i64>,
    loss: &mut fuse::Buffer<f32>,
    rows: usize,
    cols: usize,
) -> fuse::Result<()> {
    let Ok(c) = i32::try_from(cols) else {
        return Err(fuse::Error::InvalidLaunch(format!("cross_entropy: {cols} columns do not fit i32")));
    };
    let Ok(r) = u32::try_from(rows) else {
        return Err(fuse::Error::InvalidLaunch(format!("cross_entropy: {rows} rows do not fit u32")));
    };
    let grid = fuse::LaunchConfig::new(r);
    macro_rules! go {
        ($B:expr, $grid:expr) => {
            if runs {
                cross_entropy_runs::launch::<T, { $B }>(
                    device,
                    $grid,
                    logits,
                    labels,
                    loss,
                    c,
                    c,
                    IGNORE_INDEX,
                )
            } else {
                cross_entropy::launch::<T, { $B }>(device, $grid, logits, labels, loss, c, c, IGNORE_INDEX)
            }
        };
    }
    if std::mem::size_of::<T>() == 2 {
        go!(BLOCK_16BIT, grid.num_warps(warps.unwrap_or(WARPS_16BIT)))
    } else {
        let grid = match warps {
            Some(w) => grid.num_warps(w),
            None => grid,
        };
        go!(BLOCK, grid)
    }
}
