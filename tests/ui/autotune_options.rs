use fuse::fused_kernel;

// No `configs`, and a misspelt option.
#[fused_kernel(autotune(keys = [n]))]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
