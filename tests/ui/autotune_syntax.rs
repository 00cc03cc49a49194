use fuse::fused_kernel;

#[fused_kernel(autotune(configs = [(BLOCK = 1 << 10)], key = [n]))]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {
    // The launcher is still there after a syntax error in the attribute.
    let d = fuse::Device::cpu();
    let x = d.upload(&[1.0f32]).unwrap();
    let mut out = d.zeros::<f32>(1).unwrap();
    let _ = k::launch_autotuned(&d, |c| fuse::Grid::from(c.BLOCK as u32), &x, &mut out, 1);
}
