use fuse::fused_kernel;

// BM = 8 at the launch: `dot` needs M of at least 16 (checked where `launch::<8, ..>` is
// instantiated, as powers of two are).
#[fused_kernel]
fn mm<const BM: usize, const BK: usize>(a: *const f16, b: *const f16, c: *mut f32) {
    let rm = arange(0, BM);
    let rk = arange(0, BK);
    let rn = arange(0, 16);
    let x = load(a + rm.expand_dims(1) * BK + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 16 + rn.expand_dims(0));
    store(c + rm.expand_dims(1) * 16 + rn.expand_dims(0), dot(x, y));
}

fn main() -> Result<(), fuse::Error> {
    let device = fuse::Device::cpu();
    let a = device.zeros::<fuse::half::f16>(8 * 32)?;
    let b = device.zeros::<fuse::half::f16>(32 * 16)?;
    let mut c = device.zeros::<f32>(8 * 16)?;
    mm::launch::<8, 32>(&device, 1u32, &a, &b, &mut c)
}
