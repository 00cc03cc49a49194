use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, rand16(offs, offs), offs < n);
}

fn main() {}
