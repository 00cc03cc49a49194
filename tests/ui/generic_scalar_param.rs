use fuse::fused_kernel;

// Scalars are i32 i64 u32 u64 f32 for every instantiation: `eps: T` would be an f16 scalar.
#[fused_kernel]
fn k<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, eps: T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n) + eps, offs < n);
}

fn main() {}
