use fuse::prelude::*;

#[fused_kernel]
fn scale<T: Float, const BLOCK: usize>(x: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(x + offs, load(x + offs, mask) * 2.0, mask);
}

fn main() -> Result<(), fuse::Error> {
    let device = Device::cpu();
    let mut x = device.zeros::<bf16>(1000)?;
    scale::launch::<_, 1000>(&device, 1u32, &mut x, 1000)
}
