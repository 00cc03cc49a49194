use fuse::fused_kernel;

#[fused_kernel]
fn scale<const BLOCK: usize>(x: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(x + offs, load(x + offs, mask) * 2.0, mask);
}

fn main() -> Result<(), fuse::Error> {
    let device = fuse::Device::cpu();
    let mut x = device.zeros::<f32>(1000)?;
    scale::launch::<1000>(&device, 1u32, &mut x, 1000)
}
