use fuse::fused_kernel;

// The axis must be a literal.
#[fused_kernel]
fn k<const M: usize, const N: usize>(x: *const f32, out: *mut f32) {
    let r = arange(0, M);
    let c = arange(0, N);
    let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
    let a = 1;
    store(out + r, t.sum(a + program_id(0)));
}

fn main() {}
