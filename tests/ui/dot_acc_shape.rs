use fuse::fused_kernel;

// The accumulator of a [32, 16] @ [16, 64] product is [32, 64].
#[fused_kernel]
fn k(a: *const f16, b: *const f16, c: *mut f32) {
    let rm = arange(0, 32);
    let rk = arange(0, 16);
    let rn = arange(0, 64);
    let x = load(a + rm.expand_dims(1) * 16 + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    let acc = dot(x, y, zeros([64, 32]));
    store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), acc);
}

fn main() {}
