//! Autotuned kernels (`#[fused_kernel(autotune(..))]`, docs/LANGUAGE.md "Autotuning"): on the CPU (the
//! first candidate, no timing) and on a GPU (harness = false, fuse_testkit::harness:
//! without a GPU those are reported as ignored, with the reason).
//!
//! Each GPU test runs in a child process of this binary with a fresh `FUSE_CACHE_DIR`, so that a
//! winner recorded on disk by an earlier run never decides what a test sees.
//!
//! What shows whether a launch tuned: `accumulate` adds `x` into `acc` in place and has no
//! `restore`, so tuning (which runs candidates many times) leaves `acc` far from `acc + x`, and a
//! launch that took a known winner leaves exactly `acc + x`.
mod common;
use fuse_testkit::harness;

use common::{assert_close, f64s, Rng};
use fuse::half::f16;
use fuse::prelude::*;
use std::process::Command;

/// `out = (x + y) * s`. The last candidate's tile is past the runtime's limit, so it fails at
/// launch and tuning must leave it out.
#[fused_kernel(autotune(
    configs = [
        (BLOCK = 256, num_warps = 2),
        (BLOCK = 1024, num_warps = 4),
        (BLOCK = 4096, num_warps = 8, num_stages = 2),
        (BLOCK = 33554432),
    ],
    key = [n],
))]
pub fn add_scale<T: Float, const BLOCK: usize>(x: *const T, y: *const T, out: *mut T, s: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, (load(x + offs, mask) + load(y + offs, mask)) * s, mask);
}

/// `acc += x`, in place, without `restore`.
#[fused_kernel(autotune(configs = [(BLOCK = 128), (BLOCK = 512, num_warps = 4), (BLOCK = 2048, num_warps = 8)], key = [n]))]
pub fn accumulate<const BLOCK: usize>(acc: *mut f32, x: *const f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(acc + offs, load(acc + offs, mask) + load(x + offs, mask), mask);
}

/// `acc += x`, in place, with `acc` restored around the timing runs.
#[fused_kernel(autotune(
    configs = [(BLOCK = 128), (BLOCK = 512, num_warps = 4), (BLOCK = 2048, num_warps = 8)],
    key = [n],
    restore = [acc],
))]
pub fn accumulate_restored<const BLOCK: usize>(acc: *mut f32, x: *const f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(acc + offs, load(acc + offs, mask) + load(x + offs, mask), mask);
}

fn blocks(n: usize, block: usize) -> Grid {
    Grid::from(n.div_ceil(block) as u32)
}

/// `(acc, x)`: small integers, so every sum is exact in f32.
fn acc_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    ((0..n).map(|i| (i % 100) as f32).collect(), (0..n).map(|i| (i % 7) as f32 + 1.0).collect())
}

/// Whether `got` is `acc + x` exactly: one launch's worth.
fn added_once(got: &[f32], acc: &[f32], x: &[f32]) -> bool {
    got.iter().zip(acc.iter().zip(x)).all(|(g, (a, x))| *g == a + x)
}

/// Runs `accumulate` (or the restored one) once on fresh inputs; the config it took and whether
/// the result is exactly one addition.
fn accumulate_once(d: &Device, n: usize, restored: bool) -> (usize, bool) {
    let (acc0, x0) = acc_inputs(n);
    let (mut acc, x) = (d.upload(&acc0).unwrap(), d.upload(&x0).unwrap());
    let block = if restored {
        accumulate_restored::launch_autotuned(d, |c| blocks(n, c.BLOCK), &mut acc, &x, n as i32)
            .unwrap()
            .BLOCK
    } else {
        accumulate::launch_autotuned(d, |c| blocks(n, c.BLOCK), &mut acc, &x, n as i32).unwrap().BLOCK
    };
    (block, added_once(&acc.to_vec().unwrap(), &acc0, &x0))
}

// ---- without a GPU ------------------------------------------------------------------------------

fn configs_are_typed_values() {
    assert_eq!(add_scale::CONFIGS.len(), 4);
    let c = add_scale::CONFIGS[2];
    assert_eq!((c.BLOCK, c.num_warps, c.num_stages), (4096, Some(8), Some(2)));
    assert_eq!(add_scale::CONFIGS[3].num_warps, None);
    let lc = c.launch_config(7u32);
    assert_eq!((lc.grid, lc.num_warps, lc.num_stages), (Grid::from(7u32), Some(8), Some(2)));
    let lc = add_scale::CONFIGS[0].launch_config((2u32, 3u32));
    assert_eq!((lc.grid, lc.num_warps, lc.num_stages), (Grid::new(2, 3, 1), Some(2), None));
    assert_eq!(
        accumulate::CONFIGS[1],
        accumulate::Config { BLOCK: 512, num_warps: Some(4), num_stages: None }
    );
}

fn the_cpu_takes_the_first_candidate() {
    let d = Device::cpu();
    let mut rng = Rng::fresh("autotune cpu");
    let n = 10_007;
    let (x, y) = (rng.vec(n, 3.0), rng.vec(n, 3.0));
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| (*a as f64 + *b as f64) * 0.5).collect();
    let (xb, yb) = (d.upload(&x).unwrap(), d.upload(&y).unwrap());
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let c =
        add_scale::launch_autotuned(&d, |c| blocks(n, c.BLOCK), &xb, &yb, &mut out, 0.5, n as i32).unwrap();
    assert_eq!(c, add_scale::CONFIGS[0]);
    assert_close("add_scale f32 on the CPU", &f64s(&out.to_vec().unwrap()), &want, 1e-6, 1e-6);
    // A generic kernel's element type is taken from the buffers, or named.
    let (xh, yh): (Vec<f16>, Vec<f16>) =
        (x.iter().map(|v| f16::from_f32(*v)).collect(), y.iter().map(|v| f16::from_f32(*v)).collect());
    let (xb, yb) = (d.upload(&xh).unwrap(), d.upload(&yh).unwrap());
    let mut out = d.upload(&vec![f16::NAN; n]).unwrap();
    add_scale::launch_autotuned::<f16>(&d, |c| blocks(n, c.BLOCK), &xb, &yb, &mut out, 0.5, n as i32)
        .unwrap();
    let got: Vec<f32> = out.to_vec().unwrap().iter().map(|v| v.to_f32()).collect();
    assert_close("add_scale f16 on the CPU", &f64s(&got), &want, 2e-2, 2e-3);
    // In place and without `restore`: the CPU runs the kernel once.
    for restored in [false, true] {
        let (block, once) = accumulate_once(&d, 3000, restored);
        assert_eq!(block, 128);
        assert!(once, "restored: {restored}");
    }
}

fn a_launch_error_of_the_taken_config_is_returned() {
    // The CPU runs the first candidate: a wrong argument is its error, not a panic.
    let d = Device::cpu();
    let (x, y) = (d.upload(&[1.0f32; 10]).unwrap(), d.upload(&[1.0f32; 10]).unwrap());
    let mut out = d.zeros::<f32>(10).unwrap();
    let e = add_scale::launch_autotuned(&d, |_| Grid::new(0, 1, 1), &x, &y, &mut out, 1.0, 10).unwrap_err();
    assert!(
        matches!(e, fuse::Error::InvalidLaunch(_)) && e.to_string().contains("grid dimension x is 0"),
        "{e}"
    );
}

// ---- on a GPU, each in a child process ----------------------------------------------------------

const CHILD: &str = "FUSE_AUTOTUNE_TEST_CHILD";

/// Runs test `name` of this binary in a child process with `envs` (and a fresh cache directory
/// unless `envs` names one); its output, which must report the test passed.
fn in_child(name: &str, envs: &[(&str, &str)]) -> String {
    let fresh = std::env::temp_dir().join(format!("fuse-autotune-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("FUSE_CACHE_DIR", &fresh);
    cmd.env_remove("FUSE_AUTOTUNE").env_remove("FUSE_CACHE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("--- child `{name}` {envs:?}:\n{text}");
    assert!(out.status.success() && text.contains("1 passed"), "the child failed:\n{text}");
    let _ = std::fs::remove_dir_all(&fresh);
    text
}

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

fn tunes_once_per_key_and_matches_float64(d: &Device) {
    if !is_child() {
        in_child("tunes_once_per_key_and_matches_float64", &[]);
        return;
    }
    let mut rng = Rng::fresh("autotune gpu");
    let n = 1_000_003;
    let (x, y) = (rng.vec(n, 3.0), rng.vec(n, 3.0));
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| (*a as f64 + *b as f64) * 1.5).collect();
    let (xb, yb) = (d.upload(&x).unwrap(), d.upload(&y).unwrap());
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let c =
        add_scale::launch_autotuned(d, |c| blocks(n, c.BLOCK), &xb, &yb, &mut out, 1.5, n as i32).unwrap();
    println!("add_scale f32, n = {n}: {c:?}");
    assert_ne!(c.BLOCK, 33554432, "the candidate that cannot launch was chosen");
    assert_close("add_scale after tuning", &f64s(&out.to_vec().unwrap()), &want, 1e-5, 1e-5);
    // The second launch takes the winner (and writes the same).
    out.copy_from_host(&vec![f32::NAN; n]).unwrap();
    let again =
        add_scale::launch_autotuned(d, |c| blocks(n, c.BLOCK), &xb, &yb, &mut out, 1.5, n as i32).unwrap();
    assert_eq!(again, c);
    assert_close("add_scale with the winner", &f64s(&out.to_vec().unwrap()), &want, 1e-5, 1e-5);

    // In place without `restore`: the tuning launch runs the kernel many times, the next one once.
    let (block, once) = accumulate_once(d, 100_000, false);
    assert!(!once, "the first launch of a key must tune (and so add more than once)");
    let (again, once) = accumulate_once(d, 100_000, false);
    assert!(once && again == block, "the second launch of a key re-tuned ({block} then {again})");
    // A new key tunes again.
    let (_, once) = accumulate_once(d, 100_001, false);
    assert!(!once, "a new key must tune");
}

fn restore_keeps_in_place_results(d: &Device) {
    if !is_child() {
        in_child("restore_keeps_in_place_results", &[]);
        return;
    }
    let (_, once) = accumulate_once(d, 200_000, true);
    assert!(once, "with `restore = [acc]` the tuning launch adds exactly once");
    let (_, once) = accumulate_once(d, 200_000, true);
    assert!(once);
}

fn a_later_process_reuses_the_winner_from_disk(d: &Device) {
    const STEP: &str = "FUSE_AUTOTUNE_TEST_STEP";
    let name = "a_later_process_reuses_the_winner_from_disk";
    if !is_child() {
        let dir = std::env::temp_dir().join(format!("fuse-autotune-disk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dir_s = dir.to_str().unwrap();
        let first = in_child(name, &[(STEP, "tune"), ("FUSE_CACHE_DIR", dir_s)]);
        let records = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "tune"));
        assert_eq!(records.count(), 1, "one record for one kernel and key");
        let second = in_child(name, &[(STEP, "reuse"), ("FUSE_CACHE_DIR", dir_s)]);
        // libtest prints `test <name> ... ` before the child's own output on the same line.
        let chosen = |t: &str| t.lines().find_map(|l| l.find("chosen:").map(|at| l[at..].to_string()));
        assert!(chosen(&first).is_some() && chosen(&first) == chosen(&second), "{first}\n{second}");
        let _ = std::fs::remove_dir_all(&dir);
        in_child(name, &[(STEP, "off"), ("FUSE_AUTOTUNE", "0")]);
        return;
    }
    let step = std::env::var(STEP).unwrap();
    let (block, once) = accumulate_once(d, 300_000, false);
    println!("chosen: BLOCK = {block}");
    match step.as_str() {
        "tune" => assert!(!once, "an empty cache: the first launch tunes"),
        "reuse" => assert!(once, "the winner on disk: no tuning"),
        "off" => {
            assert!(once && block == accumulate::CONFIGS[0].BLOCK, "FUSE_AUTOTUNE=0: the first candidate")
        }
        other => panic!("unknown step {other}"),
    }
}

fn a_capture_needs_a_tuned_key(d: &Device) {
    if !is_child() {
        in_child("a_capture_needs_a_tuned_key", &[]);
        return;
    }
    let n = 50_000;
    let (acc0, x0) = acc_inputs(n);
    let (mut acc, x) = (d.upload(&acc0).unwrap(), d.upload(&x0).unwrap());
    let e = d
        .capture(|| {
            accumulate_restored::launch_autotuned(d, |c| blocks(n, c.BLOCK), &mut acc, &x, n as i32)
                .map(|_| ())
        })
        .unwrap_err();
    assert!(matches!(e, fuse::Error::InvalidLaunch(_)) && e.to_string().contains("graph capture"), "{e}");
    accumulate_restored::launch_autotuned(d, |c| blocks(n, c.BLOCK), &mut acc, &x, n as i32).unwrap();
    acc.copy_from_host(&acc0).unwrap();
    let graph = d
        .capture(|| {
            accumulate_restored::launch_autotuned(d, |c| blocks(n, c.BLOCK), &mut acc, &x, n as i32)
                .map(|_| ())
        })
        .unwrap();
    graph.launch().unwrap();
    drop(graph);
    assert!(added_once(&acc.to_vec().unwrap(), &acc0, &x0), "the captured winner ran once");
}

fn main() {
    let mut trials = vec![
        harness::trial("configs_are_typed_values", configs_are_typed_values),
        harness::trial("the_cpu_takes_the_first_candidate", the_cpu_takes_the_first_candidate),
        harness::trial(
            "a_launch_error_of_the_taken_config_is_returned",
            a_launch_error_of_the_taken_config_is_returned,
        ),
    ];
    trials.extend(harness::gpu_trials(vec![
        ("tunes_once_per_key_and_matches_float64", tunes_once_per_key_and_matches_float64),
        ("restore_keeps_in_place_results", restore_keeps_in_place_results),
        ("a_later_process_reuses_the_winner_from_disk", a_later_process_reuses_the_winner_from_disk),
        ("a_capture_needs_a_tuned_key", a_capture_needs_a_tuned_key),
    ]));
    harness::run(trials)
}
