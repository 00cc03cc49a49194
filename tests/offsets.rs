//! Pointer offsets and masks of less common forms, against plain host references on fresh random
//! inputs, outputs poisoned first:
//! * a mutable pointer whose offsets come from a u8/i8 load advances by i32 scalars and tiles
//!   (the offsets are carried as i32, their compute type);
//! * a 1-D `[1]` mask or offset tile broadcasts against `[N]` offsets in `load` and `store`, by
//!   the same rule as element-wise operations.
//!
//! Each body runs on the CPU interpreter and on a GPU (tests/common/backend.rs: `name/cpu`,
//! `name/gpu`, the latter ignored without a GPU).
mod common;

use common::backend::every_backend;
use common::*;
use fuse::prelude::*;
use fuse_testkit::harness;

/// `out[i] = x[idx[i] + shift + 1 - i % 2]` through one mutable pointer over u8 offsets.
#[fused_kernel]
pub fn gather_u8<const BLOCK: usize>(idx: *const u8, x: *const f32, out: *mut f32, n: i32, shift: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let mut p = x + load(idx + offs, m);
    p += shift;
    p += 1;
    p -= offs % 2;
    store(out + offs, load(p, m), m);
}

/// The same over i8 offsets (negative ones included), advanced past them by `shift`.
#[fused_kernel]
pub fn gather_i8<const BLOCK: usize>(idx: *const i8, x: *const f32, out: *mut f32, n: i32, shift: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let mut p = x + load(idx + offs, m);
    p = p + shift;
    p += offs % 3;
    store(out + offs, load(p, m), m);
}

/// One row per program; `live` (a `[1]` tile, the row's flag) masks whole `[BLOCK]` accesses, and
/// `[1]` offsets (the row's first element) are read under a `[BLOCK]` mask.
#[fused_kernel]
pub fn live_rows<const BLOCK: usize>(
    x: *const f32,
    flags: *const i32,
    all: *mut f32,
    live_only: *mut f32,
    firsts: *mut f32,
    k: i32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let one = arange(0, 1);
    let live = load(flags + row + one) != 0;
    let offs = row * BLOCK + cols;
    let v = load(x + offs, live, -1.0);
    store(all + offs, v);
    store(live_only + offs, v * 2.0, live);
    let first = load(x + row * BLOCK + one, cols < k, 0.0);
    store(firsts + row + one, sum(first));
}

const BLOCK: usize = 256;

fn index_of(i: usize, base: i64) -> usize {
    usize::try_from(base).unwrap_or_else(|_| panic!("reference index {base} at lane {i} is negative"))
}

fn mutable_pointer_over_u8_offsets(d: &Device) {
    let mut rng = Rng::fresh("mutable_pointer_over_u8_offsets");
    let n = 1000; // not a multiple of the block: the tail is masked
    let shift = (rng.next_u64() % 20) as i32;
    let idx: Vec<u8> = (0..n).map(|_| (rng.next_u64() % 256) as u8).collect();
    let x = rng.vec(256 + shift as usize + 2, 3.0);
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let (ib, xb) = (d.upload(&idx).unwrap(), d.upload(&x).unwrap());
    gather_u8::launch::<BLOCK>(d, n.div_ceil(BLOCK) as u32, &ib, &xb, &mut out, n as i32, shift).unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| f64::from(x[index_of(i, i64::from(idx[i]) + i64::from(shift) + 1 - (i % 2) as i64)]))
        .collect();
    assert_close("gather through u8 offsets", &f64s(&out.to_vec().unwrap()), &want, 0.0, 0.0);
}

fn mutable_pointer_over_i8_offsets(d: &Device) {
    let mut rng = Rng::fresh("mutable_pointer_over_i8_offsets");
    let n = 777;
    let shift = 128 + (rng.next_u64() % 10) as i32;
    let idx: Vec<i8> = (0..n).map(|_| rng.next_u64() as i8).collect();
    let x = rng.vec(shift as usize + 130, 3.0);
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let (ib, xb) = (d.upload(&idx).unwrap(), d.upload(&x).unwrap());
    gather_i8::launch::<BLOCK>(d, n.div_ceil(BLOCK) as u32, &ib, &xb, &mut out, n as i32, shift).unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| f64::from(x[index_of(i, i64::from(idx[i]) + i64::from(shift) + (i % 3) as i64)]))
        .collect();
    assert_close("gather through i8 offsets", &f64s(&out.to_vec().unwrap()), &want, 0.0, 0.0);
}

fn unit_masks_and_offsets_broadcast_in_loads_and_stores(d: &Device) {
    let mut rng = Rng::fresh("unit_masks_and_offsets_broadcast_in_loads_and_stores");
    let rows = 9;
    let k = (rng.next_u64() % (BLOCK as u64 + 40)) as i32; // past the tile sometimes
    let x = rng.vec(rows * BLOCK, 2.0);
    let flags: Vec<i32> = (0..rows).map(|_| (rng.next_u64() % 2) as i32).collect();
    // A finite poison for the rows a masked store must leave alone, NaN where every lane is written.
    let keep = 1.0e30f32;
    let (mut all, mut live_only, mut firsts) = (
        d.upload(&vec![f32::NAN; rows * BLOCK]).unwrap(),
        d.upload(&vec![keep; rows * BLOCK]).unwrap(),
        d.upload(&vec![f32::NAN; rows]).unwrap(),
    );
    let (xb, fb) = (d.upload(&x).unwrap(), d.upload(&flags).unwrap());
    live_rows::launch::<BLOCK>(d, rows as u32, &xb, &fb, &mut all, &mut live_only, &mut firsts, k).unwrap();
    let live = |i: usize| flags[i / BLOCK] != 0;
    let want_all: Vec<f64> =
        (0..rows * BLOCK).map(|i| if live(i) { f64::from(x[i]) } else { -1.0 }).collect();
    assert_close("load under a [1] mask", &f64s(&all.to_vec().unwrap()), &want_all, 0.0, 0.0);
    let want_live: Vec<f64> =
        (0..rows * BLOCK).map(|i| if live(i) { 2.0 * f64::from(x[i]) } else { f64::from(keep) }).collect();
    assert_close("store under a [1] mask", &f64s(&live_only.to_vec().unwrap()), &want_live, 0.0, 0.0);
    let lanes = k.clamp(0, BLOCK as i32) as f64;
    let want_first: Vec<f64> = (0..rows).map(|r| f64::from(x[r * BLOCK]) * lanes).collect();
    assert_close(
        "[1] offsets under a [BLOCK] mask",
        &f64s(&firsts.to_vec().unwrap()),
        &want_first,
        1e-5,
        1e-5,
    );
}

fn main() {
    harness::run(every_backend![
        mutable_pointer_over_u8_offsets,
        mutable_pointer_over_i8_offsets,
        unit_masks_and_offsets_broadcast_in_loads_and_stores,
    ])
}
