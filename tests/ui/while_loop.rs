use fuse::fused_kernel;

#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
    let mut start = 0;
    while start < n {
        let offs = start + arange(0, BLOCK);
        store(out + offs, load(x + offs, offs < n), offs < n);
        start += BLOCK;
    }
}

fn main() {}
