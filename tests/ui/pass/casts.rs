use fuse::fused_kernel;

// Casts both ways, with `.to(T)` and `as T`.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, idx: *mut i32, y: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask);
    let i = v.to(i32);
    let j = (v * 4.0) as i64;
    store(idx + offs, i + j.to(i32), mask);
    let back = offs.to(f32) + i as f32 + (n as u32).to(f32);
    store(y + offs, back + mask.to(f32), mask);
}

fn main() {}
