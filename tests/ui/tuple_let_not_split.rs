use fuse::fused_kernel;

// A tuple `let` takes `split(x)` and nothing else.
#[fused_kernel]
fn k<const N: usize>(x: *const f32, out: *mut f32) {
    let c = arange(0, N);
    let (a, b) = trans(load(x + c.expand_dims(0)));
    store(out + c, a + b);
}

fn main() {}
