use fuse::fused_kernel;

// `cdiv`, `full`, constant tile lengths like `2 * BLOCK`, and a loop stepping by a const generic.
#[fused_kernel]
fn k<const BLOCK: usize>(out: *mut i32, n: i32) {
    let tiles = cdiv(n, 2 * BLOCK);
    for t in (0..tiles).step_by(2) {
        let offs = t * (2 * BLOCK) + arange(0, 2 * BLOCK);
        store(out + offs, full(2 * BLOCK, t) + cdiv(offs, 4), offs < n);
    }
}

fn main() {}
