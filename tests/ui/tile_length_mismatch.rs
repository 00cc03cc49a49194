use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let a = arange(0, BLOCK);
    let b = arange(0, 2 * BLOCK);
    let offs = a + b;
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
