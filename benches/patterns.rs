//! Criterion benches of the four seed patterns on `Device::best()` (the GPU, else the CPU
//! interpreter), with throughput in compulsory bytes. On the CPU: add_mul over 16M f32 and
//! LayerNorm 4096x1024 f32. `cargo bench --bench patterns`.
//! (The side-by-side comparison with Triton is `benches/anchors.rs`.)
#![allow(dead_code)] // the kernel files also hold float64 references

use fuse_kernels::add_mul;
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::layernorm;
use fuse_kernels::softmax;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fuse::Device;

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect()
}

fn patterns(c: &mut Criterion) {
    let (dev, why) = Device::best();
    println!("device: {}{}", dev.description(), why.map(|w| format!(" (no GPU: {w})")).unwrap_or_default());
    let mut g = c.benchmark_group(if dev.is_cuda() { "gpu" } else { "cpu" });
    g.sample_size(10);

    let n = 16 << 20;
    let x = dev.upload(&data(n)).unwrap();
    let mut out = dev.zeros::<f32>(n).unwrap();
    g.throughput(Throughput::Bytes((16 * n) as u64));
    g.bench_function("add_mul 16M f32", |b| {
        b.iter(|| {
            add_mul::add_mul::launch::<f32, 1024>(&dev, (n / 1024) as u32, &x, &x, &x, &mut out, n as i32)
                .unwrap();
            dev.synchronize().unwrap();
        })
    });

    let (rows, cols) = (4096usize, 1024usize);
    let w = dev.upload(&data(cols)).unwrap();
    let xs = dev.upload(&data(rows * cols)).unwrap();
    let mut y = dev.zeros::<f32>(rows * cols).unwrap();
    g.throughput(Throughput::Bytes((4 * (2 * rows * cols + 2 * cols)) as u64));
    g.bench_function("layernorm 4096x1024 f32", |b| {
        b.iter(|| {
            layernorm::layernorm::launch::<f32, 1024>(
                &dev,
                rows as u32,
                &xs,
                &mut y,
                &w,
                &w,
                cols as i32,
                cols as i32,
                1e-5,
            )
            .unwrap();
            dev.synchronize().unwrap();
        })
    });
    g.throughput(Throughput::Bytes((8 * rows * cols) as u64));
    g.bench_function("softmax 4096x1024 f32", |b| {
        b.iter(|| {
            softmax::softmax::launch::<f32, 1024>(
                &dev,
                rows as u32,
                &mut y,
                &xs,
                cols as i32,
                cols as i32,
                cols as i32,
            )
            .unwrap();
            dev.synchronize().unwrap();
        })
    });
    g.throughput(Throughput::Bytes((4 * (2 * rows * cols + cols)) as u64));
    g.bench_function("bias_gelu_dropout 4096x1024 f32", |b| {
        b.iter(|| {
            let n = rows * cols;
            bias_gelu_dropout::bias_gelu_dropout::launch::<f32, 1024>(
                &dev,
                (n / 1024) as u32,
                &xs,
                &w,
                &mut y,
                7,
                0.1,
                n as i32,
                cols as i32,
            )
            .unwrap();
            dev.synchronize().unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, patterns);
criterion_main!(benches);
