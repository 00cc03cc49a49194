//! Writes the CUDA source NVRTC compiles for narrow-row kernel variants, every launch-time fact
//! proven (aligned pointers, divisible sizes, in-bounds accesses, all-true masks: what the
//! bench's shapes give), for the tuning sweeps (`rows_sweep.py`, `variants.py`):
//! `cargo run --release --example rows_sources -- DIR PATTERN DTYPE RxB_wW...`, e.g.
//! `-- /tmp/s layernorm f16 8x256_w4 4x256_w1` writes `DIR/layernorm_float16_8x256_w4.cu`, ...
//! (PATTERN: softmax or layernorm; DTYPE: f32, f16 or bf16; W a power of two up to 32.) The
//! facts hold for a launch only where the row is the tile's width (`B == cols`) and `R` divides
//! the rows, as at the bench's 65536x128 and 16384x256.
// Both kernel files include rows_tile.rs.
#![allow(clippy::duplicate_mod)]
#[path = "../../../examples/kernels/layernorm.rs"]
#[allow(dead_code)]
mod layernorm;
#[path = "../../../examples/kernels/softmax.rs"]
#[allow(dead_code)]
mod softmax;

use fuse::half::{bf16, f16};
use fuse::KernelSpec;

fn spec(pattern: &str, dtype: &str) -> Option<&'static KernelSpec> {
    Some(match (pattern, dtype) {
        ("layernorm", "f32") => layernorm::layernorm_rows::spec::<f32>(),
        ("layernorm", "f16") => layernorm::layernorm_rows::spec::<f16>(),
        ("layernorm", "bf16") => layernorm::layernorm_rows::spec::<bf16>(),
        ("softmax", "f32") => softmax::softmax_rows::spec::<f32>(),
        ("softmax", "f16") => softmax::softmax_rows::spec::<f16>(),
        ("softmax", "bf16") => softmax::softmax_rows::spec::<bf16>(),
        _ => return None,
    })
}

/// `RxB_wW` as (R, B, W).
fn tile(s: &str) -> Option<(u64, u64, u32)> {
    let (rb, w) = s.split_once("_w")?;
    let (r, b) = rb.split_once('x')?;
    let w: u32 = w.parse().ok()?;
    (w.is_power_of_two() && w <= 32).then_some(())?;
    Some((r.parse().ok()?, b.parse().ok()?, w))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: rows_sources DIR (softmax|layernorm) (f32|f16|bf16) RxB_wW...";
    let [dir, pattern, dtype, tiles @ ..] = args.as_slice() else { return Err(usage.into()) };
    if tiles.is_empty() {
        return Err(usage.into());
    }
    let spec = spec(pattern, dtype).ok_or(usage)?;
    let torch_name = match dtype.as_str() {
        "f32" => "float32",
        "f16" => "float16",
        _ => "bfloat16",
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    for t in tiles {
        let (r, b, w) = tile(t).ok_or_else(|| format!("{t}: not RxB_wW; {usage}"))?;
        let proven = vec![true; spec.specializations().len()];
        let path = format!("{dir}/{pattern}_{torch_name}_{t}.cu");
        std::fs::write(&path, spec.full_source(&[r, b], w, &proven)).map_err(|e| format!("{path}: {e}"))?;
        println!("{path}");
    }
    Ok(())
}
