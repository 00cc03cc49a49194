//! Launch arguments beyond whole fuse buffers, on the CPU interpreter (the GPU half is in
//! tests/gpu_interop.rs): views of buffers (`slice`, `slice_mut`) and host slices, each checked
//! against float64 on fresh random inputs with poisoned outputs; the view's length (never the
//! allocation's) bounding the accesses and the launch-time proofs; clear errors for bad ranges,
//! memory the device cannot use, and graphs on the CPU.
mod common;

use common::add_mul::{add_mul, reference};
use common::{assert_close, f64s, Rng};
use fuse::{fused_kernel, Device, Error, LaunchConfig};

/// No mask at all: every lane of every program reads and writes, so the view's length alone
/// decides what is in bounds.
#[fused_kernel]
fn scale_unmasked<const BLOCK: usize>(x: *const f32, out: *mut f32, s: f32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs) * s);
}

/// Fresh inputs in [-4, 4), from one generator per thread (its seed printed for replay with
/// `FUSE_TEST_SEED`).
fn random(n: usize) -> Vec<f32> {
    thread_local!(static RNG: std::cell::RefCell<Rng> = std::cell::RefCell::new(Rng::fresh("interop")));
    RNG.with(|r| r.borrow_mut().vec(n, 4.0))
}

/// Within 1e-5 of float64 (relative above 1); NaN never passes.
fn close(what: &str, got: &[f32], want: &[f64]) {
    assert_close(what, &f64s(got), want, 1e-5, 1e-5);
}

#[test]
fn buffer_views_are_kernel_arguments_and_writes_stay_inside_them() {
    let dev = Device::cpu();
    let (n_all, start, n) = (5000usize, 123usize, 3001usize);
    let (x, y, z) = (random(n_all), random(n_all), random(n_all));
    let (xb, yb, zb) = (dev.upload(&x).unwrap(), dev.upload(&y).unwrap(), dev.upload(&z).unwrap());
    let mut out = dev.upload(&vec![f32::NAN; n_all]).unwrap();
    let range = start..start + n;
    add_mul::launch::<_, 256>(
        &dev,
        n.div_ceil(256) as u32,
        &xb.slice(range.clone()).unwrap(),
        &yb.slice(range.clone()).unwrap(),
        &zb.slice(range.clone()).unwrap(),
        &mut out.slice_mut(range.clone()).unwrap(),
        n as i32,
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    let want = reference(&f64s(&x[range.clone()]), &f64s(&y[range.clone()]), &f64s(&z[range.clone()]));
    close("inside the view", &got[range.clone()], &want);
    assert!(got[..start].iter().chain(&got[start + n..]).all(|v| v.is_nan()), "written outside the view");
    // A writable view is also readable, and a whole `&mut Buffer` still is.
    let view = out.slice(range.clone()).unwrap();
    assert_eq!(view.len(), n);
    assert_eq!(view.to_vec().unwrap(), got[range].to_vec());
}

#[test]
fn host_slices_run_in_place_on_the_cpu() {
    let dev = Device::cpu();
    let n = 1000;
    let (x, y, z) = (random(n), random(n), random(n));
    let mut out = vec![f32::NAN; n];
    add_mul::launch::<_, 128>(&dev, 8, &x, x.as_slice(), &z[..], &mut out, n as i32).unwrap();
    close("host slices", &out, &reference(&f64s(&x), &f64s(&x), &f64s(&z)));
    let mut out2 = vec![f32::NAN; n];
    add_mul::launch::<_, 128>(&dev, 8, &y, &y, &out, out2.as_mut_slice(), n as i32).unwrap();
    let first = reference(&f64s(&x), &f64s(&x), &f64s(&z));
    let want: Vec<f64> = f64s(&y).iter().zip(&first).map(|(y, f)| (y + y) * (*f as f32 as f64)).collect();
    close("host slices, second launch", &out2, &want);
}

#[test]
fn bounds_use_the_view_length_not_the_allocation() {
    let dev = Device::cpu();
    let x = dev.upload(&random(4096)).unwrap();
    let mut out = dev.upload(&vec![f32::NAN; 4096]).unwrap();
    // Two programs of 256 cover 512 elements: inside a 512-element view, one past a 500-element one.
    scale_unmasked::launch::<256>(
        &dev,
        2,
        &x.slice(0..512).unwrap(),
        &mut out.slice_mut(1000..1512).unwrap(),
        2.0,
    )
    .unwrap();
    let err = scale_unmasked::launch::<256>(
        &dev,
        2,
        &x.slice(0..500).unwrap(),
        &mut out.slice_mut(..512).unwrap(),
        2.0,
    )
    .unwrap_err();
    match err {
        Error::OutOfBounds { param, index, len, .. } => {
            assert_eq!(param, "x");
            assert_eq!(len, Some(500), "the view's length");
            assert!((500..512).contains(&index), "index {index}");
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    // The launch-time proof sees the views' lengths too.
    let spec = &scale_unmasked::SPEC;
    let cfg = LaunchConfig::new(2u32);
    let (xv, mut ov) = (x.slice(0..512).unwrap(), out.slice_mut(0..512).unwrap());
    let args = [
        fuse::DeviceRead::<f32>::kernel_arg(&xv),
        fuse::DeviceWrite::<f32>::kernel_arg_mut(&mut ov),
        2.0f32.into(),
    ];
    assert_eq!(spec.proven_in_bounds(&dev, cfg, &[256], &args).unwrap(), vec![true, true]);
    let (xv, mut ov) = (x.slice(0..511).unwrap(), out.slice_mut(0..4096).unwrap());
    let args = [
        fuse::DeviceRead::<f32>::kernel_arg(&xv),
        fuse::DeviceWrite::<f32>::kernel_arg_mut(&mut ov),
        2.0f32.into(),
    ];
    assert_eq!(spec.proven_in_bounds(&dev, cfg, &[256], &args).unwrap(), vec![false, true]);
}

#[test]
#[allow(clippy::reversed_empty_ranges)] // the reversed range is the point
fn bad_ranges_are_errors_not_panics() {
    let dev = Device::cpu();
    let mut b = dev.zeros::<f32>(10).unwrap();
    for (what, r) in [("past the end", b.slice(5..11).err()), ("reversed", b.slice(7..3).err())] {
        match r {
            Some(Error::InvalidArgument(m)) => {
                assert!(m.contains("not within the buffer's 10 elements"), "{what}: {m}")
            }
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert!(b.slice(..=10).is_err());
    assert!(b.slice_mut(11..).is_err());
    assert_eq!(b.slice(10..).unwrap().len(), 0, "an empty view at the end is fine");
    assert_eq!(b.slice(..).unwrap().len(), 10);
    assert_eq!(b.slice_mut(2..=4).unwrap().len(), 3);
}

#[test]
fn graphs_need_a_gpu() {
    let dev = Device::cpu();
    let x = dev.upload(&[1.0f32; 4]).unwrap();
    let mut out = dev.zeros::<f32>(4).unwrap();
    match dev.capture(|| scale_unmasked::launch::<4>(&dev, 1, &x, &mut out, 1.0)) {
        Err(Error::InvalidLaunch(m)) => assert!(m.contains("graphs need a CUDA device"), "{m}"),
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    // Nothing ran.
    assert_eq!(out.to_vec().unwrap(), vec![0.0; 4]);
}
