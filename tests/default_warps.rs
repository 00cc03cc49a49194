//! The runtime's default `num_warps` on the example kernels as the macro compiles them: the
//! kernel shapes `fuse_runtime::default_num_warps` reads from the IR (no GPU needed).
mod common;

use common::*;
use fuse::half::f16;

fn warps(spec: &fuse::KernelSpec, consts: &[u64]) -> u32 {
    fuse::default_num_warps(spec.kernel().unwrap(), consts)
}

#[test]
fn axis_reductions_of_2d_tiles_get_16_elements_per_thread() {
    // qk_norm_rope with 8 heads of 128 (HALF = 64): NeoX's widest tile is [8, 64], 1 warp;
    // GPT-J's is [8, 128], 2 warps. (Their launcher takes 2 for both: `qk_norm_rope::DEFAULT_WARPS`.)
    assert_eq!(warps(qk_norm_rope::qk_norm_rope::spec::<f16>(), &[8, 64]), 1);
    assert_eq!(warps(qk_norm_rope::qk_norm_rope_gptj::spec::<f16>(), &[8, 64]), 2);
    // The rows kernels' [ROWS, BLOCK] tiles of 2048 lanes.
    assert_eq!(warps(softmax::softmax_rows::spec::<f32>(), &[16, 128]), 4);
    assert_eq!(warps(softmax::softmax_rows::spec::<f16>(), &[16, 128]), 4);
    assert_eq!(warps(layernorm::layernorm_rows::spec::<f16>(), &[8, 256]), 4);
    assert_eq!(warps(layernorm::layernorm_rows::spec::<f32>(), &[2, 1024]), 4);
}

#[test]
fn one_row_reductions_keep_their_rules() {
    assert_eq!(warps(softmax::softmax::spec::<f32>(), &[1024]), 4);
    assert_eq!(warps(softmax::softmax::spec::<f16>(), &[1024]), 2);
    assert_eq!(warps(layernorm::layernorm::spec::<f16>(), &[4096]), 8);
    assert_eq!(warps(layernorm::layernorm::spec::<f32>(), &[1024]), 4);
    assert_eq!(warps(add_mul::add_mul::spec::<f32>(), &[1024]), 4);
}
