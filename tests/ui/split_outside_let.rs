use fuse::fused_kernel;

// `split` gives two tiles: only a tuple `let` can take them.
#[fused_kernel]
fn k<const N: usize>(x: *const f32, out: *mut f32) {
    let c = arange(0, N);
    let halves = split(load(x + c));
    store(out + c, halves);
}

fn main() {}
