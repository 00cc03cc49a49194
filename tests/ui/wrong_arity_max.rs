use fuse::fused_kernel;

// `max` reduces one tile; the element-wise maximum of two values is `maximum`.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(x + offs, offs < n);
    store(out + offs, max(v, 0.0), offs < n);
}

fn main() {}
