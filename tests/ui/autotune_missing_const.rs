use fuse::fused_kernel;

#[fused_kernel(autotune(configs = [(ROWS = 4, COLS = 64), (ROWS = 8, num_warps = 4)]))]
fn k<const ROWS: usize, const COLS: usize>(x: *const f32, out: *mut f32) {
    let offs = (program_id(0) * ROWS + arange(0, ROWS)).expand_dims(1) * COLS + arange(0, COLS).expand_dims(0);
    store(out + offs, load(x + offs));
}

fn main() {}
