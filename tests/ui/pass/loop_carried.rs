use fuse::fused_kernel;

// `let mut` tiles and scalars carried through loops, including over `step_by`.
#[fused_kernel]
pub fn row_sum<const BLOCK: usize>(x: *const f32, out: *mut f32, stride: i32, n_cols: i32) {
    let row = program_id(0);
    let mut acc = zeros(BLOCK);
    let mut count = 0;
    for start in (0..n_cols).step_by(BLOCK) {
        let cols = start + arange(0, BLOCK);
        acc += load(x + row * stride + cols, cols < n_cols, 0.0);
        count += 1;
    }
    let mut total = sum(acc);
    total = total / count as f32;
    store(out + row, total);
}

fn main() {}
