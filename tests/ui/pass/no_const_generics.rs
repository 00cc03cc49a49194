use fuse::fused_kernel;

// No const generics: the tile length is a literal.
#[fused_kernel]
fn fill(out: *mut f32, value: f32, n: i32) {
    let offs = program_id(0) * 256 + arange(0, 256);
    store(out + offs, full(256, value), offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let device = fuse::Device::cpu();
    let mut out = device.zeros::<f32>(300)?;
    fill::launch(&device, 2u32, &mut out, 1.5, 300)?;
    assert!(out.to_vec()?.iter().all(|&v| v == 1.5));
    Ok(())
}
