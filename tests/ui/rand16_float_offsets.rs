use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(out: *mut f32, seed: u64, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let x = offs.to(f32) * 0.5;
    store(out + offs, rand16(seed, x), offs < n);
}

fn main() {}
