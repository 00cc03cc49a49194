use fuse::fused_kernel;

#[fused_kernel]
fn k<T: Float, const BLOCK: usize>(x: *const T, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n).to(U), offs < n);
}

fn main() {}
