//! Host time per kernel: ten small launches queued directly against the same ten captured in a
//! CUDA graph and replayed with one `Graph::launch`. Prints a table; with `FUSE_BENCH_JSON` set,
//! appends one JSON row per measurement (`pattern`, `shape`, `impl`, `us_per_kernel`, `device`).
//!
//! `cargo bench --bench graphs` (needs a GPU; says so and exits 0 without one).
#[allow(dead_code)]
use fuse_kernels::add_mul as add_mul_kernels;
#[allow(dead_code)]
use fuse_testkit::bench::host_time;

use add_mul_kernels::add_mul;
use fuse::{Device, Result};
use std::io::Write;

const KERNELS: usize = 10;

fn main() -> Result<()> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("graphs bench: needs a CUDA GPU ({e}); nothing measured");
            return Ok(());
        }
    };
    let mut rows = Vec::new();
    for n in [4096usize, 1 << 16] {
        let x = dev.upload(&vec![1.0f32; n])?;
        let mut direct_out = dev.zeros::<f32>(n)?;
        let mut graph_out = dev.zeros::<f32>(n)?;
        let grid = n.div_ceil(1024) as u32;
        let mut direct = || -> Result<()> {
            for _ in 0..KERNELS {
                add_mul::launch::<f32, 1024>(&dev, grid, &x, &x, &x, &mut direct_out, n as i32)?;
            }
            Ok(())
        };
        direct()?; // compiles and loads the kernel before the capture
        let graph = dev.capture(|| {
            for _ in 0..KERNELS {
                add_mul::launch::<f32, 1024>(&dev, grid, &x, &x, &x, &mut graph_out, n as i32)?;
            }
            Ok(())
        })?;
        graph.launch()?;
        dev.synchronize()?;
        // Host time, on an idle stream each batch (see host_time): 20 batches of 10 kernels.
        let direct_us =
            host_time::host_us_per_launch(50, 20, &mut direct, &mut || dev.synchronize())? / KERNELS as f64;
        let graph_us =
            host_time::host_us_per_launch(50, 20, &mut || graph.launch(), &mut || dev.synchronize())?
                / KERNELS as f64;
        // Device time of the ten kernels, both ways (median of event-timed runs).
        let direct_ms = dev.median_ms(200, || Ok(()), &mut direct)?;
        let graph_ms = dev.median_ms(200, || Ok(()), || graph.launch())?;
        let shape = format!("{KERNELS} x add_mul n={n}");
        rows.push((shape.clone(), "fuse direct", direct_us, direct_ms));
        rows.push((shape, "fuse graph", graph_us, graph_ms));
    }
    println!("device: {}", dev.description());
    println!("{:<26} {:<12} {:>18} {:>22}", "launches", "how", "host us / kernel", "device us / 10 kernels");
    for (shape, how, us, ms) in &rows {
        println!("{shape:<26} {how:<12} {us:>18.3} {:>22.2}", ms * 1e3);
    }
    if let Ok(path) = std::env::var("FUSE_BENCH_JSON") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| fuse::Error::InvalidArgument(format!("opening {path}: {e}")))?;
        for (shape, how, us, ms) in &rows {
            let line = format!(
                "{{\"pattern\": \"launch\", \"shape\": \"{shape}\", \"impl\": \"{how}\", \"us_per_kernel\": {us:.4}, \"device_us\": {:.3}, \"device\": \"{}\"}}\n",
                ms * 1e3,
                dev.description()
            );
            f.write_all(line.as_bytes())
                .map_err(|e| fuse::Error::InvalidArgument(format!("writing {path}: {e}")))?;
        }
    }
    Ok(())
}
