use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f64, out: *mut f32, alpha: f64, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, 0.0, offs < n);
}

fn main() {}
