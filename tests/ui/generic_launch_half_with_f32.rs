// `T: Half` is f16 or bf16 only.
use fuse::prelude::*;

#[fused_kernel]
fn scale<T: Half, const BLOCK: usize>(x: *const T, out: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let dev = Device::cpu();
    let x = dev.zeros::<f32>(16)?;
    let mut out = dev.zeros::<f32>(16)?;
    scale::launch::<f32, 16>(&dev, 1, &x, &mut out, 16)
}
