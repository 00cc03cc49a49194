use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let acc = zeros(BLOCK);
    for i in 0..4 {
        acc += load(x + i * n + offs, offs < n);
    }
    store(out + offs, acc, offs < n);
}

fn main() {}
