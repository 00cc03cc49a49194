use fuse::fused_kernel;

mod kernels {
    use fuse::fused_kernel;

    /// Doubles every element.
    ///
    /// Doc comments and lint attributes go on the generated module.
    #[fused_kernel]
    #[allow(clippy::all)]
    pub fn twice<const BLOCK: usize>(x: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let mask = offs < n;
        store(x + offs, load(x + offs, mask) * 2.0, mask);
    }
}

#[fused_kernel]
pub(crate) fn negate<const BLOCK: usize>(x: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(x + offs, -load(x + offs, offs < n), offs < n);
}

fn main() -> Result<(), fuse::Error> {
    let device = fuse::Device::cpu();
    let mut x = device.upload(&[1.0f32, 2.0, 3.0])?;
    kernels::twice::launch::<4>(&device, 1u32, &mut x, 3)?;
    negate::launch::<4>(&device, 1u32, &mut x, 3)?;
    assert_eq!(x.to_vec()?, vec![-2.0, -4.0, -6.0]);
    assert_eq!(kernels::twice::NAME, "twice");
    Ok(())
}
