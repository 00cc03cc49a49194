use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask, f32::NEG_INFINITY);
    let e = (v - v.max()).exp();
    let y = e / e.sum();
    store(out + offs, y.maximum(0.0).minimum(1.0).sqrt().abs(), mask);
}

fn main() {}
