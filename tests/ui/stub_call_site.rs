use fuse::fused_kernel;

// The kernel has a mistake; the generated `launch` keeps its signature, so the call in `main`
// adds no errors of its own.
#[fused_kernel]
fn scale<const BLOCK: usize>(x: *const f32, out: *mut f32, alpha: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, load(x + offs, mask) * alph, mask);
}

fn main() -> Result<(), fuse::Error> {
    let device = fuse::Device::cpu();
    let x = device.upload(&[1.0f32; 256])?;
    let mut out = device.zeros::<f32>(256)?;
    scale::launch::<256>(&device, 1u32, &x, &mut out, 2.0, 256)?;
    println!("{:?}", out.to_vec()?);
    Ok(())
}
