use fuse::prelude::*;

#[fused_kernel]
pub fn add_mul<const BLOCK: usize>(x: *const f32, y: *const f32, z: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let x = load(x + offs, mask);
    let y = load(y + offs, mask);
    let z = load(z + offs, mask);
    store(out + offs, (x + y) * z, mask);
}

fn main() -> Result<(), fuse::Error> {
    let (device, _why_not_gpu) = Device::best();          // the first GPU, else the CPU
    let n = 1 << 20;
    let x = device.upload(&vec![1.0f32; n])?;
    let mut out = device.zeros::<f32>(n)?;
    add_mul::launch::<1024>(&device, n.div_ceil(1024) as u32, &x, &x, &x, &mut out, n as i32)?;
    assert_eq!(out.to_vec()?[0], 2.0);
    Ok(())
}
