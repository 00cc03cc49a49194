use fuse::fused_kernel;

// Independent mistakes are all reported by one build.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *const f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask);
    let w = exp(v) + undefined_thing;
    let bad = v + offs;
    store(out + offs, w, mask);
}

fn main() {}
