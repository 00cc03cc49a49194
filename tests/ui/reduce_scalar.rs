use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(x + offs, offs < n);
    let total = sum(v);
    store(out + program_id(0), total.sum());
}

fn main() {}
