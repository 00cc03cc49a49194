//! GPU interop: kernels over cudarc memory on the caller's context and stream, buffer views,
//! CUDA graphs, several GPUs. Every result is compared with float64 on fresh random inputs over
//! NaN-poisoned outputs. Without a usable GPU every test shows as ignored, with the reason
//! (harness = false, fuse_testkit::harness); the two-GPU test is ignored, "needs two
//! NVIDIA GPUs", where fewer are present.
mod common;
use fuse_testkit::harness;

use common::add_mul::{add_mul, reference};
use common::{assert_close, f64s, Rng};
use fuse::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use fuse::{fused_kernel, Device, Error};
use std::sync::Arc;

#[fused_kernel]
fn scale_unmasked<const BLOCK: usize>(x: *const f32, out: *mut f32, s: f32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs) * s);
}

/// `out = out * s + 1`, in place: a chain of these in a graph checks the replay order.
#[fused_kernel]
fn axpb<const BLOCK: usize>(out: *mut f32, s: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    store(out + offs, load(out + offs, m) * s + 1.0, m);
}

/// Fresh inputs in [-4, 4), from one generator per thread (its seed printed for replay with
/// `FUSE_TEST_SEED`).
fn random(n: usize) -> Vec<f32> {
    thread_local!(static RNG: std::cell::RefCell<Rng> = std::cell::RefCell::new(Rng::fresh("gpu_interop")));
    RNG.with(|r| r.borrow_mut().vec(n, 4.0))
}

/// Within 1e-5 of float64 (relative above 1); NaN never passes.
fn close(what: &str, got: &[f32], want: &[f64]) {
    assert_close(what, &f64s(got), want, 1e-5, 1e-5);
}

/// CUDA refuses a context-wide synchronisation while a graph capture is in progress on any thread
/// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated; on an H100 with driver
/// 580 it also crashed inside `cuCtxSynchronize` in 2 of 60 runs). cudarc's
/// `CudaContext::new_stream` synchronises the context, so the tests that make cudarc streams or
/// contexts hold this lock exclusively, and the graph tests hold it shared.
static CONTEXT_WIDE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    CONTEXT_WIDE.write().unwrap_or_else(|p| p.into_inner())
}

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    CONTEXT_WIDE.read().unwrap_or_else(|p| p.into_inner())
}

fn user_stream() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    (ctx, stream)
}

fn poisoned(stream: &Arc<CudaStream>, n: usize) -> CudaSlice<f32> {
    stream.clone_htod(&vec![f32::NAN; n]).unwrap()
}

/// cudarc slices and views on the caller's own stream; results read back by cudarc on that
/// stream with no explicit synchronisation: the stream orders them.
fn cudarc_memory_on_the_callers_stream(_: &Device) {
    let _no_capture_meanwhile = exclusive();
    let (ctx, stream) = user_stream();
    let dev = Device::from_cudarc(ctx, stream.clone()).unwrap();
    assert!(dev.description().contains("caller's stream"), "{}", dev.description());
    let n = 100_003;
    let (x, y, z) = (random(n), random(n), random(n));
    let (xs, ys, zs) =
        (stream.clone_htod(&x).unwrap(), stream.clone_htod(&y).unwrap(), stream.clone_htod(&z).unwrap());
    let mut out = poisoned(&stream, n);
    add_mul::launch::<_, 1024>(&dev, n.div_ceil(1024) as u32, &xs, &ys, &zs, &mut out, n as i32).unwrap();
    let got = stream.clone_dtoh(&out).unwrap();
    close("whole slices", &got, &reference(&f64s(&x), &f64s(&y), &f64s(&z)));

    // Views: odd offsets (unaligned for the 16-byte specialisation), the output a sub-range.
    let (a, len) = (3usize, 50_001usize);
    let mut out2 = poisoned(&stream, n);
    add_mul::launch::<f32, 256>(
        &dev,
        len.div_ceil(256) as u32,
        &xs.slice(a..a + len),
        &ys.slice(a..a + len),
        &zs.slice(a..a + len),
        &mut out2.slice_mut(a + 7..a + 7 + len),
        len as i32,
    )
    .unwrap();
    dev.synchronize().unwrap();
    let got = stream.clone_dtoh(&out2).unwrap();
    let want = reference(&f64s(&x[a..a + len]), &f64s(&y[a..a + len]), &f64s(&z[a..a + len]));
    close("views", &got[a + 7..a + 7 + len], &want);
    assert!(got[..a + 7].iter().chain(&got[a + 7 + len..]).all(|v| v.is_nan()), "written outside the view");
}

/// cudarc memory whose context tracks events across several streams: the launch on one stream
/// waits for a write on another and a read on a third waits for the launch.
fn cudarc_event_tracking_orders_other_streams(_: &Device) {
    let _no_capture_meanwhile = exclusive();
    let ctx = CudaContext::new(0).unwrap();
    let (s_fuse, s_write, s_read) =
        (ctx.new_stream().unwrap(), ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let dev = Device::from_cudarc(ctx.clone(), s_fuse).unwrap();
    let n = 1 << 24;
    let x = random(n);
    let mut xs = s_write.alloc_zeros::<f32>(n).unwrap();
    s_write.memcpy_htod(&x, &mut xs).unwrap(); // written on s_write
    let mut out = poisoned(&s_write, n);
    for _ in 0..3 {
        scale_unmasked::launch::<1024>(&dev, (n / 1024) as u32, &xs, &mut out, 3.0).unwrap();
    }
    let got = s_read.clone_dtoh(&out).unwrap(); // read on s_read, no explicit sync
    let want: Vec<f64> = f64s(&x).iter().map(|v| v * 3.0).collect();
    close("ordered by cudarc's events", &got, &want);
}

/// fuse's own `Device::cuda(0)` takes cudarc memory of the same GPU when nothing needs ordering
/// beyond one stream, and refuses memory of an event-tracking context it is not built on.
fn foreign_contexts_are_checked(dev: &Device) {
    let _no_capture_meanwhile = exclusive();
    // A single-stream cudarc context on device 0 (the same primary context): accepted.
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let x = random(4096);
    let xs = stream.clone_htod(&x).unwrap();
    let mut out = dev.upload(&vec![f32::NAN; 4096]).unwrap();
    scale_unmasked::launch::<1024>(dev, 4, &xs, &mut out, 2.0).unwrap();
    close("default stream", &out.to_vec().unwrap(), &f64s(&x).iter().map(|v| v * 2.0).collect::<Vec<_>>());
    // The same context in multi-stream mode tracks events: refused, with the way out named.
    let other = ctx.new_stream().unwrap();
    let ys = other.clone_htod(&x).unwrap();
    match scale_unmasked::launch::<1024>(dev, 4, &ys, &mut out, 2.0) {
        Err(Error::WrongDevice(m)) => assert!(m.contains("Device::from_cudarc"), "{m}"),
        other => panic!("expected WrongDevice, got {other:?}"),
    }
    // A non-primary context is another CUcontext: its memory is refused, as is a stream of it
    // given with the primary context.
    let other_ctx = CudaContext::new_non_primary(0, 0).unwrap();
    let s2 = other_ctx.default_stream();
    let zs = s2.clone_htod(&x).unwrap();
    match scale_unmasked::launch::<1024>(dev, 4, &zs, &mut out, 2.0) {
        Err(Error::WrongDevice(m)) => assert!(m.contains("another CUDA context"), "{m}"),
        other => panic!("expected WrongDevice, got {other:?}"),
    }
    match Device::from_cudarc(ctx.clone(), s2.clone()) {
        Err(Error::WrongDevice(m)) => assert!(m.contains("another CUcontext"), "{m}"),
        other => panic!("expected WrongDevice, got {other:?}"),
    }
    // Host memory on a GPU launch and a GPU buffer on the CPU: refused.
    let mut host_out = vec![0.0f32; 4096];
    assert!(matches!(scale_unmasked::launch::<1024>(dev, 4, &x, &mut out, 2.0), Err(Error::WrongDevice(_))));
    let gx = dev.upload(&x).unwrap();
    assert!(matches!(
        scale_unmasked::launch::<1024>(&Device::cpu(), 4, &gx, &mut host_out, 2.0),
        Err(Error::WrongDevice(_))
    ));
    // And a buffer of one device on another device of the same GPU.
    let (uctx, ustream) = user_stream();
    let udev = Device::from_cudarc(uctx, ustream).unwrap();
    assert!(matches!(
        scale_unmasked::launch::<1024>(&udev, 4, &gx, &mut out, 2.0),
        Err(Error::WrongDevice(_))
    ));
}

/// Views of fuse buffers on the GPU: the view's length bounds the accesses (reported at sync).
fn buffer_views_on_the_gpu(dev: &Device) {
    let _no_capture_meanwhile = exclusive();
    let n_all = 10_000;
    let x = random(n_all);
    let xb = dev.upload(&x).unwrap();
    let mut out = dev.upload(&vec![f32::NAN; n_all]).unwrap();
    scale_unmasked::launch::<256>(
        dev,
        8,
        &xb.slice(1..2049).unwrap(),
        &mut out.slice_mut(5..2053).unwrap(),
        -1.5,
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    let want: Vec<f64> = f64s(&x[1..2049]).iter().map(|v| v * -1.5).collect();
    close("unaligned views", &got[5..2053], &want);
    assert!(got[..5].iter().chain(&got[2053..]).all(|v| v.is_nan()));
    // A view shorter than the launch: on a device of its own, so that no other test's
    // synchronize reports this error.
    let dev = &harness::isolated_gpu();
    let xb = dev.upload(&x).unwrap();
    let mut out = dev.upload(&vec![f32::NAN; n_all]).unwrap();
    scale_unmasked::launch::<256>(
        dev,
        8,
        &xb.slice(0..2000).unwrap(),
        &mut out.slice_mut(..2048).unwrap(),
        1.0,
    )
    .unwrap();
    match dev.synchronize() {
        Err(Error::OutOfBounds { param, index, .. }) => {
            assert_eq!(param, "x");
            assert!((2000..2048).contains(&index), "index {index}");
        }
        other => panic!("expected OutOfBounds at sync, got {other:?}"),
    }
}

/// A graph of ten launches replays to the same result as ten direct launches, and capturing runs
/// nothing (three replays give three passes through the chain, not four).
fn graphs_replay_captured_launches(dev: &Device) {
    let _captures_only = shared();
    let n = 3000;
    let x = random(n);
    let mut direct = dev.upload(&x).unwrap();
    let mut graphed = dev.upload(&x).unwrap();
    let scales: Vec<f32> = (0..10).map(|i| 0.5 + 0.1 * i as f32).collect();
    for &s in &scales {
        axpb::launch::<1024>(dev, 3, &mut direct, s, n as i32).unwrap();
    }
    let graph = dev
        .capture(|| {
            for &s in &scales {
                axpb::launch::<1024>(dev, 3, &mut graphed, s, n as i32)?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(graph.kernels(), 10);
    for _ in 0..3 {
        graph.launch().unwrap();
    }
    drop(graph);
    let mut want = f64s(&x);
    for _ in 0..3 {
        for &s in &scales {
            want.iter_mut().for_each(|v| *v = *v * f64::from(s) + 1.0);
        }
    }
    let got = graphed.to_vec().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let err = (f64::from(*g) - w).abs();
        assert!(err <= 1e-4 * w.abs().max(1.0), "element {i}: got {g}, want {w}");
    }
    // The direct launches (once through the chain) for comparison.
    let mut once = f64s(&x);
    for &s in &scales {
        once.iter_mut().for_each(|v| *v = *v * f64::from(s) + 1.0);
    }
    close("direct", &direct.to_vec().unwrap(), &once);
}

/// A buffer moved into the capture closure dies there; the graph keeps its memory alive.
fn graphs_keep_moved_buffers_alive(dev: &Device) {
    let _captures_only = shared();
    let x = random(1024);
    let xb = dev.upload(&x).unwrap();
    let mut tmp = dev.upload(&vec![f32::NAN; 1024]).unwrap();
    scale_unmasked::launch::<1024>(dev, 1, &xb, &mut tmp, 2.0).unwrap(); // compiles it
    let graph = dev.capture(move || scale_unmasked::launch::<1024>(dev, 1, &xb, &mut tmp, 2.0)).unwrap();
    // Allocations after the closure returned cannot reuse tmp's memory while the graph lives.
    let others: Vec<_> = (0..8).map(|_| dev.upload(&vec![7.0f32; 1024]).unwrap()).collect();
    for _ in 0..5 {
        graph.launch().unwrap();
    }
    dev.synchronize().unwrap();
    for o in &others {
        assert_eq!(o.to_vec().unwrap(), vec![7.0f32; 1024], "a graph wrote into another buffer");
    }
}

/// What a capture cannot do is a clear error, and the device stays usable after it.
fn graph_capture_errors_are_clear(dev: &Device) {
    let _captures_only = shared();
    let x = dev.upload(&random(4096)).unwrap();
    let mut out = dev.zeros::<f32>(4096).unwrap();
    // A configuration never launched before: the capture would have to compile it.
    match dev.capture(|| scale_unmasked::launch::<512>(dev, 8, &x, &mut out, 3.0)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("launch it once"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    scale_unmasked::launch::<512>(dev, 8, &x, &mut out, 3.0).unwrap();
    // Synchronising, copying back and allocating inside a capture.
    match dev.capture(|| dev.synchronize()) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("captures a graph"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    match dev.capture(|| out.to_vec().map(drop)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("captures a graph"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    let other = dev.upload(&vec![2.0f32; 4096]).unwrap();
    match dev.capture(|| out.copy_from(&other)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("captures a graph"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    match dev.capture(|| dev.zeros::<f32>(10).map(drop)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("captures a graph"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    // Nested captures.
    match dev.capture(|| dev.capture(|| Ok(())).map(drop)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("already capturing"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    // cudarc memory cannot be kept alive by a graph.
    let stream = dev.cudarc_stream().unwrap().clone();
    let xs = stream.clone_htod(&vec![1.0f32; 4096]).unwrap();
    match dev.capture(|| scale_unmasked::launch::<512>(dev, 8, &xs, &mut out, 3.0)) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("cudarc memory"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // A panic inside the closure ends the capture too.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = dev.capture(|| panic!("inside the capture"));
    }));
    assert!(caught.is_err());
    // Still usable: a direct launch and a new capture work.
    let xv = random(4096);
    let xb = dev.upload(&xv).unwrap();
    scale_unmasked::launch::<512>(dev, 8, &xb, &mut out, 3.0).unwrap();
    let g = dev.capture(|| scale_unmasked::launch::<512>(dev, 8, &xb, &mut out, 3.0)).unwrap();
    g.launch().unwrap();
    drop(g);
    close("after errors", &out.to_vec().unwrap(), &f64s(&xv).iter().map(|v| v * 3.0).collect::<Vec<_>>());
}

/// Several threads capture, replay and drop their own graphs on one device at the same time,
/// while another thread launches directly: each capture records only its own thread's launches.
fn graphs_capture_on_several_threads_at_once(dev: &Device) {
    let _captures_only = shared();
    let n: usize = 5000;
    let grid = n.div_ceil(1024) as u32;
    let mut warm = dev.upload(&vec![0.0f32; n]).unwrap();
    axpb::launch::<1024>(dev, grid, &mut warm, 1.0, n as i32).unwrap(); // compiles it once
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for round in 0..25 {
                    let x = random(n);
                    let mut buf = dev.upload(&x).unwrap();
                    let scales: Vec<f32> = (0..5).map(|i| 0.25 + 0.1 * (i + t + round % 3) as f32).collect();
                    let graph = dev
                        .capture(|| {
                            scales
                                .iter()
                                .try_for_each(|&s| axpb::launch::<1024>(dev, grid, &mut buf, s, n as i32))
                        })
                        .unwrap();
                    assert_eq!(graph.kernels(), 5, "thread {t}: another thread's launches were captured");
                    graph.launch().unwrap();
                    graph.launch().unwrap();
                    drop(graph);
                    let mut want = f64s(&x);
                    for _ in 0..2 {
                        for &s in &scales {
                            want.iter_mut().for_each(|v| *v = *v * f64::from(s) + 1.0);
                        }
                    }
                    let got = buf.to_vec().unwrap();
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let err = (f64::from(*g) - w).abs();
                        assert!(
                            err <= 1e-4 * w.abs().max(1.0),
                            "thread {t} round {round} element {i}: got {g}, want {w}"
                        );
                    }
                }
            });
        }
        s.spawn(move || {
            for _ in 0..100 {
                let x = random(n);
                let mut buf = dev.upload(&x).unwrap();
                axpb::launch::<1024>(dev, grid, &mut buf, 2.0, n as i32).unwrap();
                let want: Vec<f64> = f64s(&x).iter().map(|v| v * 2.0 + 1.0).collect();
                close("direct beside captures", &buf.to_vec().unwrap(), &want);
            }
        });
    });
}

/// Every GPU present launches from its own thread; kernels compile once per architecture.
fn two_gpus_from_two_threads(_: &Device) {
    let count = Device::cuda_count().unwrap();
    assert!(count >= 2, "gated by the harness");
    let devices: Vec<Device> = (0..count).map(|i| Device::cuda(i).unwrap()).collect();
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.ordinal(), Some(i));
    }
    std::thread::scope(|s| {
        for d in devices.iter().take(2) {
            s.spawn(move || {
                for round in 0..20 {
                    let n = 100_000 + round * 997;
                    let (x, y, z) = (random(n), random(n), random(n));
                    let (xb, yb, zb) = (d.upload(&x).unwrap(), d.upload(&y).unwrap(), d.upload(&z).unwrap());
                    let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
                    add_mul::launch::<f32, 1024>(
                        d,
                        n.div_ceil(1024) as u32,
                        &xb,
                        &yb,
                        &zb,
                        &mut out,
                        n as i32,
                    )
                    .unwrap();
                    close("per GPU", &out.to_vec().unwrap(), &reference(&f64s(&x), &f64s(&y), &f64s(&z)));
                }
            });
        }
    });
    // A buffer of GPU 0 on GPU 1.
    let x0 = devices[0].upload(&[1.0f32; 1024]).unwrap();
    let mut out1 = devices[1].zeros::<f32>(1024).unwrap();
    assert!(matches!(
        scale_unmasked::launch::<1024>(&devices[1], 1, &x0, &mut out1, 1.0),
        Err(Error::WrongDevice(_))
    ));
}

fn main() {
    let mut trials = harness::gpu_trials(vec![
        ("cudarc_memory_on_the_callers_stream", cudarc_memory_on_the_callers_stream),
        ("cudarc_event_tracking_orders_other_streams", cudarc_event_tracking_orders_other_streams),
        ("foreign_contexts_are_checked", foreign_contexts_are_checked),
        ("buffer_views_on_the_gpu", buffer_views_on_the_gpu),
        ("graphs_replay_captured_launches", graphs_replay_captured_launches),
        ("graphs_keep_moved_buffers_alive", graphs_keep_moved_buffers_alive),
        ("graph_capture_errors_are_clear", graph_capture_errors_are_clear),
        ("graphs_capture_on_several_threads_at_once", graphs_capture_on_several_threads_at_once),
    ]);
    let gpus = Device::cuda_count().unwrap_or(0);
    let two = if gpus >= 2 && harness::usable_gpu().is_ok() {
        harness::gpu_trials(vec![("two_gpus_from_two_threads", two_gpus_from_two_threads)])
    } else {
        let why = format!("{gpus} usable GPU(s) here; this test needs two");
        vec![libtest_mimic::Trial::test("two_gpus_from_two_threads", move || Err(why.into()))
            .with_ignored_flag(true)
            .with_kind("needs two NVIDIA GPUs")]
    };
    trials.extend(two);
    harness::run(trials)
}
