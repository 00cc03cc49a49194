//! Softmax cross-entropy per row with a label gather (torch's `F.cross_entropy(x, labels,
//! reduction="none")`): `loss[r] = logsumexp(x[r, :]) - x[r, label[r]]`, over a vocabulary wider
//! than a tile. One program per row loops over column blocks of `BLOCK` with an online
//! logsumexp kept per run of 8 consecutive columns: a block is a `[BLOCK / 8, 8]` tile (the
//! `[BLOCK]` lanes reshaped: each run of 8 is one thread's, a 16-byte vector of 2-byte logits),
//! each run keeps a running max `m` and per-lane running sums of `exp(x - m)`, rescaled by
//! `exp(m_old - m_new)` when its max grows, so the loop's max needs no shuffle, no shared memory
//! and no barrier; the runs' (max, sum) pairs fold into the row's once, at the end. Each logit
//! is read once and exponentiated once (and each run's rescale costs one more exponential per 8
//! columns). Each row is read from the aligned element at or before its start, so every block
//! but the row's first and last is read in whole 16-byte vectors whatever the row length
//! (vocabularies like GPT-2's 50257 leave most rows unaligned). The label, the first block and
//! the label's logit are read before the loop needs them, so a row pays one memory round trip up
//! front instead of three in sequence. A row whose label is `ignore_index` (torch's -100) gets
//! loss 0 having read only its first block; a label outside `[0, n_cols)` otherwise gives NaN
//! (torch raises).
//! Logits of any float type; the loss is f32.
//!
//! The running max is kept per lane and combined once at the end, not reduced across the block
//! for every block (which costs shuffles, shared memory and two barriers a block).
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
    // A block's columns as [BLOCK / 8, 8] (the same lanes in the same threads as `[BLOCK]`).
    // The first block is read before the label is known, so that its latency and the label's
    // overlap (a row waits for one memory round trip, not two; an ignored row reads one block
    // it does not use).
    let cols = arange(0, BLOCK);
    let v = load(xa + cols, (cols >= lead) & (cols < end), f32::NEG_INFINITY).reshape([BLOCK / 8, 8]);
    if label == ignore_index {
        store(loss + row, 0.0);
    } else {
        // The label's logit, read now: its latency hides behind the loop.
        let valid = (label >= 0) & (label < n_cols.to(i64));
        let target = load(x + label.to(i32), valid, f32::NAN);
        // `m`: per run of 8, the running max so far; `s`: per lane, the sum of exp(x - m) over
        // its columns so far (exp(a) as exp2(a log2 e), as in `softmax`; exp2(-inf) = 0 for
        // masked lanes). A run with no column yet keeps the lowest finite max, so its
        // exp2(-inf - m) is 0, not NaN.
        let log2e = 1.4426950408889634;
        let mut m = maximum(max(v, 1), f32::MIN);
        let mut s = exp2((v - m.expand_dims(1)) * log2e);
        for start in (BLOCK..body_end).step_by(BLOCK) {
            let v = load(xa + start + arange(0, BLOCK)).reshape([BLOCK / 8, 8]);
            let m_new = maximum(m, max(v, 1));
            s = s * exp2((m - m_new) * log2e).expand_dims(1) + exp2((v - m_new.expand_dims(1)) * log2e);
            m = m_new;
        }
        // The last block (no column if the row ended in the first block or at a block's end).
        let cols = body_end + arange(0, BLOCK);
        let v = load(xa + cols, cols < end, f32::NEG_INFINITY).reshape([BLOCK / 8, 8]);
        let m_new = maximum(m, max(v, 1));
        s = s * exp2((m - m_new) * log2e).expand_dims(1) + exp2((v - m_new.expand_dims(1)) * log2e);
        // The runs folded into the row: its max, and every run's sums rescaled to it. (top -
        // target) + log(total): `top - target` is exact when the two are close (a confident
        // row whose logits are in the thousands), so the loss is not rounded at the scale of
        // `top`.
        let top = max(m_new);
        let total = sum(s * exp2((m_new - top) * log2e).expand_dims(1));
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
/// warps).
pub const BLOCK_16BIT: usize = 2048;

/// The warps of a 2-byte launch unless the caller picks: 8, for blocks of 2048 the fastest of
/// 4 and 8 warps and of blocks of 1024-4096 on Hopper at torch_peers.py's vocabularies. 4-byte
/// launches take the runtime's default (8 warps for blocks of 4096: 16 lanes a thread), level
/// with 16 warps there.
pub const WARPS_16BIT: u32 = 8;

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
    let Ok(c) = i32::try_from(cols) else {
        return Err(fuse::Error::InvalidLaunch(format!("cross_entropy: {cols} columns do not fit i32")));
    };
    let Ok(r) = u32::try_from(rows) else {
        return Err(fuse::Error::InvalidLaunch(format!("cross_entropy: {rows} rows do not fit u32")));
    };
    let grid = fuse::LaunchConfig::new(r);
    if std::mem::size_of::<T>() == 2 {
        let grid = grid.num_warps(warps.unwrap_or(WARPS_16BIT));
        cross_entropy::launch::<T, BLOCK_16BIT>(device, grid, logits, labels, loss, c, c, IGNORE_INDEX)
    } else {
        let grid = match warps {
            Some(w) => grid.num_warps(w),
            None => grid,
        };
        cross_entropy::launch::<T, BLOCK>(device, grid, logits, labels, loss, c, c, IGNORE_INDEX)
    }
}
