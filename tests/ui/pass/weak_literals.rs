use fuse::fused_kernel;

// Literals and const generics take the other operand's type; infinities; unsigned and 64-bit math.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const u64, out: *mut u64, y: *mut f32, n: i64) {
    let offs = program_id(0).to(i64) * BLOCK + arange(0, BLOCK).to(i64);
    let mask = offs < n;
    let v = load(x + offs, mask);
    store(out + offs, v * 3 + BLOCK, mask);
    let m = maximum(load(y + offs, mask), -f32::INFINITY);
    store(y + offs, minimum(m, f32::INFINITY) * 0.5, mask);
}

fn main() {}
