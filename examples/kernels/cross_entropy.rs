//! Softmax cross-entropy per row with a label gather (torch's `F.cross_entropy(x, labels,
//! reduction="none")`): `loss[r] = logsumexp(x[r, :]) - x[r, label[r]]`, over a vocabulary wider
//! than a tile. One program per row loops over column blocks of `BLOCK` with an online
//! logsumexp kept per lane (a running max and a sum of `exp(x - max)` in each lane, one exp2 per
//! logit, no cross-thread step inside the loop), the lanes combined once at the end, so each
//! logit is read once and exponentiated once. Each row is read from the aligned element at or before its
//! start, so every block but the row's first and last is read in whole 16-byte vectors whatever
//! the row length (vocabularies like GPT-2's 50257 leave most rows unaligned). A row whose label is `ignore_index` (torch's -100) gets loss
//! 0 without reading its logits; a label outside `[0, n_cols)` otherwise gives NaN (torch raises).
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
    if label == ignore_index {
        store(loss + row, 0.0);
    } else {
        let x = logits + row * stride;
        // The row read from an aligned element: `xa` is 8 elements (16 or 32 bytes) aligned and
        // the row is `xa[lead..end)`, so the blocks of `xa` are whole vectors for any `stride`
        // (a 50257-wide bf16 row starts mid-vector). The first block and the last hold the row's
        // ends, masked; the blocks between are read without a mask.
        let base = row * stride;
        let first = (base / 8) * 8;
        let lead = base - first;
        let end = lead + n_cols;
        let xa = logits + first;
        let body_end = maximum(BLOCK, (end / BLOCK) * BLOCK);
        // An online logsumexp per lane, so the loop has no cross-thread step (no block max, no
        // barrier): `m` holds each lane's running max (starting at f32::MIN, finite, so that
        // `v - m` is never `-inf - -inf`) and `s` its sum of exp(x - m). A logit `v` is folded in
        // with one exp2: with `d` = (v - m) in log2 units, `e = exp2(-|d|)` is exp(v - m) when
        // `v` is not above the max and exp(m - v) (the old sum's rescale) when it is. A masked
        // lane reads -inf: `e` = 0, nothing changes.
        let cols = arange(0, BLOCK);
        let v = load(xa + cols, (cols >= lead) & (cols < end), f32::NEG_INFINITY);
        let mut m = full([BLOCK], f32::MIN);
        let mut s = zeros([BLOCK]);
        let d = (v - m) * 1.4426950408889634;
        let e = exp2(-abs(d));
        s = where_(d > 0.0, s * e + 1.0, s + e);
        m = maximum(m, v);
        for start in (BLOCK..body_end).step_by(BLOCK) {
            let v = load(xa + start + arange(0, BLOCK));
            let d = (v - m) * 1.4426950408889634;
            let e = exp2(-abs(d));
            s = where_(d > 0.0, s * e + 1.0, s + e);
            m = maximum(m, v);
        }
        // The last block (no column if the row ended in the first block or at a block's end).
        let cols = body_end + arange(0, BLOCK);
        let v = load(xa + cols, cols < end, f32::NEG_INFINITY);
        let d = (v - m) * 1.4426950408889634;
        let e = exp2(-abs(d));
        s = where_(d > 0.0, s * e + 1.0, s + e);
        m = maximum(m, v);
        // The lanes combined once: the row max, and each lane's sum rescaled to it.
        let row_max = max(m);
        let lse = row_max + log(sum(s * exp2((m - row_max) * 1.4426950408889634)));
        let valid = (label >= 0) & (label < n_cols.to(i64));
        let nan = f32::INFINITY - f32::INFINITY; // the language has no `f32::NAN`
        let target = load(x + label.to(i32), valid, nan);
        store(loss + row, lse - target);
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

/// The column block of the loop: 4096 logits per step (16 KiB of f32, 8 KiB of bf16).
pub const BLOCK: usize = 4096;

/// Launches [`cross_entropy`] over a contiguous `rows x cols` matrix of logits in column blocks of
/// [`BLOCK`] (`warps`: the runtime's default if `None`).
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
    let grid = match warps {
        Some(w) => grid.num_warps(w),
        None => grid,
    };
    cross_entropy::launch::<T, BLOCK>(device, grid, logits, labels, loss, c, c, IGNORE_INDEX)
}
