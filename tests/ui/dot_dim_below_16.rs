use fuse::fused_kernel;

// K = 8: `dot` needs M, N and K of at least 16.
#[fused_kernel]
fn k(a: *const f16, b: *const f16, c: *mut f32) {
    let rm = arange(0, 32);
    let rk = arange(0, 8);
    let rn = arange(0, 64);
    let x = load(a + rm.expand_dims(1) * 8 + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), dot(x, y));
}

fn main() {}
