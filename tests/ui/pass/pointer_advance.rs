use fuse::fused_kernel;

// Pointers bound with `let mut` can be advanced in a loop.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, rows: i32, stride: i32) {
    let cols = arange(0, BLOCK);
    let mut src = x + program_id(0) * BLOCK;
    let mut dst = out + program_id(0) * BLOCK;
    for _ in 0..rows {
        store(dst + cols, load(src + cols) + 1.0);
        src += stride;
        dst = dst + stride;
    }
}

fn main() {}
