//! 2-D tiles: broadcasting, expand_dims, reshape, trans, axis reductions, argmax/argmin. Each
//! kernel runs against a float64 reference on fresh random inputs with NaN-poisoned outputs, on the
//! CPU interpreter and on a GPU (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter
//! ignored without a GPU), where it must also match the interpreter (bit for bit where that is
//! exact: shape moves, max/min, argmax; to rounding for sums); and it compiles with NVRTC for
//! sm_80 and sm_90 (ignored, "needs NVRTC", where NVRTC is missing, except under CI=true).
mod common;
use fuse_testkit::harness;

use common::backend::{every_backend, nvrtc_only, per_backend};
use common::*;
use fuse::prelude::*;

/// Softmax over each of `ROWS` rows per program (narrow rows: several rows per program).
#[fused_kernel]
pub fn softmax_rows<const ROWS: usize, const BLOCK: usize>(
    x: *const f32,
    out: *mut f32,
    n_rows: i32,
    n_cols: i32,
) {
    let rows = program_id(0) * ROWS + arange(0, ROWS);
    let cols = arange(0, BLOCK);
    let offs = rows.expand_dims(1) * n_cols + cols.expand_dims(0);
    let mask = (rows < n_rows).expand_dims(1) & (cols < n_cols).expand_dims(0);
    let v = load(x + offs, mask, f32::NEG_INFINITY);
    let m = v.max(1);
    let e = exp(v - m.expand_dims(1));
    let s = e.sum(1);
    store(out + offs, e / s.expand_dims(1), mask);
}

/// Every shape operation once, on one `[R, C]` tile per program (R, C the whole matrix).
#[fused_kernel]
pub fn shape_ops<const R: usize, const C: usize>(
    x: *const f32,
    bias: *const f32,
    t_out: *mut f32,
    col_sum: *mut f32,
    row_min: *mut f32,
    row_argmax: *mut i32,
    col_argmin: *mut i32,
    flat_argmax: *mut i32,
    mixed: *mut f32,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r.expand_dims(1) * C + c.expand_dims(0);
    let v = load(x + offs);
    let b = load(bias + c);
    // [C] broadcast against [R, C]; a scalar against both.
    let shifted = v + b * 2.0;
    let t = trans(shifted);
    let t_offs = c.expand_dims(1) * R + r.expand_dims(0);
    store(t_out + t_offs, t);
    store(col_sum + c, shifted.sum(0));
    store(row_min + r, min(v, 1));
    store(row_argmax + r, argmax(v, 1));
    store(col_argmin + c, v.argmin(0));
    store(flat_argmax + program_id(0), argmax(reshape(v, [R * C])));
    // zeros/full/broadcast_to in 2-D, a [R, 1] column broadcast, where_ with mixed shapes.
    let z = zeros([R, C]) + full([R, 1], 1.0) * r.to(f32).expand_dims(1);
    let col = broadcast_to(b, [R, C]);
    store(mixed + offs, where_(v > 0.0, z, col));
}

const ROWS: usize = 4;
const BLOCK: usize = 64;

fn softmax_case(d: &Device, rng: &mut Rng, n_rows: usize, n_cols: usize) -> (Vec<f32>, Vec<f32>) {
    let x = rng.vec(n_rows * n_cols, 4.0);
    let xb = d.upload(&x).unwrap();
    let mut out = d.upload(&vec![f32::NAN; n_rows * n_cols]).unwrap();
    let grid = n_rows.div_ceil(ROWS) as u32;
    softmax_rows::launch::<ROWS, BLOCK>(d, grid, &xb, &mut out, n_rows as i32, n_cols as i32).unwrap();
    (x, out.to_vec().unwrap())
}

fn softmax_reference(x: &[f32], n_rows: usize, n_cols: usize) -> Vec<f64> {
    let mut want = Vec::with_capacity(x.len());
    for row in x.chunks(n_cols).take(n_rows) {
        let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
        want.extend(row.iter().map(|&v| (f64::from(v) - m).exp() / s));
    }
    want
}

/// Several rows per program: whole tiles, a ragged last program, rows narrower than the tile (on
/// a GPU thousands of rows); and rows wider than a warp's vectors in `[2, 4096]` tiles, where on a
/// GPU a row spans several warps (and, at 8 warps, several chunks of a thread), so its reduction
/// crosses warps through shared memory.
fn softmax_over_the_rows_of_a_2d_tile(d: &Device) {
    let mut rng = Rng::fresh("softmax_rows");
    let shapes: &[(usize, usize)] =
        per_backend(d, &[(8, 64), (13, 64), (10, 37), (1, 5)], &[(4096, 64), (1000, 50), (3, 64)]);
    for &(n_rows, n_cols) in shapes {
        let (x, got) = softmax_case(d, &mut rng, n_rows, n_cols);
        let want = softmax_reference(&x, n_rows, n_cols);
        assert_close(&format!("softmax_rows {n_rows}x{n_cols}"), &f64s(&got), &want, 1e-6, 1e-5);
    }
    for (n_rows, n_cols, warps) in [(33, 4000, 4), (5, 4096, 8), (7, 1500, 1)] {
        let x = rng.vec(n_rows * n_cols, 4.0);
        let xb = d.upload(&x).unwrap();
        let mut out = d.upload(&vec![f32::NAN; n_rows * n_cols]).unwrap();
        let cfg = fuse::LaunchConfig::new(n_rows.div_ceil(2) as u32).num_warps(warps);
        softmax_rows::launch::<2, 4096>(d, cfg, &xb, &mut out, n_rows as i32, n_cols as i32).unwrap();
        let want = softmax_reference(&x, n_rows, n_cols);
        let what = format!("softmax_rows [2, 4096] {n_rows}x{n_cols}, {warps} warps");
        assert_close(&what, &f64s(&out.to_vec().unwrap()), &want, 1e-6, 1e-5);
    }
}

const R: usize = 8;
const C: usize = 16;

struct ShapeOut {
    t: Vec<f32>,
    col_sum: Vec<f32>,
    row_min: Vec<f32>,
    row_argmax: Vec<i32>,
    col_argmin: Vec<i32>,
    flat_argmax: Vec<i32>,
    mixed: Vec<f32>,
}

fn shape_ops_case(d: &Device, x: &[f32], bias: &[f32]) -> ShapeOut {
    let xb = d.upload(x).unwrap();
    let bb = d.upload(bias).unwrap();
    let nan = |n: usize| d.upload(&vec![f32::NAN; n]).unwrap();
    let poison = |n: usize| d.upload(&vec![-7i32; n]).unwrap();
    let (mut t, mut col_sum, mut row_min, mut mixed) = (nan(R * C), nan(C), nan(R), nan(R * C));
    let (mut row_argmax, mut col_argmin, mut flat_argmax) = (poison(R), poison(C), poison(1));
    shape_ops::launch::<R, C>(
        d,
        1,
        &xb,
        &bb,
        &mut t,
        &mut col_sum,
        &mut row_min,
        &mut row_argmax,
        &mut col_argmin,
        &mut flat_argmax,
        &mut mixed,
    )
    .unwrap();
    ShapeOut {
        t: t.to_vec().unwrap(),
        col_sum: col_sum.to_vec().unwrap(),
        row_min: row_min.to_vec().unwrap(),
        row_argmax: row_argmax.to_vec().unwrap(),
        col_argmin: col_argmin.to_vec().unwrap(),
        flat_argmax: flat_argmax.to_vec().unwrap(),
        mixed: mixed.to_vec().unwrap(),
    }
}

/// Random inputs with ties (values on a coarse grid) so argmax/argmin's first-index rule matters.
fn shape_inputs(rng: &mut Rng) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = rng.vec(R * C, 4.0).iter().map(|v| v.round()).collect();
    (x, rng.vec(C, 1.0))
}

fn first_index(v: impl Iterator<Item = f64>, better: impl Fn(f64, f64) -> bool) -> i32 {
    let mut best: Option<(f64, i32)> = None;
    for (i, x) in v.enumerate() {
        if best.is_none_or(|(b, _)| better(x, b)) {
            best = Some((x, i as i32));
        }
    }
    best.map_or(-1, |(_, i)| i)
}

fn check_shape_ops(x: &[f32], bias: &[f32], got: &ShapeOut) {
    let at = |r: usize, c: usize| f64::from(x[r * C + c]);
    let shifted = |r: usize, c: usize| at(r, c) + f64::from(bias[c]) * 2.0;
    let t: Vec<f64> = (0..C * R).map(|i| shifted(i % R, i / R)).collect();
    assert_close("trans", &f64s(&got.t), &t, 1e-6, 1e-6);
    let col_sum: Vec<f64> = (0..C).map(|c| (0..R).map(|r| shifted(r, c)).sum()).collect();
    assert_close("sum(axis 0)", &f64s(&got.col_sum), &col_sum, 1e-5, 1e-5);
    let row_min: Vec<f64> = (0..R).map(|r| (0..C).map(|c| at(r, c)).fold(f64::INFINITY, f64::min)).collect();
    assert_close("min(axis 1)", &f64s(&got.row_min), &row_min, 0.0, 0.0);
    let row_argmax: Vec<i32> = (0..R).map(|r| first_index((0..C).map(|c| at(r, c)), |a, b| a > b)).collect();
    assert_eq!(got.row_argmax, row_argmax, "argmax(axis 1)");
    let col_argmin: Vec<i32> = (0..C).map(|c| first_index((0..R).map(|r| at(r, c)), |a, b| a < b)).collect();
    assert_eq!(got.col_argmin, col_argmin, "argmin(axis 0)");
    let flat = first_index(x.iter().map(|&v| f64::from(v)), |a, b| a > b);
    assert_eq!(got.flat_argmax, vec![flat], "argmax of the reshaped tile");
    let mixed: Vec<f64> =
        (0..R * C).map(|i| if x[i] > 0.0 { (i / C) as f64 } else { f64::from(bias[i % C]) }).collect();
    assert_close("zeros/full/broadcast_to/where_", &f64s(&got.mixed), &mixed, 0.0, 0.0);
}

/// trans, an axis-0 sum, an axis-1 min, argmax/argmin along either axis and of the reshaped tile,
/// zeros/full/broadcast_to/where_ against their definitions; on a GPU the exact ones bit for bit
/// the interpreter's.
fn shape_ops_match_their_definitions(d: &Device) {
    let mut rng = Rng::fresh("shape_ops");
    for _ in 0..5 {
        let (x, bias) = shape_inputs(&mut rng);
        let got = shape_ops_case(d, &x, &bias);
        check_shape_ops(&x, &bias, &got);
        if d.is_cuda() {
            let c = shape_ops_case(&Device::cpu(), &x, &bias);
            // Shape moves, max/min and argmax are exact. The column sums fold across threads on the
            // GPU (another order than the CPU's): within rounding of float64, checked above.
            assert_eq!(got.t, c.t);
            assert_eq!(
                (got.row_argmax, got.col_argmin, got.flat_argmax),
                (c.row_argmax, c.col_argmin, c.flat_argmax)
            );
            assert_eq!(got.mixed, c.mixed);
        }
    }
}

/// A NaN wins argmax and argmin, the first NaN of a row or tile.
fn argmax_takes_the_first_nan(d: &Device) {
    let mut rng = Rng::fresh("argmax_takes_the_first_nan");
    let (mut x, bias) = shape_inputs(&mut rng);
    x[C + 3] = f32::NAN;
    x[C + 9] = f32::NAN;
    let got = shape_ops_case(d, &x, &bias);
    assert_eq!(got.row_argmax[1], 3, "the first NaN of row 1");
    assert_eq!(got.flat_argmax[0], (C + 3) as i32);
    assert_eq!(got.col_argmin[3], 1, "a NaN wins argmin too");
}

fn kernels_compile_with_nvrtc() {
    for (spec, consts) in
        [(&softmax_rows::SPEC, vec![ROWS as u64, BLOCK as u64]), (&shape_ops::SPEC, vec![R as u64, C as u64])]
    {
        for arch in ["sm_80", "sm_90"] {
            for warps in [1, 4] {
                if let Err(e) = spec.compile_for_arch(arch, &consts, warps) {
                    panic!("{} for {arch} with {warps} warps:\n{e}", spec.name());
                }
            }
        }
    }
}

fn main() {
    let mut trials = nvrtc_only![kernels_compile_with_nvrtc];
    trials.extend(every_backend![
        softmax_over_the_rows_of_a_2d_tile,
        shape_ops_match_their_definitions,
        argmax_takes_the_first_nan,
    ]);
    harness::run(trials)
}
