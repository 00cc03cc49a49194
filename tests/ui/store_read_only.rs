use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *const f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, load(x + offs, mask) * 2.0, mask);
}

fn main() {}
