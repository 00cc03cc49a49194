use fuse::fused_kernel;

#[fused_kernel]
struct Kernel {
    block: usize,
}

fn main() {
    let k = Kernel { block: 128 };
    assert_eq!(k.block, 128);
}
