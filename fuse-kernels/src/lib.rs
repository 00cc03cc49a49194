//! Fused kernels written in fuse's tile language, each module one family with its kernels and a
//! launch function that picks the tile for the shape it is given.
//!
//! | module | what |
//! |---|---|
//! | [`add_mul`] | `(x + y) * z`, element-wise |
//! | [`add_activation`] | residual add + GELU / SiLU, the residual updated in place |
//! | [`add_rmsnorm`] | residual add + RMSNorm (vLLM's `fused_add_rms_norm`) |
//! | [`bias_gelu_dropout`] | `dropout(gelu(x + bias))` with Philox dropout |
//! | [`layernorm`] | LayerNorm forward: one row per program, wide rows, several narrow rows per program |
//! | [`layernorm_quant`] | LayerNorm + dynamic per-row int8 quantisation |
//! | [`l2norm`] | row-wise L2 normalisation |
//! | [`softmax`] | row-wise softmax, one or several rows per program |
//! | [`silu_and_mul`] | the gated MLP activation `silu(a) * b` |
//! | [`cross_entropy`] | softmax cross-entropy per row over a vocabulary wider than a tile |
//! | [`qk_norm_rope`] | QK-norm + rotary embedding in place (NeoX and GPT-J) |
//! | [`matmul`] | tensor-core matmul with an optional bias + GELU epilogue |
//! | [`matmul_int8`] | int8 x int8 matmul with dequantisation and requantisation |
//! | [`ffn_sublayer`] | `x + gelu(LayerNorm(x) @ W + b)` in one kernel |
//! | [`attention`] | FlashAttention-2 forward: causal, grouped-query heads, dropout, log-sum-exp |
//!
//! Every kernel runs on the GPU through NVRTC or, with no GPU, on fuse's CPU interpreter; the
//! examples and tests of the `fuse` repository check each against a float64 reference.

#[macro_use]
mod rows_tile;

pub mod add_activation;
pub mod add_mul;
pub mod add_rmsnorm;
pub mod attention;
pub mod bias_gelu_dropout;
pub mod cross_entropy;
pub mod ffn_sublayer;
pub mod l2norm;
pub mod layernorm;
pub mod layernorm_quant;
pub mod matmul;
pub mod matmul_int8;
pub mod qk_norm_rope;
pub mod silu_and_mul;
pub mod softmax;
