//! What fuse's examples, tests and benches share (a dev-only crate, not published): picking a
//! device, fresh random inputs with a printed seed, the float64 comparison that decides
//! PASS/FAIL, the GB/s report; [`harness`] for the test targets that need a GPU or NVRTC;
//! [`mod@bench`] for the benches' timing and roofline; `candle` (feature `candle`) for fuse-candle.

pub mod bench;
#[cfg(feature = "candle")]
pub mod candle;
pub mod harness;

use fuse::{Buffer, Device, Element};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The first GPU, else the CPU, saying which and why.
pub fn pick_device() -> Device {
    let (device, why_not_gpu) = Device::best();
    match why_not_gpu {
        None => println!("device: {}", device.description()),
        Some(reason) => println!("device: {} (no GPU used: {reason})", device.description()),
    }
    device
}

/// The seed of a run: the environment variable `var` if it holds a number (a replay), else fresh
/// from the clock and the process id, so that every run checks new inputs.
pub fn fresh_seed(var: &str) -> u64 {
    std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)
    })
}

/// A generator seeded from the clock, so every run checks fresh inputs; the seed is printed so a
/// failure can be replayed with `FUSE_EXAMPLE_SEED`.
pub fn rng() -> StdRng {
    let seed = fresh_seed("FUSE_EXAMPLE_SEED");
    println!("inputs: random, seed {seed}");
    StdRng::seed_from_u64(seed)
}

pub fn normal_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    // Box-Muller: fine for test data.
    (0..n)
        .map(|_| {
            let u1: f32 = rng.gen_range(f32::EPSILON..1.0);
            let u2: f32 = rng.gen();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
        })
        .collect()
}

pub fn uniform_f32(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

/// Values as f64, for references and comparisons.
pub trait ToF64: Element {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// A NaN-like poison so unwritten outputs are caught.
    fn poison() -> Self;
}
impl ToF64 for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn poison() -> Self {
        f32::NAN
    }
}
impl ToF64 for fuse::half::f16 {
    fn to_f64(self) -> f64 {
        f64::from(self.to_f32())
    }
    fn from_f64(v: f64) -> Self {
        fuse::half::f16::from_f64(v)
    }
    fn poison() -> Self {
        fuse::half::f16::NAN
    }
}
impl ToF64 for fuse::half::bf16 {
    fn to_f64(self) -> f64 {
        f64::from(self.to_f32())
    }
    fn from_f64(v: f64) -> Self {
        fuse::half::bf16::from_f64(v)
    }
    fn poison() -> Self {
        fuse::half::bf16::NAN
    }
}

pub fn to_f64<T: ToF64>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.to_f64()).collect()
}

pub fn from_f64<T: ToF64>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

/// An output buffer filled with NaN, so that any element the kernel fails to write fails the check.
pub fn poisoned<T: ToF64>(device: &Device, len: usize) -> Buffer<T> {
    device.upload(&vec![T::poison(); len]).unwrap_or_else(|e| fail(&format!("allocating output: {e}")))
}

/// Compares `got` with a float64 reference: each element within `atol + rtol * |want|`, NaN never
/// passes. Prints max abs/rel error and returns whether it passed.
pub fn check(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) -> bool {
    if got.len() != want.len() {
        println!("{what}: FAIL (length {} vs reference {})", got.len(), want.len());
        return false;
    }
    let (mut max_abs, mut max_rel, mut bad, mut first_bad) = (0.0f64, 0.0f64, 0usize, None);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let abs = (g - w).abs();
        let rel = abs / w.abs().max(1e-30);
        let within = abs <= atol + rtol * w.abs(); // false for NaN, so NaN fails
        if !within {
            bad += 1;
            first_bad.get_or_insert((i, g, w));
        }
        if abs.is_finite() {
            max_abs = max_abs.max(abs);
            if w.abs() > 1e-6 {
                max_rel = max_rel.max(rel);
            }
        }
    }
    let verdict = if bad == 0 { "PASS" } else { "FAIL" };
    println!("{what}: max abs err {max_abs:.3e}, max rel err {max_rel:.3e} (tol {atol:.0e} + {rtol:.0e}*|ref|) {verdict}");
    if let Some((i, g, w)) = first_bad {
        println!("  {bad} elements out of tolerance; first at {i}: got {g}, want {w}");
    }
    bad == 0
}

/// Times `f` on the device (mean of `iters` after a warm-up) and prints GB/s of compulsory bytes.
/// Only meaningful on a GPU; on the CPU the time is printed without a bandwidth claim.
pub fn report_speed(
    device: &Device,
    what: &str,
    bytes: usize,
    iters: usize,
    f: impl FnMut() -> fuse::Result<()>,
) {
    match device.time_ms(iters, f) {
        Ok(ms) if device.is_cuda() => {
            println!(
                "{what}: {ms:.4} ms, {:.0} GB/s ({bytes} compulsory bytes)",
                bytes as f64 / (ms * 1e-3) / 1e9
            )
        }
        Ok(ms) => println!("{what}: {ms:.3} ms on the CPU interpreter"),
        Err(e) => fail(&format!("timing {what}: {e}")),
    }
}

pub fn fail(msg: &str) -> ! {
    println!("FAIL: {msg}");
    std::process::exit(1)
}

/// Ends the example: exit status 0 only if every check passed.
pub fn finish(all_passed: bool) -> ! {
    if all_passed {
        println!("PASS");
        std::process::exit(0)
    }
    println!("FAIL");
    std::process::exit(1)
}

/// The body of most examples' `main`: picks the device, then runs `run(device, rng, rows, cols,
/// time_it)` on `check_shapes` (untimed) and, on a GPU, on `gpu_shapes` (timed too), and exits with
/// PASS only if every check passed.
pub fn run_shapes(
    name: &str,
    check_shapes: &[(usize, usize)],
    gpu_shapes: &[(usize, usize)],
    mut run: impl FnMut(&Device, &mut StdRng, usize, usize, bool) -> fuse::Result<bool>,
) -> ! {
    let device = pick_device();
    let mut rng = rng();
    let timed: &[(usize, usize)] = if device.is_cuda() { gpu_shapes } else { &[] };
    let mut all = true;
    let shapes = check_shapes.iter().map(|&s| (s, false)).chain(timed.iter().map(|&s| (s, true)));
    for ((rows, cols), time_it) in shapes {
        match run(&device, &mut rng, rows, cols, time_it) {
            Ok(ok) => all &= ok,
            Err(e) => fail(&format!("{name} {rows}x{cols}: {e}")),
        }
    }
    finish(all)
}

pub fn grid_1d(n: usize, block: usize) -> u32 {
    u32::try_from(n.div_ceil(block)).unwrap_or_else(|_| fail("grid too large"))
}
