use fuse::fused_kernel;

// 2-D and 3-D program ids and grid sizes.
#[fused_kernel]
fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, stride_y: i32, stride_z: i32, n: i32) {
    let base = program_id(2) * stride_z + program_id(1) * stride_y;
    let offs = base + program_id(0) * BLOCK + arange(0, BLOCK);
    let total = num_programs(0) * num_programs(1) * num_programs(2);
    store(out + offs, load(x + offs, offs < n) + total.to(f32), offs < n);
}

fn main() {}
