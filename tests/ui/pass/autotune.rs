// Autotuned kernels: generic, several key types, `restore`, no const generics.
use fuse::prelude::*;

#[fused_kernel(autotune(
    configs = [(BLOCK = 256, num_warps = 2, num_stages = 1), (BLOCK = 1024,), (BLOCK = 4096, num_warps = 8)],
    key = [n, m, s],
    restore = [out],
))]
pub fn scale_into<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, s: f32, n: i64, m: u32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n.to(i32);
    store(out + offs, load(out + offs, mask) + load(x + offs, mask) * s, mask);
}

#[fused_kernel(autotune(configs = [(num_warps = 1), (num_warps = 2)]))]
fn fill(out: *mut f32) {
    store(out + arange(0, 64), full(64, 1.0));
}

fn main() -> Result<(), fuse::Error> {
    let d = Device::cpu();
    let x = d.upload(&[f16::from_f32(1.0); 300])?;
    let mut out = d.zeros::<f16>(300)?;
    let c: scale_into::Config =
        scale_into::launch_autotuned(&d, |c| Grid::from(300u32.div_ceil(c.BLOCK as u32)), &x, &mut out, 2.0, 300, 7)?;
    assert_eq!(c, scale_into::CONFIGS[0]);
    let _ = scale_into::launch_autotuned::<f16>(&d, |c| Grid::from(c.BLOCK as u32), &x, &mut out, 2.0, 300, 7);
    let mut o = d.zeros::<f32>(64)?;
    let c = fill::launch_autotuned(&d, |_| Grid::from(1u32), &mut o)?;
    assert_eq!(c.num_warps, Some(1));
    Ok(())
}
