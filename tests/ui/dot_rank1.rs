use fuse::fused_kernel;

// A 1-D tile is not a matrix.
#[fused_kernel]
fn k(a: *const f16, b: *const f16, c: *mut f32) {
    let rk = arange(0, 16);
    let rn = arange(0, 64);
    let x = load(a + rk);
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    store(c + rn, sum(dot(x, y), 0));
}

fn main() {}
