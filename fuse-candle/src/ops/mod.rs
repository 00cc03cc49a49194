//! Ready-made candle ops over fuse-kernels' kernels, each a candle `CustomOp` whose `cpu_fwd` runs
//! on fuse's CPU interpreter and whose `cuda_fwd` (feature `cuda`) launches on candle's stream.

mod layer_norm;

pub use layer_norm::{FusedLayerNorm, MAX_COLS};
