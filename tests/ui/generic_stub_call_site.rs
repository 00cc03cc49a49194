use fuse::prelude::*;

// The generic kernel has a mistake; the generated module keeps `launch::<T, BLOCK>`, `spec::<T>()`
// and the instantiations' modules, so the calls in `main` add no errors of their own.
#[fused_kernel]
fn scale<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, alpha: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, load(x + offs, mask) * alph, mask);
}

fn main() -> Result<(), fuse::Error> {
    let device = Device::cpu();
    let x = device.upload(&[f16::from_f32(1.0); 256])?;
    let mut out = device.zeros::<f16>(256)?;
    scale::launch::<f16, 256>(&device, 1u32, &x, &mut out, 2.0, 256)?;
    scale::launch::<_, 256>(&device, 1u32, &x, &mut out, 2.0, 256)?;
    println!("{} {}", scale::spec::<f32>().name(), scale::bf16::NAME);
    Ok(())
}
