use fuse::fused_kernel;

// `where_` with scalar branches (and a scalar condition).
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32, alpha: f32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask);
    let sign = where_(v > 0.0, 1.0, -1.0);
    let a = where_(n > 100, alpha, 0.0);
    store(out + offs, sign * a + where_(mask, v, 0.0), mask);
}

fn main() {}
