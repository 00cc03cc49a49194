use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32, mode: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask);
    let mut r = v;
    if mode == 0 {
        r = v * 2.0;
    } else if mode == 1 && n > 16 {
        r = exp(v);
    } else if mode != 2 {
        r = zeros(BLOCK);
    } else {
        r = r + 1.0;
    }
    store(out + offs, r, mask);
}

fn main() {}
