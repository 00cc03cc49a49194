use fuse::fused_kernel;

// A name can be rebound, even to another type or shape; parameters can be shadowed too.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let x = load(x + offs, mask);
    let x = x * 2.0;
    let n = sum(x);
    let x = x - n;
    store(out + offs, x, mask);
}

fn main() {}
