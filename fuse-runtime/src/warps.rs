//! The default warps per program ([`default_num_warps`]): from a kernel's shape (reductions,
//! tile loads, element sizes, math) and its largest tile, and more for a grid too small to fill
//! the GPU.
//!
//! Bottom layer (a pure function of the IR): imports nothing of the crate.

use fuse_ir::{Expr, Kernel, Stmt, UnaryOp};

/// The default warps per program, from the largest tile length `L` (a power of two) and the
/// kernel's shape (reductions, loads, element sizes, math), as elements per thread
/// (`L / (32 * warps)`); the numbers are tuned for Hopper GPUs (H100, H200):
/// * element-wise kernels: 8 elements per thread (`clamp(L / 256, 1, 16)`), 16 where the kernel
///   does math (`erf`, `exp`, `rand`, ...) and 32 where it does math on 1- or 2-byte loads: more
///   independent lanes per thread hide the long dependent chains, and per-thread setup (a
///   division, say) is spread over more of them;
/// * a reduction over one streamed tile (softmax-like): 2-byte elements 16 per thread
///   (`clamp(L / 512, 1, 16)`); 4-byte ones 4 warps up to `L = 4096`, 16 above (Triton's rule,
///   but 4 warps also at 4096);
/// * a reduction with several tile loads (layernorm-like: x, w, b), whose tiles stay live across
///   the reductions: 2-byte elements 32 per thread (`clamp(L / 1024, 1, 16)`) but at least 8 warps
///   from `L = 4096`; 4-byte ones `clamp(L / 256, 1, 8)` up to 2048 wide (Triton's rule) and 16
///   warps from 4096.
///
/// A kernel that reduces a 2-D tile along an axis (`x.sum(1)`, `x.max(0)`, `argmax(x, 1)`)
/// holds all the rows of its largest tile at once and takes 16 elements per thread
/// (`clamp(L / 512, 1, 16)`), whatever its loads and element size: the rows stay live in
/// registers across the reductions together with their per-row results and column-broadcast
/// operands, and a row reduction costs the same shuffles however many warps hold the rows (a
/// row spans `C / VEC` threads either way), so more warps only add threads to schedule. 32
/// elements per thread would put a `[8, 128]` f16 tile (qk_norm_rope's) on one warp at 255
/// registers a thread.
///
/// Never more warps than `L / 32`.
pub fn default_num_warps(kernel: &Kernel, consts: &[u64]) -> u32 {
    num_warps_for(kernel.tile_lens().iter().filter_map(|l| l.eval(consts)).max(), WarpShape::of(kernel))
}

/// The features of a kernel that its default `num_warps` depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WarpShape {
    /// Some tile is reduced (to a scalar or along an axis).
    reduces: bool,
    /// Some 2-D tile is reduced along an axis.
    pub(crate) axis_reduces: bool,
    tile_loads: usize,
    /// Some tile load has 1- or 2-byte elements.
    narrow: bool,
    /// Math functions or `rand` on tiles.
    math: bool,
}

impl WarpShape {
    pub(crate) fn of(kernel: &Kernel) -> WarpShape {
        let mut shape =
            WarpShape { reduces: false, axis_reduces: false, tile_loads: 0, narrow: false, math: false };
        kernel.visit_stmts(&mut |s| match s {
            Stmt::Assign { expr: Expr::Reduce(..) | Expr::ArgReduce { axis: None, .. }, .. } => {
                shape.reduces = true
            }
            Stmt::Assign {
                expr: Expr::ReduceAxis { .. } | Expr::ArgReduce { axis: Some(_), .. }, ..
            } => {
                shape.reduces = true;
                shape.axis_reduces = true;
            }
            Stmt::Assign { dst, expr: Expr::Load { .. } } if !kernel.ty(*dst).shape.is_scalar() => {
                shape.tile_loads += 1;
                shape.narrow |= kernel.ty(*dst).dtype.size_bytes() <= 2;
            }
            Stmt::Assign { dst, expr: Expr::Rand { .. } } if !kernel.ty(*dst).shape.is_scalar() => {
                shape.math = true
            }
            Stmt::Assign { dst, expr: Expr::Unary(op, _) }
                if !kernel.ty(*dst).shape.is_scalar() && UnaryOp::MATH.contains(op) =>
            {
                shape.math = true
            }
            _ => {}
        });
        shape
    }
}

/// The elements of its largest tile a thread of an axis-reducing kernel holds by default.
const AXIS_REDUCE_ELEMS: u64 = 16;

pub(crate) fn num_warps_for(largest_tile: Option<u64>, shape: WarpShape) -> u32 {
    let l = largest_tile.unwrap_or(1);
    let w = match shape {
        WarpShape { axis_reduces: true, .. } => (l / (32 * AXIS_REDUCE_ELEMS)).clamp(1, 16),
        WarpShape { reduces: false, math: false, .. } => (l / 256).clamp(1, 16),
        WarpShape { reduces: false, math: true, narrow: true, .. } => (l / 1024).clamp(1, 16),
        WarpShape { reduces: false, math: true, .. } => (l / 512).clamp(1, 16),
        WarpShape { tile_loads: 0..=1, narrow: true, .. } => (l / 512).clamp(1, 16),
        WarpShape { tile_loads: 0..=1, narrow: false, .. } if l <= 4096 => 4,
        WarpShape { tile_loads: 0..=1, narrow: false, .. } => 16,
        WarpShape { narrow: true, .. } if l >= 4096 => (l / 1024).clamp(8, 16),
        WarpShape { narrow: true, .. } => (l / 1024).clamp(1, 16),
        _ if l >= 4096 => 16,
        _ => (l / 256).clamp(1, 8),
    };
    w.min((l / 32).max(1)) as u32
}

/// The default for a launch of `programs` programs on a GPU with `sms` multiprocessors, for a
/// kernel of this shape whose largest tile is `largest_tile`: [`num_warps_for`], then more for a
/// grid too small to fill the GPU ([`fill_gpu`]; axis reductions keep [`AXIS_REDUCE_ELEMS`]
/// elements a thread, other kernels 8).
pub(crate) fn num_warps_for_grid(
    largest_tile: Option<u64>,
    shape: WarpShape,
    programs: u64,
    sms: u32,
) -> u32 {
    let min_elems = if shape.axis_reduces { AXIS_REDUCE_ELEMS } else { 8 };
    fill_gpu(num_warps_for(largest_tile, shape), largest_tile.unwrap_or(1), min_elems, programs, sms)
}

/// A grid too small to give each multiprocessor its 64 resident warps at `warps` per program
/// leaves the GPU latency-bound: double the warps (up to 16) while it still is and every thread
/// keeps at least `min_elems` elements of the largest tile `l`. 8 for most kernels (f16
/// LayerNorm 4096x1024 on an H200's 132 multiprocessors: 4 warps instead of 1); axis reductions
/// keep their 16 (`AXIS_REDUCE_ELEMS`, see [`default_num_warps`]): 16384 rows of 256 in
/// `[8, 256]` tiles already give an H100 62 of its 64 warps a multiprocessor on 4 warps.
fn fill_gpu(mut warps: u32, l: u64, min_elems: u64, programs: u64, sms: u32) -> u32 {
    while programs.saturating_mul(u64::from(warps)) < 64 * u64::from(sms)
        && l / (64 * u64::from(warps)) >= min_elems
        && warps < 16
    {
        warps *= 2;
    }
    warps
}

#[cfg(test)]
mod tests {
    use super::{num_warps_for, WarpShape};

    const fn shape(reduces: bool, tile_loads: usize, narrow: bool, math: bool) -> WarpShape {
        WarpShape { reduces, axis_reduces: false, tile_loads, narrow, math }
    }
    const fn rows(s: WarpShape) -> WarpShape {
        WarpShape { reduces: true, axis_reduces: true, ..s }
    }
    const ELEMENTWISE: WarpShape = shape(false, 3, false, false);
    const DROPOUT: WarpShape = shape(false, 2, true, true);
    const DROPOUT_F32: WarpShape = shape(false, 2, false, true);
    const SOFTMAX: WarpShape = shape(true, 1, false, true);
    const SOFTMAX_F16: WarpShape = shape(true, 1, true, true);
    const LAYERNORM: WarpShape = shape(true, 3, false, false);
    const LAYERNORM_F16: WarpShape = shape(true, 3, true, false);
    // The same with axis reductions of 2-D tiles; QK_NORM_ROPE's loads: x, its partner, the two
    // weights, cos and sin.
    const SOFTMAX_ROWS: WarpShape = rows(SOFTMAX);
    const SOFTMAX_ROWS_F16: WarpShape = rows(SOFTMAX_F16);
    const LAYERNORM_ROWS_F16: WarpShape = rows(LAYERNORM_F16);
    const QK_NORM_ROPE_F16: WarpShape = rows(shape(true, 6, true, true));

    #[test]
    fn num_warps_elementwise() {
        assert_eq!(num_warps_for(None, ELEMENTWISE), 1);
        assert_eq!(num_warps_for(Some(64), ELEMENTWISE), 1);
        assert_eq!(num_warps_for(Some(1024), ELEMENTWISE), 4);
        assert_eq!(num_warps_for(Some(1024), DROPOUT), 1);
        assert_eq!(num_warps_for(Some(1024), DROPOUT_F32), 2);
        assert_eq!(num_warps_for(Some(4096), ELEMENTWISE), 16);
        assert_eq!(num_warps_for(Some(1 << 20), ELEMENTWISE), 16);
    }

    #[test]
    fn num_warps_one_stream_reduction() {
        // Per largest tile L: the warps for 4-byte elements, and for 2-byte ones.
        let lens = [32, 64, 512, 1024, 2048, 4096, 8192, 16384];
        let warps = [1, 2, 4, 4, 4, 4, 16, 16];
        let warps_f16 = [1, 1, 1, 2, 4, 8, 16, 16];
        for ((l, w), w16) in lens.into_iter().zip(warps).zip(warps_f16) {
            assert_eq!(num_warps_for(Some(l), SOFTMAX), w, "L = {l}");
            assert_eq!(num_warps_for(Some(l), SOFTMAX_F16), w16, "f16 L = {l}");
        }
    }

    #[test]
    fn num_warps_several_streams() {
        for (l, w, w16) in
            [(256, 1, 1), (1024, 4, 1), (2048, 8, 2), (4096, 16, 8), (8192, 16, 8), (65536, 16, 16)]
        {
            assert_eq!(num_warps_for(Some(l), LAYERNORM), w, "L = {l}");
            assert_eq!(num_warps_for(Some(l), LAYERNORM_F16), w16, "f16 L = {l}");
        }
    }

    #[test]
    fn axis_reductions_take_16_elements_per_thread() {
        // qk_norm_rope's [8, 128] f16 tile: 2 warps (32 elements a thread gave 1: 255 registers).
        assert_eq!(num_warps_for(Some(1024), QK_NORM_ROPE_F16), 2);
        assert_eq!(num_warps_for(Some(1024), rows(LAYERNORM_F16)), 2);
        // The rows kernels' [ROWS, BLOCK] tiles of 2048 lanes: 4 warps, f32 LayerNorm's 1-D rule
        // (8) included.
        for shape in [SOFTMAX_ROWS, SOFTMAX_ROWS_F16, LAYERNORM_ROWS_F16, rows(LAYERNORM)] {
            assert_eq!(num_warps_for(Some(2048), shape), 4, "{shape:?}");
        }
        // At most 16 warps, never more than L / 32, at least 1.
        assert_eq!(num_warps_for(Some(8192), SOFTMAX_ROWS), 16);
        assert_eq!(num_warps_for(Some(1 << 16), LAYERNORM_ROWS_F16), 16);
        assert_eq!(num_warps_for(Some(512), QK_NORM_ROPE_F16), 1);
        assert_eq!(num_warps_for(Some(16), SOFTMAX_ROWS), 1);
        for l in (0..20).map(|i| 1u64 << i) {
            for s in [SOFTMAX, SOFTMAX_F16, LAYERNORM, LAYERNORM_F16] {
                let two_d = u64::from(num_warps_for(Some(l), rows(s)));
                assert_eq!(two_d, (l / 512).clamp(1, 16), "L = {l} {s:?}");
            }
        }
    }

    #[test]
    fn small_grids_get_more_warps_while_threads_keep_their_minimum() {
        use super::fill_gpu;
        assert_eq!(fill_gpu(1, 1024, 8, 4096, 132), 4, "f16 LayerNorm 4096x1024 on 132 SMs");
        assert_eq!(fill_gpu(1, 1024, 8, 32768, 132), 1, "32768 rows fill the GPU at 1 warp");
        assert_eq!(fill_gpu(1, 512, 8, 1024, 132), 2, "8 elements per thread at least");
        assert_eq!(fill_gpu(4, 1024, 8, 1024, 132), 4, "already 8 per thread");
        assert_eq!(fill_gpu(8, 1 << 20, 8, 1, 132), 16, "at most 16");
        // Axis reductions keep 16 a thread: [8, 256] tiles over 16384 rows stay on 4 warps.
        assert_eq!(fill_gpu(4, 2048, 16, 2048, 132), 4, "16384x256 LayerNorm rows");
        assert_eq!(fill_gpu(4, 2048, 8, 2048, 132), 8, "the 1-D minimum would double it");
        assert_eq!(fill_gpu(1, 2048, 16, 16, 132), 4, "a tiny grid: down to 16 a thread");
    }

    #[test]
    fn num_warps_is_always_a_power_of_two_in_range() {
        for l in (0..20).map(|i| 1u64 << i) {
            for shape in [
                ELEMENTWISE,
                DROPOUT,
                SOFTMAX,
                SOFTMAX_F16,
                LAYERNORM,
                LAYERNORM_F16,
                SOFTMAX_ROWS,
                QK_NORM_ROPE_F16,
            ] {
                let w = num_warps_for(Some(l), shape);
                assert!(
                    w.is_power_of_two() && (1..=32).contains(&w) && u64::from(w) * 32 <= l.max(32),
                    "{l} {shape:?}"
                );
            }
        }
    }
}
