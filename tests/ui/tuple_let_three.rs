use fuse::fused_kernel;

// A tuple `let` binds exactly two names.
#[fused_kernel]
fn k<const N: usize>(x: *const f32, out: *mut f32) {
    let c = arange(0, N);
    let (a, b, d) = split(load(x + c));
    store(out + c, c.to(f32));
}

fn main() {}
