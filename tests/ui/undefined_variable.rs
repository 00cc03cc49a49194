use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offsets = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offsets < n;
    store(out + offsets, load(x + offset, mask), mask);
}

fn main() {}
