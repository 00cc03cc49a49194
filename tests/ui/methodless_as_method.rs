use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(out: *mut i32) {
    let offs = 0.program_id() * BLOCK + arange(0, BLOCK);
    store(out + offs, offs);
}

fn main() {}
