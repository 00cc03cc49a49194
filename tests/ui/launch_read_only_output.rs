// A shared borrow cannot be the writable output of a launch.
use fuse::prelude::*;

#[fused_kernel]
fn scale<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let dev = Device::cpu();
    let x = dev.zeros::<f32>(16)?;
    let out = dev.zeros::<f32>(16)?;
    scale::launch::<16>(&dev, 1, &x, &out, 16)
}
