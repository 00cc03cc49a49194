use fuse::fused_kernel;

// A generic kernel's attribute is checked once, not once per element type.
#[fused_kernel(autotune(configs = [(BLOCK = 512), (BLOCK = 100)], key = [x]))]
fn k<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {
    let d = fuse::Device::cpu();
    let x = d.upload(&[fuse::half::f16::ONE]).unwrap();
    let mut out = d.zeros::<fuse::half::f16>(1).unwrap();
    let _ = k::launch_autotuned::<fuse::half::f16>(&d, |c| fuse::Grid::from(c.BLOCK as u32), &x, &mut out, 1);
}
