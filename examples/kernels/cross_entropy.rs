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
//!
//! Few rows of a wide vocabulary leave the GPU idle at the end: 4096 rows of 50257 bf16 logits
//! run as about three full waves of programs and a fourth of a tenth, whose few programs each
//! still read a whole row. So [`launch`] splits such rows into `segments` of whole blocks:
//! [`cross_entropy_partial`] reduces one segment of one row per program to its max and sum of
//! exponentials (and reads the label's logit where the label falls in it), and
//! [`cross_entropy_combine`] folds a row's segments into its loss.
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

/// One segment of one row (program `(row, segment)`): columns `[seg * seg_cols, (seg + 1) *
/// seg_cols)` of the row read from its aligned element (as in [`cross_entropy`]: `seg_cols` a
/// multiple of `BLOCK`, so every block but a segment's first and last is read whole and without a
/// mask). Writes the segment's max `m` and `sum(exp(x - m))` to `part[at]` and `part[rows * segs
/// + at]` (`at = row * segs + seg`; a segment past the row's end writes -inf and 0), and the
/// segment that holds the row's label writes its logit to `part[2 * rows * segs + row]`.
#[fused_kernel]
pub fn cross_entropy_partial<T: Float, const BLOCK: usize>(
    logits: *const T,
    labels: *const i64,
    part: *mut f32,
    stride: i32,
    n_cols: i32,
    seg_cols: i32,
) {
    let row = program_id(0);
    let seg = program_id(1);
    let n_rows = num_programs(0);
    let n_segs = num_programs(1);
    let base = row * stride;
    let first = (base / 8) * 8;
    let lead = base - first;
    let end = lead + n_cols;
    let xa = logits + first;
    let lo = seg * seg_cols;
    let hi = minimum(lo + seg_cols, end);
    let at = row * n_segs + seg;
    // The label's logit, if this segment holds it (a label outside the row is read by none).
    let label = load(labels + row);
    let col = label + lead.to(i64);
    if (label >= 0) & (label < n_cols.to(i64)) & (col >= lo.to(i64)) & (col < hi.to(i64)) {
        store(part + 2 * n_rows * n_segs + row, load(xa + col.to(i32)));
    }
    if lo < hi {
        // The first block holds a column of the row (`lead < 8 <= BLOCK`), so `m` is finite.
        let cols = lo + arange(0, BLOCK);
        let v = load(xa + cols, (cols >= lead) & (cols < hi), f32::NEG_INFINITY);
        let mut m = max(v);
        let mut s = exp2((v - m) * 1.4426950408889634);
        let body_end = lo + maximum(BLOCK, ((hi - lo) / BLOCK) * BLOCK);
        for start in (lo + BLOCK..body_end).step_by(BLOCK) {
            let v = load(xa + start + arange(0, BLOCK));
            let m_new = maximum(m, max(v));
            s = s * exp2((m - m_new) * 1.4426950408889634) + exp2((v - m_new) * 1.4426950408889634);
            m = m_new;
        }
        if body_end < hi {
            let cols = body_end + arange(0, BLOCK);
            let v = load(xa + cols, cols < hi, f32::NEG_INFINITY);
            let m_new = maximum(m, max(v));
            s = s * exp2((m - m_new) * 1.4426950408889634) + exp2((v - m_new) * 1.4426950408889634);
            m = m_new;
        }
        store(part + at, m);
        store(part + n_rows * n_segs + at, sum(s));
    } else {
        store(part + at, f32::NEG_INFINITY);
        store(part + n_rows * n_segs + at, 0.0);
    }
}

/// The losses of `ROWS` rows from [`cross_entropy_partial`]'s `n_segs` segments a row (`SEGS >=
/// n_segs`): the row's max over its segments' maxima, the segments' sums rescaled to it, and the
/// label's logit; 0 where the label is `ignore_index`, NaN where it is outside `[0, n_cols)`.
#[fused_kernel]
pub fn cross_entropy_combine<const ROWS: usize, const SEGS: usize>(
    part: *const f32,
    labels: *const i64,
    loss: *mut f32,
    n_rows: i32,
    n_segs: i32,
    n_cols: i32,
    ignore_index: i64,
) {
    let rows = program_id(0) * ROWS + arange(0, ROWS);
    let row_ok = rows < n_rows;
    let segs = arange(0, SEGS);
    let ok = row_ok.expand_dims(1) & (segs < n_segs).expand_dims(0);
    let at = rows.expand_dims(1) * n_segs + segs.expand_dims(0);
    let pm = load(part + at, ok, f32::NEG_INFINITY);
    let ps = load(part + n_rows * n_segs + at, ok, 0.0);
    let label = load(labels + rows, row_ok, ignore_index);
    let valid = (label >= 0) & (label < n_cols.to(i64));
    let nan = f32::INFINITY - f32::INFINITY;
    let target = load(part + 2 * n_rows * n_segs + rows, row_ok & valid, nan);
    let m = max(pm, 1);
    let s = sum(ps * exp2((pm - m.expand_dims(1)) * 1.4426950408889634), 1);
    store(loss + rows, where_(label == ignore_index, 0.0, (m - target) + log(s)), row_ok);
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

/// The segments [`launch`] splits each row into for `rows x cols` logits of `elem_bytes`-byte
/// elements: enough that `rows * segments` programs (about 32768) keep the GPU busy to the end,
/// each segment at least 4 column blocks; 1 (one program a row, no scratch) for 32768 rows or
/// more. `FUSE_CE_SEGMENTS` overrides it (a tuning knob).
pub fn auto_segments(rows: usize, cols: usize, elem_bytes: usize) -> usize {
    if let Some(s) = std::env::var("FUSE_CE_SEGMENTS").ok().and_then(|v| v.parse::<usize>().ok()) {
        return s.max(1);
    }
    let blocks = cols.div_ceil(block_for(elem_bytes));
    32768usize.div_ceil(rows.max(1)).min(blocks / 4).max(1)
}

/// The f32 elements of the scratch [`launch_split`] needs for `rows` rows in `segments`
/// segments: two per segment (its max and sum) and one per row (the label's logit); 0 for one
/// segment.
pub fn scratch_len(rows: usize, segments: usize) -> usize {
    if segments <= 1 {
        0
    } else {
        rows * (2 * segments + 1)
    }
}

/// The column block for `elem_bytes`-byte logits.
fn block_for(elem_bytes: usize) -> usize {
    if elem_bytes == 2 {
        BLOCK_16BIT
    } else {
        BLOCK
    }
}

/// Launches the cross-entropy of a contiguous `rows x cols` matrix of logits with
/// [`auto_segments`] segments a row, allocating the scratch that takes (see [`launch_split`]
/// to pass one, e.g. under a CUDA graph capture, where allocating is refused).
pub fn launch<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    logits: &fuse::Buffer<T>,
    labels: &fuse::Buffer<i64>,
    loss: &mut fuse::Buffer<f32>,
    rows: usize,
    cols: usize,
) -> fuse::Result<()> {
    let segments = auto_segments(rows, cols, std::mem::size_of::<T>());
    let mut scratch = device.zeros::<f32>(scratch_len(rows, segments))?;
    launch_split(device, warps, segments, logits, labels, loss, &mut scratch, rows, cols)
}

/// Launches the cross-entropy of a contiguous `rows x cols` matrix of logits in column blocks of
/// [`BLOCK`] ([`BLOCK_16BIT`] for f16 and bf16) with `warps` warps if given (else
/// [`WARPS_16BIT`] for f16 and bf16, the runtime's default for f32): with one segment,
/// [`cross_entropy`] (one program a row, `scratch` unused); with more, [`cross_entropy_partial`]
/// on `rows x segments` programs (segments of whole blocks; fewer than asked if the row has
/// fewer blocks), then [`cross_entropy_combine`], through `scratch` (at least
/// [`scratch_len`]`(rows, segments)` elements, at most 32 segments).
#[allow(clippy::too_many_arguments)]
pub fn launch_split<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    segments: usize,
    logits: &fuse::Buffer<T>,
    labels: &fuse::Buffer<i64>,
    loss: &mut fuse::Buffer<f32>,
    scratch: &mut fuse::Buffer<f32>,
    rows: usize,
    cols: usize,
) -> fuse::Result<()> {
    let bad = |what: String| Err(fuse::Error::InvalidLaunch(format!("cross_entropy: {what}")));
    let Ok(c) = i32::try_from(cols) else {
        return bad(format!("{cols} columns do not fit i32"));
    };
    let Ok(r) = u32::try_from(rows) else {
        return bad(format!("{rows} rows do not fit u32"));
    };
    if !(1..=32).contains(&segments) {
        return bad(format!("{segments} segments: 1 to 32"));
    }
    let sixteen_bit = std::mem::size_of::<T>() == 2;
    let with_warps = |grid: fuse::LaunchConfig| match (warps, sixteen_bit) {
        (Some(w), _) => grid.num_warps(w),
        (None, true) => grid.num_warps(WARPS_16BIT),
        (None, false) => grid,
    };
    // Segments of whole blocks in the rows' aligned coordinates (a row starts up to 7 elements
    // into its first aligned vector), no more than the widest row needs.
    let block = block_for(std::mem::size_of::<T>());
    let span = cols + 7;
    let seg_cols = span.div_ceil(segments).div_ceil(block) * block;
    let segments = span.div_ceil(seg_cols);
    if segments == 1 {
        let grid = with_warps(fuse::LaunchConfig::new(r));
        return if sixteen_bit {
            cross_entropy::launch::<T, BLOCK_16BIT>(device, grid, logits, labels, loss, c, c, IGNORE_INDEX)
        } else {
            cross_entropy::launch::<T, BLOCK>(device, grid, logits, labels, loss, c, c, IGNORE_INDEX)
        };
    }
    if scratch.len() < scratch_len(rows, segments) {
        return bad(format!(
            "a scratch of {} elements for {rows} rows in {segments} segments: scratch_len gives {}",
            scratch.len(),
            scratch_len(rows, segments)
        ));
    }
    let Ok(sc) = i32::try_from(seg_cols) else {
        return bad(format!("segments of {seg_cols} columns do not fit i32"));
    };
    let grid = with_warps(fuse::LaunchConfig::new((r, segments as u32)));
    if sixteen_bit {
        cross_entropy_partial::launch::<T, BLOCK_16BIT>(device, grid, logits, labels, scratch, c, c, sc)?;
    } else {
        cross_entropy_partial::launch::<T, BLOCK>(device, grid, logits, labels, scratch, c, c, sc)?;
    }
    let n = segments as i32;
    let combine_grid = |rows_a_program: usize| fuse::LaunchConfig::new(rows.div_ceil(rows_a_program) as u32);
    macro_rules! combine {
        ($S:literal) => {
            cross_entropy_combine::launch::<{ 1024 / $S }, $S>(
                device,
                combine_grid(1024 / $S),
                scratch,
                labels,
                loss,
                r as i32,
                n,
                c,
                IGNORE_INDEX,
            )
        };
    }
    match segments.next_power_of_two() {
        2 => combine!(2),
        4 => combine!(4),
        8 => combine!(8),
        16 => combine!(16),
        _ => combine!(32),
    }
}
