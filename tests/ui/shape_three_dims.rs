use fuse::fused_kernel;

// Tiles have one or two dims.
#[fused_kernel]
fn k<const M: usize, const N: usize>(x: *const f32, out: *mut f32) {
    let r = arange(0, M);
    let c = arange(0, N);
    let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
    let z = zeros([M, N, 2]);
    store(out + r, z.sum(1));
}

fn main() {}
