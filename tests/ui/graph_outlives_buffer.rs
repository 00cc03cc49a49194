// A graph borrows the buffers its capture used: dropping one before a replay does not compile.
use fuse::prelude::*;

#[fused_kernel]
fn scale<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let dev = Device::cuda(0)?;
    let x = dev.zeros::<f32>(16)?;
    let mut out = dev.zeros::<f32>(16)?;
    let graph = dev.capture(|| scale::launch::<16>(&dev, 1, &x, &mut out, 16))?;
    drop(out);
    graph.launch()
}
