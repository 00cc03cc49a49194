use fuse::fused_kernel;

// The bound goes where the parameter is declared; the clause is the one mistake.
#[fused_kernel]
fn k<T, const BLOCK: usize>(x: *const T, out: *mut T, n: i32)
where
    T: Float,
{
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs, offs < n), offs < n);
}

fn main() {}
