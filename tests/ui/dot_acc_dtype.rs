use fuse::fused_kernel;

// bf16 operands accumulate in f32, not in i32.
#[fused_kernel]
fn k(a: *const bf16, b: *const bf16, c: *mut f32) {
    let rm = arange(0, 32);
    let rk = arange(0, 16);
    let rn = arange(0, 64);
    let x = load(a + rm.expand_dims(1) * 16 + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    let mut acc = full([32, 64], 0);
    acc = x.dot(y, acc);
    store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), acc.to(f32));
}

fn main() {}
