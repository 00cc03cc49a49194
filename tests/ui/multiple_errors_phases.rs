use fuse::fused_kernel;

// Mistakes in the signature, in syntax and in types are reported together: the parser keeps going
// after unsupported syntax, and the checker still checks everything around it.
#[fused_kernel]
fn k<const BLOCK: usize>(x: Vec<f32>, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let scale = match n {
        0 => 1.0,
        _ => 2.0,
    };
    let v = load(out + offs, offs < n).exp(1);
    store(out + offs, v * scale + zeros(2 * BLOCK), offs < m);
}

fn main() {}
