use fuse::fused_kernel;

// `a` is [32, 16] but `b` has 32 rows: the inner dimensions must agree.
#[fused_kernel]
fn k(a: *const f16, b: *const f16, c: *mut f32) {
    let r32 = arange(0, 32);
    let r16 = arange(0, 16);
    let x = load(a + r32.expand_dims(1) * 16 + r16.expand_dims(0));
    let y = load(b + r32.expand_dims(1) * 16 + r16.expand_dims(0));
    store(c + r32.expand_dims(1) * 16 + r16.expand_dims(0), dot(x, y));
}

fn main() {}
