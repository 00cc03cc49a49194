use fuse::fused_kernel;

// `acc` holds T values: for T = f16 or bf16 an f32 value does not fit it without `.to(T)`. The
// error is reported for those instantiations only, each with a note naming it.
#[fused_kernel]
fn k<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mut acc = load(x + offs, offs < n);
    acc = acc * 2.0;
    store(out + offs, acc, offs < n);
}

fn main() {}
