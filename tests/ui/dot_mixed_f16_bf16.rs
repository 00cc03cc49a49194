use fuse::fused_kernel;

// One operand f16, the other bf16.
#[fused_kernel]
fn k(a: *const f16, b: *const bf16, c: *mut f32) {
    let rm = arange(0, 32);
    let rk = arange(0, 16);
    let rn = arange(0, 64);
    let x = load(a + rm.expand_dims(1) * 16 + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), dot(x, y));
}

fn main() {}
