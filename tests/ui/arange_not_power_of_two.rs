use fuse::fused_kernel;

#[fused_kernel]
fn k(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * 100 + arange(0, 100);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
