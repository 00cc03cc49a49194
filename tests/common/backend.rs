//! One test body for every backend. A check is written once as a `fn(&Device)`; [`every_backend!`]
//! registers it as two libtest-mimic trials, `name/cpu` on the CPU interpreter and `name/gpu` on
//! GPU 0, the latter reported as ignored, "needs an NVIDIA GPU", where there is none
//! (`fuse_testkit::harness::gpu_trials`). [`gpu_only!`] registers a body that tests what only a GPU
//! has (tensor-core paths, TMA, register caps, a device of its own) as `name/gpu` alone;
//! [`nvrtc_only!`] a test that compiles kernels with NVRTC and needs no device.
//!
//! A body picks its sizes and configurations with [`per_backend`] (a GPU affords larger problems
//! and has warps, stages and tensor cores the interpreter ignores) and, through [`with_cpu`], runs
//! its kernel beside a GPU on the CPU interpreter too, so that the GPU's result is checked against
//! the interpreter's as well as against the float64 reference.
use fuse::Device;
use fuse_testkit::harness;
use libtest_mimic::Trial;

/// A test body: the checks of one feature on one device.
pub type Body = fn(&Device);

/// `name/cpu` trials (each on a fresh CPU interpreter device) followed by the `name/gpu` ones.
pub fn trials(cpu: Vec<(&'static str, Body)>, gpu: Vec<(&'static str, Body)>) -> Vec<Trial> {
    let mut all: Vec<Trial> = cpu
        .into_iter()
        .map(|(name, body)| {
            Trial::test(name, move || {
                body(&Device::cpu());
                Ok(())
            })
        })
        .collect();
    all.extend(harness::gpu_trials(gpu));
    all
}

/// `name/cpu` and `name/gpu` trials of each body (a `fn(&Device)` in scope, named by its ident).
#[allow(unused_macros)]
macro_rules! every_backend {
    ($($body:ident),* $(,)?) => {
        $crate::common::backend::trials(
            vec![$((concat!(stringify!($body), "/cpu"), $body as $crate::common::backend::Body)),*],
            vec![$((concat!(stringify!($body), "/gpu"), $body as $crate::common::backend::Body)),*],
        )
    };
}

/// `name/gpu` trials alone, for bodies that check what only a GPU has.
#[allow(unused_macros)]
macro_rules! gpu_only {
    ($($body:ident),* $(,)?) => {
        fuse_testkit::harness::gpu_trials(vec![
            $((concat!(stringify!($body), "/gpu"), $body as $crate::common::backend::Body)),*
        ])
    };
}

/// Trials of `fn()` tests that need NVRTC but no GPU (`fuse_testkit::harness::nvrtc_trials`), named
/// by their idents.
#[allow(unused_macros)]
macro_rules! nvrtc_only {
    ($($test:ident),* $(,)?) => {
        fuse_testkit::harness::nvrtc_trials(vec![$((stringify!($test), $test as fn())),*])
    };
}

#[allow(unused_imports)]
pub(crate) use {every_backend, gpu_only, nvrtc_only};

/// `cpu` on the CPU interpreter, `gpu` on a GPU.
pub fn per_backend<T>(d: &Device, cpu: T, gpu: T) -> T {
    if d.is_cuda() {
        gpu
    } else {
        cpu
    }
}

/// The devices a body runs its kernel on: `d`, and after a GPU the CPU interpreter, whose result
/// the GPU's is then compared with.
pub fn with_cpu(d: &Device) -> Vec<Device> {
    if d.is_cuda() {
        vec![d.clone(), Device::cpu()]
    } else {
        vec![d.clone()]
    }
}

/// "GPU" or "CPU", for failure messages.
pub fn name(d: &Device) -> &'static str {
    if d.is_cuda() {
        "GPU"
    } else {
        "CPU"
    }
}

/// `run` on `d` and, after a GPU, on the CPU interpreter (the devices of [`with_cpu`]): each
/// result within `atol + rtol * |want|` of `want` ("`what` on the GPU", "... on the CPU"), and a
/// GPU's within `vs_cpu` (atol, rtol) of the CPU's ("`what` gpu vs cpu"). The result on `d`.
pub fn assert_close_on(
    d: &Device,
    what: &str,
    want: &[f64],
    (atol, rtol): (f64, f64),
    vs_cpu: (f64, f64),
    run: impl Fn(&Device) -> Vec<f64>,
) -> Vec<f64> {
    let mut outs: Vec<Vec<f64>> = with_cpu(d)
        .iter()
        .map(|dev| {
            let got = run(dev);
            super::assert_close(&format!("{what} on the {}", name(dev)), &got, want, atol, rtol);
            got
        })
        .collect();
    if let [on_gpu, on_cpu] = &outs[..] {
        super::assert_close(&format!("{what} gpu vs cpu"), on_gpu, on_cpu, vs_cpu.0, vs_cpu.1);
    }
    outs.swap_remove(0)
}

/// The C++ compiler that builds the host emulation of emitted CUDA (tests/emulator): `$CXX`,
/// else `g++`, if it runs.
pub fn cxx() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    std::process::Command::new(&cxx)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cxx)
}

/// One trial per test that needs a C++ compiler (the host emulation); without one (decided once)
/// every one is ignored with the kind "needs a C++ compiler", except under `CI=true` where every
/// one fails (as the NVRTC tests do).
pub fn cxx_trials(tests: Vec<(&'static str, fn())>) -> Vec<Trial> {
    let found = cxx().is_some();
    let trials = tests.into_iter().map(|(name, test)| {
        if found {
            harness::trial(name, test)
        } else {
            Trial::test(name, || Err("no C++ compiler (g++, or $CXX)".into()))
                .with_ignored_flag(!harness::in_ci())
                .with_kind("needs a C++ compiler")
        }
    });
    trials.collect()
}
