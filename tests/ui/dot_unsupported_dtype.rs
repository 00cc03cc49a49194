use fuse::fused_kernel;

// `dot` takes f16, bf16, f32 (as TF32) or i8 tiles: i32 ones are refused, each where it is.
#[fused_kernel]
fn k(a: *const i32, b: *const i32, c: *mut i32) {
    let rm = arange(0, 32);
    let rk = arange(0, 16);
    let rn = arange(0, 64);
    let x = load(a + rm.expand_dims(1) * 16 + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    store(c + rm.expand_dims(1) * 64 + rn.expand_dims(0), dot(x, y));
}

fn main() {}
