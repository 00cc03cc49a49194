//! Kernel cache timings on the GPU: a cold compile (empty disk cache, new process), the
//! first launch in a new process with a warm disk cache, and an in-memory hit plus launch (host
//! time per launch). Each "new process" is this binary re-run as a child with an empty or warm
//! `FUSE_CACHE_DIR`; context creation is timed apart and not counted in the launch numbers.
//!
//! `cargo bench --bench cache` (needs a GPU; prints why it skips otherwise).
use fuse::{fused_kernel, Device};
use std::time::Instant;

use fuse_testkit::bench::host_time;

#[fused_kernel]
fn scale_add<const BLOCK: usize>(x: *const f32, out: *mut f32, a: f32, n: i32) {
    let o = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + o, load(x + o, o < n) * a + 1.0, o < n);
}

const ROLE: &str = "FUSE_CACHE_BENCH_CHILD";

/// In the child: ms from "ready to launch" (device, buffers) to the first launch's completion.
fn first_launch_ms() -> Result<(f64, f64), fuse::Error> {
    let t = Instant::now();
    let dev = Device::cuda(0)?;
    let x = dev.upload(&vec![1.0f32; 4096])?;
    let mut out = dev.zeros::<f32>(4096)?;
    dev.synchronize()?;
    let setup_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    scale_add::launch::<1024>(&dev, 4, &x, &mut out, 2.0, 4096)?;
    dev.synchronize()?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(out.to_vec()?.iter().all(|&v| v == 3.0), "wrong result");
    Ok((setup_ms, first_ms))
}

fn child(dir: &std::path::Path) -> Result<(f64, f64), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .env(ROLE, "1")
        .env("FUSE_CACHE_DIR", dir)
        .env_remove("FUSE_CACHE")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("child:"))
        .ok_or_else(|| format!("child failed: {text} {}", String::from_utf8_lossy(&out.stderr)))?;
    let mut it = line.split_whitespace().skip(1).map(|v| v.parse::<f64>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) => Ok((a, b)),
        _ => Err(format!("unparsable child output: {line}")),
    }
}

fn main() {
    if std::env::var_os(ROLE).is_some() {
        match first_launch_ms() {
            Ok((setup, first)) => println!("child: {setup:.3} {first:.3}"),
            Err(e) => println!("child error: {e}"),
        }
        return;
    }
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("cache bench: skipped: needs a GPU ({e})");
            return;
        }
    };
    println!("device: {}", dev.description());
    let dir = std::env::temp_dir().join(format!("fuse-cache-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = |what: &str, r: Result<(f64, f64), String>| match r {
        Ok((setup, first)) => {
            println!("{what:<44} {first:>9.3} ms   (context + buffers before it: {setup:.1} ms)")
        }
        Err(e) => println!("{what}: ERROR {e}"),
    };
    report("cold: new process, empty disk cache", child(&dir));
    for i in 1..=3 {
        report(&format!("warm disk cache: new process, run {i}"), child(&dir));
    }
    // In-memory hit: this process, after a first launch.
    let run = || -> Result<(), fuse::Error> {
        let x = dev.upload(&vec![1.0f32; 4096])?;
        let mut out = dev.zeros::<f32>(4096)?;
        scale_add::launch::<1024>(&dev, 4, &x, &mut out, 2.0, 4096)?;
        let mut launch = || scale_add::launch::<1024>(&dev, 4, &x, &mut out, 2.0, 4096);
        let us = host_time::host_us_per_launch(100, 200, &mut launch, &mut || dev.synchronize())?;
        println!(
            "{:<44} {us:>9.3} us per launch (host time; median of 100 batches of 200 on an idle stream)",
            "in-memory hit + launch"
        );
        match host_time::raw_launch_us() {
            Ok(r) => println!(
                "{:<44} {:>9.3} us (empty kernel), {:.3} us (ten 8-byte parameters); ten without binding the context {:.3} us, on the per-thread stream {:.3} us, on a stream of its own {:.3} us",
                "driver floor: raw cuLaunchKernel, same method", r.empty, r.ten, r.ten_unbound, r.ten_per_thread, r.ten_own_stream
            ),
            Err(e) => println!("driver floor: not measured ({e})"),
        }
        Ok(())
    };
    if let Err(e) = run() {
        println!("in-memory: ERROR {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
