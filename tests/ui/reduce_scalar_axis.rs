use fuse::fused_kernel;

// A scalar has no axis to reduce along.
#[fused_kernel]
fn k<const M: usize, const N: usize>(x: *const f32, out: *mut f32) {
    let r = arange(0, M);
    let c = arange(0, N);
    let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
    let s = t.sum();
    store(out, s.max(0));
}

fn main() {}
