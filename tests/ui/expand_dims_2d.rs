use fuse::fused_kernel;

// expand_dims of a 2-D tile would be 3-D.
#[fused_kernel]
fn k<const M: usize, const N: usize>(x: *const f32, out: *mut f32) {
    let r = arange(0, M);
    let c = arange(0, N);
    let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
    store(out + c, t.expand_dims(0).sum(0).sum(0));
}

fn main() {}
