use fuse::fused_kernel;

// `rand` with i32 and u64 seeds (and a literal one).
#[fused_kernel]
fn k<const BLOCK: usize>(out: *mut f32, seed32: i32, seed64: u64, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let r = rand(seed32, offs) + rand(seed64, offs) + rand(42, offs);
    store(out + offs, r / 3.0, offs < n);
}

fn main() {}
