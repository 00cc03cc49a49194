use fuse::fused_kernel;

// Shapes that do not broadcast: both are named.
#[fused_kernel]
fn k<const M: usize, const N: usize>(x: *const f32, out: *mut f32) {
    let r = arange(0, M);
    let c = arange(0, N);
    let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
    let bad = t + arange(0, 2 * N).to(f32).expand_dims(0);
    store(out + c, bad.sum(0));
}

fn main() {}
