use fuse::fused_kernel;

#[fused_kernel]
fn k<'a, T: Float, const BLOCK: usize>(x: *const T, out: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
