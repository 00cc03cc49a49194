//! `launch` on the CPU device: end to end through the interpreter, and its out-of-bounds report.
mod common;

use common::*;
use fuse_runtime::{launch, Device, Error, LaunchConfig};

#[test]
fn add_one_on_the_cpu() {
    let d = Device::cpu();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let xb = d.upload(&x).unwrap();
    let mut out = d.zeros::<f32>(n).unwrap();
    let grid = n.div_ceil(256) as u32;
    launch(
        add_one_spec(),
        &d,
        LaunchConfig::new(grid),
        &[256],
        &mut [(&xb).into(), (&mut out).into(), (n as i32).into()],
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    for (i, (g, x)) in got.iter().zip(&x).enumerate() {
        assert_eq!(*g, x + 1.0, "element {i}");
    }
}

#[test]
fn out_of_bounds_on_the_cpu_names_param_index_and_len() {
    let d = Device::cpu();
    let xb = d.upload(&[1.0f32; 10]).unwrap();
    let mut out = d.zeros::<f32>(16).unwrap();
    // n = 16 > len(x) = 10: the mask is true at 10..16, so x[10] is out of bounds.
    let e =
        launch(add_one_spec(), &d, 1u32.into(), &[16], &mut [(&xb).into(), (&mut out).into(), 16i32.into()])
            .unwrap_err();
    match &e {
        Error::OutOfBounds { kernel, param, index, len, program } => {
            assert_eq!(
                (kernel.as_str(), param.as_str(), *len, *program),
                ("add_one", "x", Some(10), Some([0, 0, 0]))
            );
            assert!((10..16).contains(index), "{e}");
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
    println!("{e}");
}
