//! GPU tests (harness = false, fuse_testkit::harness): run on GPU 0; with no usable GPU each is
//! reported as ignored, "needs an NVIDIA GPU", and the reason is printed once.
mod common;
use fuse_testkit::harness;

use common::*;
use fuse_runtime::{launch, Device, DeviceRead, DeviceWrite, Error, KernelArg, KernelSpec, LaunchConfig};

fn run_add_one(d: &Device, n: usize, block: u64) -> Vec<f32> {
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25 - 7.0).collect();
    let xb = d.upload(&x).unwrap();
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let grid = (n as u64).div_ceil(block).max(1) as u32;
    launch(
        add_one_spec(),
        d,
        grid.into(),
        &[block],
        &mut [(&xb).into(), (&mut out).into(), (n as i32).into()],
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    for (i, (g, x)) in got.iter().zip(&x).enumerate() {
        assert_eq!(*g, x + 1.0, "n={n} block={block} element {i}");
    }
    got
}

fn upload_launch_read_back(d: &Device) {
    assert!(d.is_cuda() && d.arch().unwrap().starts_with("sm_"));
    println!("device: {}", d.description());
    assert_eq!(Device::cuda(0).unwrap(), *d, "the same device every time");
    for (n, block) in [(1usize, 256u64), (1000, 256), (1_000_003, 1024), (4096, 64)] {
        run_add_one(d, n, block);
    }
    // Explicit num_warps, copies, empty buffers.
    let mut out = d.zeros::<f32>(300).unwrap();
    let xb = d.upload(&[2.0f32; 300]).unwrap();
    launch(
        add_one_spec(),
        d,
        LaunchConfig::new(2u32).num_warps(8),
        &[256],
        &mut [(&xb).into(), (&mut out).into(), 300i32.into()],
    )
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3.0f32; 300]);
    out.copy_from_host(&[5.0f32; 300]).unwrap();
    assert_eq!(out.to_vec().unwrap()[299], 5.0);
    assert!(out.copy_from_host(&[1.0; 3]).is_err());
    let e = d.upload::<half::bf16>(&[]).unwrap();
    assert!(e.is_empty() && e.to_vec().unwrap().is_empty());
    assert_eq!(d.zeros::<i64>(5).unwrap().to_vec().unwrap(), vec![0i64; 5]);
}

fn out_of_bounds_is_reported_at_the_next_sync(_: &Device) {
    let d = &harness::isolated_gpu();
    let xb = d.upload(&[1.0f32; 10]).unwrap();
    let mut out = d.zeros::<f32>(16).unwrap();
    // n = 16 > len(x) = 10: lanes 10..16 read x out of bounds; the launch itself succeeds.
    launch(add_one_spec(), d, 1u32.into(), &[16], &mut [(&xb).into(), (&mut out).into(), 16i32.into()])
        .unwrap();
    let e = d.synchronize().unwrap_err();
    match &e {
        Error::OutOfBounds { kernel, param, index, .. } => {
            assert_eq!((kernel.as_str(), param.as_str()), ("add_one", "x"));
            assert!((10..16).contains(index), "{e}");
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
    println!("{e}");
    // Reported once; the skipped loads gave 0, so out = 1 there.
    d.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    assert_eq!(&got[..10], &[2.0f32; 10]);
    assert_eq!(&got[10..], &[1.0f32; 6]);
    // Also through to_vec: an out-of-bounds store into `out`.
    let mut small = d.zeros::<f32>(4).unwrap();
    launch(add_one_spec(), d, 1u32.into(), &[16], &mut [(&xb).into(), (&mut small).into(), 8i32.into()])
        .unwrap();
    let e = small.to_vec().unwrap_err();
    assert!(matches!(&e, Error::OutOfBounds { param, .. } if param == "out"), "{e}");
}

fn cuda_launch_validation(d: &Device) {
    let cpu = Device::cpu();
    let xc = cpu.upload(&[1.0f32; 8]).unwrap();
    let mut out = d.zeros::<f32>(8).unwrap();
    let e = launch(add_one_spec(), d, 1u32.into(), &[8], &mut [(&xc).into(), (&mut out).into(), 8i32.into()])
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    assert!(e.to_string().contains("lives on CPU"), "{e}");
    let xg = d.upload(&[1.0f32; 8]).unwrap();
    let mut outc = cpu.zeros::<f32>(8).unwrap();
    let e =
        launch(add_one_spec(), &cpu, 1u32.into(), &[8], &mut [(&xg).into(), (&mut outc).into(), 8i32.into()])
            .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    let e = launch(
        add_one_spec(),
        d,
        (1u32, 70000u32).into(),
        &[8],
        &mut [(&xg).into(), (&mut out).into(), 8i32.into()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("at most 65535"), "{e}");
    let e = Device::cuda(99).unwrap_err();
    assert!(matches!(e, Error::NoDevice(_)), "{e}");
}

fn aot_compile_then_launch_and_time_ms(d: &Device) {
    // Correctness of compile() then launch, and that time_ms returns a positive time; how fast
    // these are is measured by `cargo bench --bench cache` / `--bench anchors`.
    let spec = add_one_spec();
    spec.compile(d, &[512], None).unwrap();
    let n = 1 << 20;
    let xb = d.upload(&vec![1.0f32; n]).unwrap();
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let grid = (n / 512) as u32;
    launch(spec, d, grid.into(), &[512], &mut [(&xb).into(), (&mut out).into(), (n as i32).into()]).unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 2.0));
    let ms = d
        .time_ms(20, || {
            launch(spec, d, grid.into(), &[512], &mut [(&xb).into(), (&mut out).into(), (n as i32).into()])
        })
        .unwrap();
    assert!(ms > 0.0);
    assert_eq!(out.to_vec().unwrap()[n - 1], 2.0);
}

fn hot_path_repeated_launches_stay_correct(d: &Device) {
    // The host time of this path is measured by `cargo bench --bench cache` (and the anchor
    // bench), not here: this checks that 2000 launches served by the in-memory cache all run.
    let spec = add_one_spec();
    let xb = d.upload(&[1.0f32; 256]).unwrap();
    let mut out = d.upload(&[f32::NAN; 256]).unwrap();
    let mut acc = d.upload(&[0.0f32; 256]).unwrap();
    for i in 0..2000 {
        // Alternate the input so a skipped launch would leave a visible stale value.
        {
            let src = if i % 2 == 0 { &xb } else { &acc };
            let mut args: [KernelArg<'_>; 3] = [src.into(), (&mut out).into(), 256i32.into()];
            launch(spec, d, 1u32.into(), &[256], &mut args).unwrap();
        }
        acc.copy_from(&out).unwrap();
    }
    // Even launches set 2, odd ones add one: after 2000 launches every element is 3.
    assert!(acc.to_vec().unwrap().iter().all(|&v| v == 3.0), "{:?}", &acc.to_vec().unwrap()[..4]);
}

fn many_threads_one_compile(d: &Device) {
    // A spec nobody compiled yet (its own name), launched from 8 threads at once.
    let ir = add_one_ir("add_one", fuse_runtime::fuse_ir::DType::F32, fuse_runtime::fuse_ir::DType::I32);
    let src: &'static str = Box::leak(format!("// threads variant\n{ADD_ONE_SOURCE}").into_boxed_str());
    let spec = leak_spec("add_one", src, &ir);
    std::thread::scope(|s| {
        for t in 0..8 {
            let d = d.clone();
            s.spawn(move || {
                let n = 1000 + t;
                let xb = d.upload(&vec![t as f32; n]).unwrap();
                let mut out = d.zeros::<f32>(n).unwrap();
                launch(
                    spec,
                    &d,
                    4u32.into(),
                    &[256],
                    &mut [(&xb).into(), (&mut out).into(), (n as i32).into()],
                )
                .unwrap();
                assert_eq!(out.to_vec().unwrap(), vec![t as f32 + 1.0; n]);
            });
        }
    });
}

fn specializations_pick_the_variant(d: &Device) {
    let spec = add_one_specialized_spec();
    let xb = d.upload(&[0.0f32; 64]).unwrap();
    let mut out = d.zeros::<f32>(64).unwrap();
    // Buffers from this runtime are 256-byte aligned: FUSE_ALIGN16_x = 1 always here.
    for (n, want) in [(32i32, 1101.0f32), (33, 1001.0), (48, 1101.0), (7, 1001.0)] {
        launch(spec, d, 1u32.into(), &[64], &mut [(&xb).into(), (&mut out).into(), n.into()]).unwrap();
        let got = out.to_vec().unwrap();
        assert_eq!(got[0], want, "n = {n}");
    }
}

/// The device's shared memory per block with opt-in.
fn smem_opt_in(d: &Device) -> u64 {
    use fuse_runtime::cudarc::driver::sys::CUdevice_attribute;
    let ctx = d.cudarc_context().unwrap();
    ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).unwrap() as u64
}

fn run_smem_reverse(
    d: &Device,
    spec: &'static KernelSpec,
    stages: u32,
    x: &[f32],
    words: usize,
) -> Result<Vec<f32>, Error> {
    let xb = d.upload(x).unwrap();
    let mut out = d.upload(&vec![f32::NAN; x.len()]).unwrap();
    let config = LaunchConfig::new(x.len().div_ceil(words) as u32).num_warps(8).num_stages(stages);
    launch(spec, d, config, &[], &mut [(&xb).into(), (&mut out).into(), (x.len() as i32).into()])?;
    out.to_vec()
}

/// Kernels under the dynamic shared memory contract launch with what they ask for: 25 KiB
/// (within the default 48), 50, 100 and 200 KiB (opted in), as far as the device allows; past
/// its limit the launch is an error. Each stage count is its own module and request.
fn dynamic_shared_memory_round_trips(d: &Device) {
    let limit = smem_opt_in(d);
    println!("{}: {limit} bytes of shared memory per block with opt-in", d.description());
    let n = 1_000_003usize;
    let x: Vec<f32> = (0..n).map(|i| (i % 977) as f32 - 400.0).collect();
    for decl in ["__device__", "__constant__"] {
        let spec = smem_reverse_spec(decl, "FUSE_NUM_STAGES * 25600u");
        for stages in [1u32, 2, 4, 8] {
            let words = stages as usize * 6400;
            let got = run_smem_reverse(d, spec, stages, &x, words);
            if (words * 4) as u64 <= limit {
                let got = got.unwrap_or_else(|e| panic!("{decl}, {stages} stages: {e}"));
                assert!(got == smem_reverse_expected(&x, words), "{decl}, {stages} stages: wrong result");
            } else {
                let e = got.unwrap_err();
                assert!(matches!(e, Error::InvalidLaunch(_)), "{e}");
            }
        }
    }
}

/// A graph replays a kernel with its dynamic shared memory.
fn dynamic_shared_memory_in_a_graph(d: &Device) {
    let spec = smem_reverse_spec("__device__", "102400u");
    let words = 25600;
    let n = 3 * words + 17;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let xb = d.upload(&x).unwrap();
    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
    let config = LaunchConfig::new(n.div_ceil(words) as u32).num_warps(4);
    let args = |out: &mut fuse_runtime::Buffer<f32>| {
        launch(spec, d, config, &[], &mut [(&xb).into(), out.into(), (n as i32).into()])
    };
    args(&mut out).unwrap(); // loads it: a capture cannot
    out.copy_from_host(&vec![f32::NAN; n]).unwrap();
    let graph = d.capture(|| args(&mut out)).unwrap();
    graph.launch().unwrap();
    drop(graph);
    assert!(out.to_vec().unwrap() == smem_reverse_expected(&x, words), "the graph's replay is wrong");
}

/// More than the device gives a block: a precise error at the launch (and at `compile`), and the
/// device stays usable.
fn dynamic_shared_memory_past_the_limit_is_an_error(d: &Device) {
    let limit = smem_opt_in(d);
    let spec = smem_reverse_spec("__device__", "1048576u");
    let x = vec![1.0f32; 1000];
    let e = run_smem_reverse(d, spec, 5, &x, 1 << 18).unwrap_err();
    let s = e.to_string();
    println!("{s}");
    assert!(matches!(e, Error::InvalidLaunch(_)), "{s}");
    for part in [
        "kernel `smem_reverse`".to_string(),
        "num_warps = 8, num_stages = 5".into(),
        "1048576 bytes".into(),
        format!("at most {limit} bytes"),
        d.description(),
        "lower num_stages or the block sizes".into(),
    ] {
        assert!(s.contains(&part), "{part:?} missing from: {s}");
    }
    let e = spec.compile_staged(d, &[], Some(8), Some(5)).unwrap_err();
    assert!(e.to_string().contains("1048576 bytes"), "{e}");
    run_add_one(d, 1000, 256);
}

/// Buffers of 1 MiB or more start on a page boundary (the largest power of two not above their
/// size, at most 2 MiB), and every way in and out of them addresses the aligned start: upload,
/// zeros, views, device copies and a kernel over a view.
fn large_buffers_start_on_page_boundaries(d: &Device) {
    // FUSE_PAGE_ALIGN=0 leaves the pool's placement: every round trip is still checked.
    let aligned = !std::env::var("FUSE_PAGE_ALIGN").is_ok_and(|v| v == "0");
    let starts_on = |b: u64, align: u64| !aligned || b % align == 0;
    // A small buffer first, so the pool's next addresses are unlikely to be page starts (the
    // aligned address then differs from the allocation's).
    let _small = d.upload(&[1.0f32; 1000]).unwrap();
    for (n, align) in
        [(262_144usize, 1u64 << 20), (393_216, 1 << 20), (524_288, 2 << 20), (3_000_001, 2 << 20)]
    {
        let host: Vec<f32> = (0..n).map(|i| (i as f32).mul_add(0.5, -3.0)).collect();
        let up = d.upload(&host).unwrap();
        let mut zeros = d.zeros::<f32>(n).unwrap();
        for (what, b) in [("upload", &up), ("zeros", &zeros)] {
            let ptr = b.cuda_device_ptr().unwrap();
            assert!(
                starts_on(ptr, align),
                "{what} of {n} f32 at {ptr:#x}, expected a multiple of {align:#x}"
            );
        }
        assert_eq!(up.to_vec().unwrap(), host, "upload round trip, {n} f32");
        assert!(zeros.to_vec().unwrap().iter().all(|&z| z == 0.0), "zeros of {n} f32");
        let (a, b) = (n / 3, n / 3 + 1001);
        assert_eq!(up.slice(a..b).unwrap().to_vec().unwrap(), host[a..b], "view {a}..{b} of {n}");
        zeros.copy_from(&up).unwrap();
        assert_eq!(zeros.to_vec().unwrap(), host, "device copy of {n} f32");
        let mut host_copy = d.zeros::<f32>(n).unwrap();
        host_copy.copy_from_host(&host).unwrap();
        assert_eq!(host_copy.to_vec().unwrap(), host, "copy_from_host of {n} f32");
        // A kernel through views at an offset: out[a..b] = up[a..b] + 1, the rest untouched.
        let len = b - a;
        let (src, mut dst) = (up.slice(a..b).unwrap(), zeros.slice_mut(a..b).unwrap());
        launch(
            add_one_spec(),
            d,
            (len as u32).div_ceil(256).into(),
            &[256],
            &mut [src.kernel_arg(), dst.kernel_arg_mut(), (len as i32).into()],
        )
        .unwrap();
        let got = zeros.to_vec().unwrap();
        for (i, (g, h)) in got.iter().zip(&host).enumerate() {
            let want = if (a..b).contains(&i) { h + 1.0 } else { *h };
            assert_eq!(*g, want, "element {i} of {n} after the kernel over {a}..{b}");
        }
    }
    // Other element sizes: the padding is a whole number of elements.
    let h16: Vec<half::f16> = (0..1_500_000).map(|i| half::f16::from_f32((i % 2000) as f32)).collect();
    let b16 = d.upload(&h16).unwrap();
    assert!(starts_on(b16.cuda_device_ptr().unwrap(), 2 << 20));
    assert_eq!(b16.to_vec().unwrap(), h16);
    let b64 = d.upload(&vec![7i64; 200_000]).unwrap();
    assert!(starts_on(b64.cuda_device_ptr().unwrap(), 1 << 20));
    assert_eq!(b64.slice(199_990..).unwrap().to_vec().unwrap(), vec![7i64; 10]);
    let bytes: Vec<u8> = (0..(3usize << 20) + 5).map(|i| (i % 251) as u8).collect();
    let b8 = d.upload(&bytes).unwrap();
    assert!(starts_on(b8.cuda_device_ptr().unwrap(), 2 << 20));
    assert_eq!(b8.to_vec().unwrap(), bytes);
    // Sizes no allocation can hold are errors, not wrapped-around small allocations.
    for len in [1usize << 62, usize::MAX] {
        let e = d.zeros::<f32>(len).unwrap_err();
        assert!(e.to_string().contains("more bytes than an allocation can hold"), "{e}");
    }
    // Within isize::MAX alone, but not with its page-alignment padding (without it, the driver's
    // out-of-memory error).
    let e = d.zeros::<u8>((isize::MAX as usize) - 5).unwrap_err();
    assert!(!aligned || e.to_string().contains("more bytes than an allocation can hold"), "{e}");
}

fn main() {
    harness::run(harness::gpu_trials(vec![
        ("upload_launch_read_back", upload_launch_read_back),
        ("large_buffers_start_on_page_boundaries", large_buffers_start_on_page_boundaries),
        ("out_of_bounds_is_reported_at_the_next_sync", out_of_bounds_is_reported_at_the_next_sync),
        ("cuda_launch_validation", cuda_launch_validation),
        ("aot_compile_then_launch_and_time_ms", aot_compile_then_launch_and_time_ms),
        ("hot_path_repeated_launches_stay_correct", hot_path_repeated_launches_stay_correct),
        ("many_threads_one_compile", many_threads_one_compile),
        ("specializations_pick_the_variant", specializations_pick_the_variant),
        ("dynamic_shared_memory_round_trips", dynamic_shared_memory_round_trips),
        ("dynamic_shared_memory_in_a_graph", dynamic_shared_memory_in_a_graph),
        (
            "dynamic_shared_memory_past_the_limit_is_an_error",
            dynamic_shared_memory_past_the_limit_is_an_error,
        ),
    ]))
}
