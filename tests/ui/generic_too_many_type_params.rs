use fuse::fused_kernel;

// Each combination of the type parameters' element types is compiled: at most three parameters.
#[fused_kernel]
fn k<A: Float, B: Float, C: Half, D: Half, const BLOCK: usize>(a: *const A, b: *const B, c: *const C, d: *mut D) {
    let offs = arange(0, BLOCK);
    store(d + offs, load(a + offs) + load(b + offs) + load(c + offs));
}

fn main() {}
