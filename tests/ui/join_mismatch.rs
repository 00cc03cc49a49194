use fuse::fused_kernel;

// `join` interleaves two tiles of one shape and type.
#[fused_kernel]
fn k<const N: usize>(x: *const f32, out: *mut f32) {
    let c = arange(0, N);
    let (even, odd) = split(load(x + c));
    store(out + c, join(even, odd.to(f16)));
    store(out + c, join(even, load(x + c)));
}

fn main() {}
