use fuse::fused_kernel;

#[fused_kernel]
fn k<f16: Float, const BLOCK: usize>(x: *const f16, out: *mut f16, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
