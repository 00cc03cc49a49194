// One buffer passed as both an input and the writable output of a launch is a borrow error.
use fuse::prelude::*;

#[fused_kernel]
fn scale<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let dev = Device::cpu();
    let mut x = dev.zeros::<f32>(16)?;
    scale::launch::<16>(&dev, 1, &x, &mut x, 16)
}
