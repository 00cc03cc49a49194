use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, n: i32) -> f32 {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    sum(load(x + offs, offs < n))
}

fn main() {}
