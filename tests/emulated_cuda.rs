//! The emitted CUDA of the axis reductions (tests/axis) run on the host: every thread of a block a
//! fiber, switched only at `__syncthreads` and warp shuffles in an order that changes every round
//! (tests/emulator/fuse_emu.h), so the shuffles, barriers and shared memory of the emitted folds
//! execute for real, with a missing barrier showing up as a wrong value, a divergent barrier or
//! shuffle, a partial-warp shuffle or a deadlock as a failure, and the results checked against
//! float64 and the CPU interpreter. No GPU needed; needs a C++17 compiler (`$CXX`, else `g++`),
//! without which the tests are reported as ignored.
//!
//! `FUSE_EMU_FULL=1` runs every shape at every warp count (slow: a compile of a few seconds per
//! configuration, cached in the target directory); the default runs a spread of them.
mod axis;
mod common;
use fuse_testkit::harness;

use axis::*;
use fuse::{fused_kernel, Device};

/// Lane `c` of each program's row reads `src[row + c / 2]` (GPT-J's RoPE angle into a cos/sin
/// row): each vector chunk loads a run of VEC / 2 elements and repeats each in registers
/// (`affine::Fact::ChunkHalf`); lanes at or past `limit[0]` read `other`.
#[fused_kernel]
pub fn half_gather<const N: usize>(src: *const f32, limit: *const i32, out: *mut f32) {
    let c = arange(0, N);
    let row = program_id(0) * N;
    let lim = load(limit);
    store(out + row + c, load(src + row + c / 2, c < lim, -1.0));
}

/// Lanes `[lo, hi)` of each program's row copied (plus 0.5) under a mask that is rarely whole on
/// a vector chunk, and the masked load's result stored unmasked beside it: every chunk of the
/// thread is a vector, off or partial, and only the partial ones go lane by lane.
#[fused_kernel]
pub fn ragged_copy<const N: usize>(src: *const f32, lim: *const i32, out: *mut f32, all: *mut f32) {
    let c = arange(0, N);
    let row = program_id(0) * N;
    let m = (c >= load(lim)) & (c < load(lim + 1));
    let v = load(src + row + c, m, -1.0);
    store(out + row + c, v + 0.5, m);
    store(all + row + c, v);
}

/// (R, C): rows within a warp, across warps, wider than the block, a tile smaller than the
/// block, one row, one column (as const generics), square.
const SHAPES: &[(usize, usize)] =
    &[(64, 16), (16, 64), (2, 1024), (128, 128), (1, 256), (256, 1), (4, 8), (2, 2), (32, 32), (8, 512)];
const WARPS: &[u32] = &[1, 2, 4, 8, 16, 32];

fn full() -> bool {
    std::env::var("FUSE_EMU_FULL").is_ok_and(|v| v == "1")
}

/// The (shape, warps) pairs to run: all of them, or each shape at two warp counts three apart
/// in `WARPS` (one of 1, 2, 4 and one of 8, 16, 32), rotating.
fn configs() -> Vec<((usize, usize), u32)> {
    let mut out = Vec::new();
    for (i, &s) in SHAPES.iter().enumerate() {
        for (j, &w) in WARPS.iter().enumerate() {
            if full() || j == i % 3 || j == i % 3 + 3 {
                out.push((s, w));
            }
        }
    }
    out
}

fn f32_kernel() {
    let cpu = Device::cpu();
    for ((r, c), w) in configs() {
        for (pi, &p) in PATTERNS.iter().enumerate() {
            let seed = (r * 131 + c * 7 + w as usize * 1009 + pi) as u64;
            let mut e = f32_launch(r, c, w, 2, p, seed);
            let mut cl = e.clone();
            let case = format!("axis_f32 [{r}, {c}] {w} warps {p:?} (input seed {seed})");
            run(Target::Emulated(seed), &mut e).unwrap_or_else(|m| panic!("{case}: {m}"));
            run(Target::Device(&cpu), &mut cl).unwrap_or_else(|m| panic!("{case} on the CPU: {m}"));
            check_f32(&format!("{case}, emulated"), &e, Some(&cl)).unwrap_or_else(|m| panic!("{m}"));
        }
    }
}

fn int_kernels() {
    for (n, ((r, c), w)) in configs().into_iter().enumerate() {
        // One type per configuration, rotating, unless FUSE_EMU_FULL.
        for t in INT_TYPES.into_iter().filter(|t| full() || INT_TYPES[n % INT_TYPES.len()] == *t) {
            for (pi, &p) in PATTERNS.iter().enumerate() {
                let seed = (r * 131 + c * 7 + w as usize * 1009 + pi + 17) as u64;
                let mut e = int_launch(t, r, c, w, 2, p, seed);
                let case = format!("axis_{t:?} [{r}, {c}] {w} warps {p:?} (input seed {seed}), emulated");
                run(Target::Emulated(seed), &mut e).unwrap_or_else(|m| panic!("{case}: {m}"));
                check_int(t, &case, &e).unwrap_or_else(|m| panic!("{m}"));
            }
        }
    }
}

fn unit_axes() {
    for n in [1, 2, 32, 64, 1024, 4096] {
        for &w in WARPS {
            if !full()
                && ![(1, 1), (2, 4), (32, 32), (64, 2), (1024, 8), (4096, 1), (4096, 32)].contains(&(n, w))
            {
                continue;
            }
            for (pi, &p) in PATTERNS.iter().enumerate() {
                let seed = (n * 3 + w as usize * 1009 + pi) as u64;
                let mut e = units_launch(n, w, 2, p, seed);
                let case = format!("axis_units N={n} {w} warps {p:?} (input seed {seed}), emulated");
                run(Target::Emulated(seed), &mut e).unwrap_or_else(|m| panic!("{case}: {m}"));
                check_units(&case, &e).unwrap_or_else(|m| panic!("{m}"));
            }
        }
    }
}

/// `spec` at `N = n` on `w` warps over `grid` programs, from the same `bufs`, on the host
/// emulator (schedule `seed`) and on the CPU interpreter: the f32 buffers `outs` after each run,
/// (emulated, interpreted).
fn emulated_and_interpreted<const K: usize>(
    spec: &'static fuse::KernelSpec,
    (n, w, grid): (usize, u32, u32),
    bufs: Vec<Buf>,
    seed: u64,
    outs: [usize; K],
    case: &str,
) -> [(Vec<f32>, Vec<f32>); K] {
    let mut e = Launch { spec, consts: vec![n as u64], warps: w, grid, bufs };
    let mut cl = e.clone();
    run(Target::Emulated(seed), &mut e).unwrap_or_else(|m| panic!("{case}: {m}"));
    run(Target::Device(&Device::cpu()), &mut cl).unwrap_or_else(|m| panic!("{case} on the CPU: {m}"));
    outs.map(|i| match (&e.bufs[i], &cl.bufs[i]) {
        (Buf::F32(a), Buf::F32(b)) => (a.clone(), b.clone()),
        _ => panic!("{case}: buffer {i} is not f32"),
    })
}

/// [`half_gather`] emulated against its definition and the CPU interpreter, over tile widths
/// that give VEC 1 to 8, ragged and whole limits, at 1 and 2 warps.
fn half_runs() {
    for n in [16usize, 64, 128, 256, 512] {
        for w in [1u32, 2] {
            for lim in [0i32, 5, 13, n as i32 / 2, n as i32] {
                let grid = 3u32;
                let src: Vec<f32> = (0..grid as usize * n).map(|i| i as f32 * 0.5 + 1.0).collect();
                let bufs = vec![
                    Buf::F32(src.clone()),
                    Buf::I32(vec![lim]),
                    Buf::F32(vec![f32::NAN; grid as usize * n]),
                ];
                let case = format!("half_gather N={n} {w} warps limit {lim}");
                let seed = n as u64 + u64::from(w);
                let [(got, cpu_got)] =
                    emulated_and_interpreted(&half_gather::SPEC, (n, w, grid), bufs, seed, [2], &case);
                for p in 0..grid as usize {
                    for c in 0..n {
                        let want = if (c as i32) < lim { src[p * n + c / 2] } else { -1.0 };
                        let (g, h) = (got[p * n + c], cpu_got[p * n + c]);
                        assert!(
                            g == want && h == want,
                            "{case}: program {p} lane {c}: emulated {g}, CPU {h}, want {want}"
                        );
                    }
                }
            }
        }
    }
}

/// [`common::paths::xor_gather`] emulated against its definition and the CPU interpreter, over tile widths
/// whose chunks are 1, 2 and 4 lanes (XOR by 3 stays inside a 4-lane chunk only) and limits that
/// cut a chunk.
fn xor_runs() {
    for n in [4usize, 16, 64, 128, 512] {
        for w in [1u32, 2] {
            for lim in [0i32, 3, 13, n as i32 / 2, n as i32] {
                let grid = 3u32;
                let src: Vec<f32> = (0..grid as usize * n).map(|i| i as f32 * 0.25 - 7.0).collect();
                let poison = || Buf::F32(vec![f32::NAN; grid as usize * n]);
                let bufs = vec![Buf::F32(src.clone()), Buf::I32(vec![lim]), poison(), poison()];
                let case = format!("xor_gather N={n} {w} warps limit {lim}");
                let seed = 3 * n as u64 + u64::from(w);
                let got = emulated_and_interpreted(
                    &common::paths::xor_gather::f32::SPEC,
                    (n, w, grid),
                    bufs,
                    seed,
                    [2, 3],
                    &case,
                );
                for ((emu, cpu), x) in got.iter().zip([1usize, 3]) {
                    for p in 0..grid as usize {
                        for c in 0..n {
                            let want = if (c as i32) < lim { src[p * n + (c ^ x)] } else { -1.0 };
                            let (g, h) = (emu[p * n + c], cpu[p * n + c]);
                            assert!(
                                g == want && h == want,
                                "{case}: XOR {x}, program {p} lane {c}: emulated {g}, CPU {h}, want {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// [`ragged_copy`] emulated against its definition and the CPU interpreter: ranges that start
/// and end mid-chunk, on a chunk boundary, inside one chunk and empty; the lanes outside the range
/// of `out` must keep their poison.
fn ragged_runs() {
    const POISON: f32 = 7777.0;
    for n in [64usize, 256, 1024] {
        for w in [1u32, 2] {
            for (lo, hi) in [(0, n as i32), (1, n as i32 - 1), (3, 13), (5, 6), (8, 16), (9, 9), (0, 5)] {
                let grid = 2u32;
                let src: Vec<f32> = (0..grid as usize * n).map(|i| i as f32 * 0.25 + 1.0).collect();
                let poisoned = || Buf::F32(vec![POISON; grid as usize * n]);
                let bufs = vec![Buf::F32(src.clone()), Buf::I32(vec![lo, hi]), poisoned(), poisoned()];
                let case = format!("ragged_copy N={n} {w} warps lanes {lo}..{hi}");
                let seed = n as u64 * 7 + u64::from(w) + lo as u64;
                let [(out, c_out), (all, c_all)] =
                    emulated_and_interpreted(&ragged_copy::SPEC, (n, w, grid), bufs, seed, [2, 3], &case);
                for p in 0..grid as usize {
                    for c in 0..n {
                        let on = (lo..hi).contains(&(c as i32));
                        let x = src[p * n + c];
                        let (want_out, want_all) = if on { (x + 0.5, x) } else { (POISON, -1.0) };
                        let i = p * n + c;
                        assert!(
                            out[i] == want_out && all[i] == want_all && c_out[i] == want_out && c_all[i] == want_all,
                            "{case}: program {p} lane {c}: emulated ({}, {}), CPU ({}, {}), want ({want_out}, {want_all})",
                            out[i],
                            all[i],
                            c_out[i],
                            c_all[i]
                        );
                    }
                }
            }
        }
    }
}

/// Four rows of `n` per program for `grid` programs: multiples of 1/250 in [-4, 4], exact in f32.
fn rows_of_four(g: &mut Gen, grid: u32, n: usize) -> Vec<f32> {
    (0..grid as usize * 4 * n).map(|_| g.below(2001) as f32 / 250.0 - 4.0).collect()
}

/// [`common::paths::pair_rotate`] emulated against float64 and the CPU interpreter, at widths and warp counts
/// that take both of `split`/`join`'s lowerings: in registers (each thread's chunks hold both
/// lanes of its pairs, e.g. N = 64 on 2 warps) and through shared memory (N = 256 on 1 warp).
fn pair_runs() {
    const POISON: f32 = 7777.0;
    for n in [2usize, 8, 32, 64, 128, 256] {
        for w in [1u32, 2, 4, 8] {
            let grid = 2u32;
            let mut g = Gen::new(n as u64 * 31 + u64::from(w));
            let x = rows_of_four(&mut g, grid, n);
            let cs: Vec<f32> = (0..n).map(|i| ((i as f64) * 0.37).cos() as f32).collect();
            let poisoned = |len: usize| Buf::F32(vec![POISON; len]);
            let bufs = vec![
                Buf::F32(x.clone()),
                Buf::F32(cs.clone()),
                poisoned(x.len()),
                poisoned(grid as usize * 4),
                poisoned(grid as usize * n),
            ];
            let case = format!("pair_rotate N={n} {w} warps");
            let seed = n as u64 * 5 + u64::from(w);
            let [(out, c_out), (norms, c_norms), (sw, c_sw)] = emulated_and_interpreted(
                &common::paths::pair_rotate::SPEC,
                (n, w, grid),
                bufs,
                seed,
                [2, 3, 4],
                &case,
            );
            let [out_ref, norms_ref, sw_ref] =
                common::paths::pair_rotate_reference(&x, &cs, n, grid as usize);
            let close = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs());
            for (what, got, cpu, want) in
                [("out", &out, &c_out, &out_ref), ("norm", &norms, &c_norms, &norms_ref)]
            {
                for (i, &want) in want.iter().enumerate() {
                    assert!(
                        close(got[i], want) && close(cpu[i], want),
                        "{case}: {what} {i}: emulated {}, CPU {}, want {want}",
                        got[i],
                        cpu[i]
                    );
                }
            }
            for (i, &want) in sw_ref.iter().enumerate() {
                assert!(
                    f64::from(sw[i]) == want && f64::from(c_sw[i]) == want,
                    "{case}: swapped lane {i}: emulated {}, CPU {}, want {want}",
                    sw[i],
                    c_sw[i]
                );
            }
        }
    }
}

/// [`common::paths::layout_totals`] emulated against float64 and the CPU interpreter: full
/// reductions of row and column layout tiles (each row or column folded once, from its first
/// holder) at widths and warp counts where a row spans part of a warp, a warp, or several.
fn layout_totals_runs() {
    for n in [8usize, 32, 64, 128, 256, 1024] {
        for w in [1u32, 2, 4, 8] {
            let grid = 3u32;
            let mut g = Gen::new(n as u64 * 17 + u64::from(w));
            let x = rows_of_four(&mut g, grid, n);
            let wv: Vec<f32> = (0..n).map(|_| g.below(2001) as f32 / 500.0 - 2.0).collect();
            let bufs =
                vec![Buf::F32(x.clone()), Buf::F32(wv.clone()), Buf::F32(vec![f32::NAN; grid as usize * 4])];
            let case = format!("layout_totals N={n} {w} warps");
            let seed = n as u64 * 3 + u64::from(w);
            let [(out, c_out)] = emulated_and_interpreted(
                &common::paths::layout_totals::SPEC,
                (n, w, grid),
                bufs,
                seed,
                [2],
                &case,
            );
            for p in 0..grid as usize {
                let (mut total, mut top, mut least) = (0.0f64, f64::NEG_INFINITY, f64::INFINITY);
                for r in 0..4 {
                    let y: Vec<f64> =
                        (0..n).map(|c| f64::from(x[(p * 4 + r) * n + c]) * f64::from(wv[c])).collect();
                    let (rs, rm) =
                        (y.iter().sum::<f64>(), y.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
                    total += rs;
                    top = top.max(rm);
                    least = least.min(2.0 * rs - rm);
                }
                let wsum: f64 = wv.iter().map(|&v| f64::from(v)).sum();
                for (i, want) in [total, top, wsum, least].into_iter().enumerate() {
                    let (e, c) = (f64::from(out[p * 4 + i]), f64::from(c_out[p * 4 + i]));
                    let close = |v: f64| (v - want).abs() <= 1e-4 * (1.0 + want.abs());
                    assert!(
                        close(e) && close(c),
                        "{case}: program {p} total {i}: emulated {e}, CPU {c}, want {want}"
                    );
                }
            }
        }
    }
}

/// [`common::paths::row_stats`] emulated against float64 and the CPU interpreter, at widths and
/// warp counts where a row spans part of a warp, a warp, a warp slab (several chunks of each
/// lane: 256-1024 f32 columns on 1-8 warps) or, with more warps than rows, several warps; a
/// modulus above a slab's chunk step (32 VEC) on 2-16 warps, so `%` steps chunk by chunk there,
/// and a small one on 1 warp (every lane divided).
fn row_stats_runs() {
    for n in [32usize, 128, 256, 512, 1024] {
        for w in [1u32, 2, 4, 8, 16] {
            let grid = 2u32;
            let mut g = Gen::new(n as u64 * 13 + u64::from(w));
            let len = grid as usize * 8 * n;
            let x: Vec<f32> = (0..len).map(|_| g.below(2001) as f32 / 250.0 - 4.0).collect();
            let wv: Vec<f32> = (0..n).map(|_| g.below(2001) as f32 / 500.0 - 2.0).collect();
            let m = if w == 1 { 48 } else { 1000 + (n as i32 % 7) };
            let bufs = vec![
                Buf::F32(x.clone()),
                Buf::F32(wv.clone()),
                Buf::I32(vec![m]),
                Buf::F32(vec![f32::NAN; len]),
                Buf::F32(vec![f32::NAN; grid as usize * 8]),
                Buf::F32(vec![f32::NAN; grid as usize * 2]),
                Buf::I32(vec![-1; len]),
                Buf::F32(vec![f32::NAN; len / 32]),
            ];
            let case = format!("row_stats N={n} {w} warps");
            let mut e = Launch {
                spec: &common::paths::row_stats::SPEC,
                consts: vec![n as u64],
                warps: w,
                grid,
                bufs,
            };
            let mut cl = e.clone();
            let seed = n as u64 * 7 + u64::from(w);
            run(Target::Emulated(seed), &mut e).unwrap_or_else(|msg| panic!("{case}: {msg}"));
            run(Target::Device(&Device::cpu()), &mut cl)
                .unwrap_or_else(|msg| panic!("{case} on the CPU: {msg}"));
            let (y, sums, pairs, cols, groups) =
                common::paths::row_stats_reference(&x, &wv, n, m, grid as usize);
            for (l, what) in [(&e, "emulated"), (&cl, "CPU")] {
                let (Buf::F32(gy), Buf::F32(gs), Buf::F32(gp), Buf::I32(gc), Buf::F32(gg)) =
                    (&l.bufs[3], &l.bufs[4], &l.bufs[5], &l.bufs[6], &l.bufs[7])
                else {
                    panic!("{case}: buffer types")
                };
                let close = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs());
                for (i, &want) in y.iter().enumerate() {
                    assert!(close(gy[i], want), "{case} {what}: y {i} = {}, want {want}", gy[i]);
                }
                for (i, &want) in sums.iter().enumerate() {
                    assert!(close(gs[i], want), "{case} {what}: sum {i} = {}, want {want}", gs[i]);
                }
                for (i, &want) in pairs.iter().enumerate() {
                    assert!(close(gp[i], want), "{case} {what}: pair {i} = {}, want {want}", gp[i]);
                }
                assert!(gc == &cols, "{case} {what}: cols differ");
                for (i, &want) in groups.iter().enumerate() {
                    assert!(
                        f64::from(gg[i]) == want,
                        "{case} {what}: group max {i} = {}, want {want}",
                        gg[i]
                    );
                }
            }
        }
    }
}

fn main() {
    let tests: Vec<(&'static str, fn())> = vec![
        ("f32_kernel", f32_kernel),
        ("xor_runs", xor_runs),
        ("int_kernels", int_kernels),
        ("unit_axes", unit_axes),
        ("half_runs", half_runs),
        ("ragged_runs", ragged_runs),
        ("pair_runs", pair_runs),
        ("layout_totals_runs", layout_totals_runs),
        ("row_stats_runs", row_stats_runs),
    ];
    harness::run(common::backend::cxx_trials(tests))
}
