use fuse::fused_kernel;

// f16/bf16 widen to f32 and i8/u8 to i32 before arithmetic; stores round/wrap to the pointee.
#[fused_kernel]
fn k<const BLOCK: usize>(
    a: *const f16,
    b: *const bf16,
    c: *const i8,
    d: *const u8,
    out: *mut f16,
    q: *mut u8,
    n: i32,
) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    let s = load(a + offs, m) + load(b + offs, m) * 0.5;
    let t = load(c + offs, m) + load(d + offs, m);
    store(out + offs, s + t.to(f32), m);
    store(q + offs, t, m);
}

fn main() {}
