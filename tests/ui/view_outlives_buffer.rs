// A view borrows its buffer: the buffer cannot be dropped while a view of it is used.
use fuse::prelude::*;

#[fused_kernel]
fn scale<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let dev = Device::cpu();
    let x = dev.zeros::<f32>(32)?;
    let mut out = dev.zeros::<f32>(16)?;
    let view = x.slice(16..32)?;
    drop(x);
    scale::launch::<16>(&dev, 1, &view, &mut out, 16)
}
