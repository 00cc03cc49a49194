//! The roofline of one bench run: every fused kernel's achieved bandwidth and FLOP rate against
//! the ceilings measured in the same run (a device-to-device copy's bandwidth, an FMA peak and a
//! tensor-core `mma.sync` peak), as an SVG plot and a Markdown table of each kernel's share of
//! its ceiling.
//!
//! The model: a kernel of arithmetic intensity `I` (FLOPs per compulsory byte, from
//! `KernelSpec::cost`) can reach at most `min(copy_bandwidth * I, peak)` FLOP/s, where `peak` is
//! the tensor-core peak for a kernel whose FLOPs are mostly `dot` and the FMA peak otherwise (one
//! FMA counts 2 FLOPs). Its *share* is its achieved FLOP/s over that bound; for a memory-bound
//! kernel that is its achieved bandwidth over the copy's. A kernel with no FLOPs (a copy) has no
//! place on the log-log plot; its share is bandwidth over the copy's.
//!
//! SVG only (plotters' SVG backend with its built-in font metrics): no system fonts or libraries,
//! so the plot is drawn anywhere the benches build, CI included.
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// The ceilings, measured in the run whose kernels are plotted.
#[derive(Clone, Debug, PartialEq)]
pub struct Ceilings {
    /// The device, as the bench names it (`NVIDIA H100 80GB HBM3 (sm_90)`).
    pub device: String,
    /// The date of the run (`2026-11-24`).
    pub date: String,
    /// Device-to-device copy bandwidth, GB/s (bytes read + written per second).
    pub copy_gbs: f64,
    /// FP32 FMA peak, TFLOP/s (an FMA is 2 FLOPs).
    pub fma_tflops: f64,
    /// Tensor-core peak (`mma.sync` f16 → f32), TFLOP/s.
    pub mma_tflops: f64,
}

/// One kernel at one shape: what it achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// `pattern shape dtype impl`.
    pub label: String,
    /// Achieved compulsory bandwidth, GB/s.
    pub gbs: f64,
    /// Achieved TFLOP/s (the cost model's FLOPs over the time).
    pub tflops: f64,
    /// Whether its FLOPs are mostly `dot` (the tensor-core roof applies).
    pub tensor: bool,
}

impl Point {
    /// FLOPs per byte (0 for a kernel that moves no bytes).
    pub fn intensity(&self) -> f64 {
        if self.gbs > 0.0 {
            self.tflops * 1e3 / self.gbs
        } else {
            0.0
        }
    }
}

/// Which ceiling bounds a kernel, and how close it comes.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// `memory`, `fma` or `tensor`: the lower of the two roofs at the kernel's intensity.
    pub bound: &'static str,
    /// The roof at that intensity, TFLOP/s (for `memory` with no FLOPs: 0).
    pub roof_tflops: f64,
    /// Achieved over the roof (bandwidth over the copy's where there are no FLOPs).
    pub share: f64,
}

/// The roof a point sits under, and its share of it.
pub fn share(c: &Ceilings, p: &Point) -> Share {
    let peak = if p.tensor { c.mma_tflops } else { c.fma_tflops };
    let i = p.intensity();
    if i <= 0.0 || p.tflops <= 0.0 {
        return Share { bound: "memory", roof_tflops: 0.0, share: p.gbs / c.copy_gbs };
    }
    let mem = c.copy_gbs * i / 1e3;
    if mem < peak {
        Share { bound: "memory", roof_tflops: mem, share: p.tflops / mem }
    } else {
        Share { bound: if p.tensor { "tensor" } else { "fma" }, roof_tflops: peak, share: p.tflops / peak }
    }
}

/// The Markdown table: the ceilings, then one row per point with its share.
pub fn table(c: &Ceilings, points: &[Point]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Roofline ceilings on {} ({}), measured in this run: copy {:.0} GB/s, FP32 FMA {:.1} TFLOP/s, mma.sync f16 {:.1} TFLOP/s (ridge points {:.1} and {:.1} FLOP/B).\n", c.device, c.date, c.copy_gbs, c.fma_tflops, c.mma_tflops, c.fma_tflops * 1e3 / c.copy_gbs, c.mma_tflops * 1e3 / c.copy_gbs);
    let _ = writeln!(s, "| kernel | GB/s | TFLOP/s | FLOP/B | bound | roof TFLOP/s | share of roof |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|---:|---:|");
    for p in points {
        let sh = share(c, p);
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.3} | {:.3} | {} | {:.3} | {:.0} % |",
            p.label,
            p.gbs,
            p.tflops,
            p.intensity(),
            sh.bound,
            sh.roof_tflops,
            100.0 * sh.share
        );
    }
    s
}

/// Writes the roofline plot as SVG: log-log FLOP/B against TFLOP/s, the memory roof up to each
/// peak, both peaks, and every point with FLOPs (labelled with its index in `points`, which the
/// legend under the plot names).
pub fn write_svg(path: &Path, c: &Ceilings, points: &[Point]) -> Result<(), String> {
    let plotted: Vec<(usize, &Point)> =
        points.iter().enumerate().filter(|(_, p)| p.intensity() > 0.0 && p.tflops > 0.0).collect();
    let (mut xmin, mut xmax) = (0.01f64, 1e3f64);
    let (mut ymin, ymax) = (0.01f64, c.mma_tflops.max(c.fma_tflops) * 3.0);
    for (_, p) in &plotted {
        xmin = xmin.min(p.intensity() / 3.0);
        xmax = xmax.max(p.intensity() * 3.0);
        ymin = ymin.min(p.tflops / 3.0);
    }
    let legend_lines = plotted.len().div_ceil(2);
    let height = 620 + 18 * legend_lines as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (plot_area, legend) = root.split_vertically(600);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(format!("fuse roofline: {} ({})", c.device, c.date), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP / compulsory byte)")
        .y_desc("TFLOP/s")
        .draw()
        .map_err(|x| e(&x))?;
    // The roofs: bandwidth x intensity up to each peak, then flat.
    for (peak, name, color) in [(c.fma_tflops, "FP32 FMA", BLUE), (c.mma_tflops, "mma.sync f16", RED)] {
        let ridge = peak * 1e3 / c.copy_gbs;
        let mut line = vec![(xmin, c.copy_gbs * xmin / 1e3)];
        if ridge > xmin && ridge < xmax {
            line.push((ridge, peak));
        }
        line.push((xmax, (c.copy_gbs * xmax / 1e3).min(peak)));
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(format!("{name} {peak:.1} TFLOP/s; copy {:.0} GB/s", c.copy_gbs))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .draw_series(plotted.iter().map(|(i, p)| {
            let color = if p.tensor { RED } else { BLACK };
            EmptyElement::at((p.intensity(), p.tflops))
                + Circle::new((0, 0), 4, color.filled())
                + Text::new(format!("{i}"), (6, -12), ("sans-serif", 12))
        }))
        .map_err(|x| e(&x))?;
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|x| e(&x))?;
    for (n, (i, p)) in plotted.iter().enumerate() {
        let sh = share(c, p);
        let (col, row) = ((n % 2) as i32, (n / 2) as i32);
        legend
            .draw(&Text::new(
                format!(
                    "{i}: {} — {:.0} GB/s, {:.3} TFLOP/s, {:.0} % of {} roof",
                    p.label,
                    p.gbs,
                    p.tflops,
                    100.0 * sh.share,
                    sh.bound
                ),
                (10 + 495 * col, 4 + 18 * row),
                ("sans-serif", 12),
            ))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Writes `<stem>.roofline.svg` and `<stem>.roofline.md` beside `json_path` (the bench's JSON)
/// and returns their paths.
pub fn write_beside(json_path: &Path, c: &Ceilings, points: &[Point]) -> Result<(String, String), String> {
    let stem = json_path.with_extension("");
    let svg = format!("{}.roofline.svg", stem.display());
    let md = format!("{}.roofline.md", stem.display());
    write_svg(Path::new(&svg), c, points)?;
    std::fs::write(&md, table(c, points)).map_err(|e| format!("{md}: {e}"))?;
    Ok((svg, md))
}

#[cfg(test)]
mod tests_support {
    use super::*;

    pub fn ceilings() -> Ceilings {
        Ceilings {
            device: "Test GPU (sm_90)".into(),
            date: "2026-11-24".into(),
            copy_gbs: 3000.0,
            fma_tflops: 50.0,
            mma_tflops: 600.0,
        }
    }

    pub fn points() -> Vec<Point> {
        vec![
            // memory-bound: 0.5 FLOP/B at 2700 GB/s = 1.35 TFLOP/s, roof 1.5: 90 %
            Point { label: "add_mul 1048576 float32 fuse".into(), gbs: 2700.0, tflops: 1.35, tensor: false },
            // compute-bound on tensor cores: 200 FLOP/B, roof 600, at 300: 50 %
            Point { label: "matmul 4096 float16 fuse".into(), gbs: 1500.0, tflops: 300.0, tensor: true },
            // FMA-bound: 100 FLOP/B (roof min(300, 50) = 50), at 25: 50 %
            Point { label: "fma heavy".into(), gbs: 250.0, tflops: 25.0, tensor: false },
            // no FLOPs: share is bandwidth over copy
            Point { label: "copy".into(), gbs: 2400.0, tflops: 0.0, tensor: false },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn shares_follow_the_lower_roof() {
        let c = ceilings();
        let p = points();
        let s: Vec<Share> = p.iter().map(|p| share(&c, p)).collect();
        assert_eq!(s[0].bound, "memory");
        assert!((s[0].roof_tflops - 1.5).abs() < 1e-9 && (s[0].share - 0.9).abs() < 1e-9, "{:?}", s[0]);
        assert_eq!(s[1].bound, "tensor");
        assert!((s[1].share - 0.5).abs() < 1e-9);
        assert_eq!(s[2].bound, "fma");
        assert!((s[2].share - 0.5).abs() < 1e-9);
        assert_eq!(s[3].bound, "memory");
        assert!((s[3].share - 0.8).abs() < 1e-9);
        // A memory-bound share equals bandwidth over the copy's.
        assert!((s[0].share - p[0].gbs / c.copy_gbs).abs() < 1e-9);
    }

    #[test]
    fn table_lists_every_kernel_with_its_share() {
        let t = table(&ceilings(), &points());
        assert!(t.contains("copy 3000 GB/s, FP32 FMA 50.0 TFLOP/s, mma.sync f16 600.0 TFLOP/s"), "{t}");
        assert!(
            t.contains("| add_mul 1048576 float32 fuse | 2700 | 1.350 | 0.500 | memory | 1.500 | 90 % |"),
            "{t}"
        );
        assert!(
            t.contains("| matmul 4096 float16 fuse | 1500 | 300.000 | 200.000 | tensor | 600.000 | 50 % |"),
            "{t}"
        );
        assert!(t.contains("| copy | 2400 | 0.000 | 0.000 | memory | 0.000 | 80 % |"), "{t}");
        assert_eq!(t.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| kernel")).count(), 4);
    }

    #[test]
    fn svg_has_the_roofs_and_every_point() {
        let dir = std::env::temp_dir().join(format!("fuse-roofline-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("bench.json");
        let (svg, md) = write_beside(&json, &ceilings(), &points()).unwrap();
        assert!(svg.ends_with("bench.roofline.svg") && md.ends_with("bench.roofline.md"));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..100.min(text.len())]);
        assert!(text.contains("fuse roofline: Test GPU (sm_90) (2026-11-24)"));
        assert!(text.contains("FP32 FMA 50.0 TFLOP/s") && text.contains("mma.sync f16 600.0 TFLOP/s"));
        // Three points with FLOPs: three filled circles and their legend lines; the copy is not plotted.
        assert_eq!(text.matches("<circle").count(), 3, "{text}");
        assert!(text.contains("0: add_mul 1048576 float32 fuse"));
        assert!(text.contains("1: matmul 4096 float16 fuse"));
        assert!(text.contains("2: fma heavy"));
        assert!(!text.contains(": copy"));
        assert!(std::fs::read_to_string(&md).unwrap().contains("| fma heavy |"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod sample {
    /// `FUSE_ROOFLINE_SAMPLE=dir cargo test -p fuse-roofline sample` writes a sample plot there.
    #[test]
    fn sample() {
        let Ok(dir) = std::env::var("FUSE_ROOFLINE_SAMPLE") else { return };
        let c = super::tests_support::ceilings();
        super::write_beside(
            &std::path::Path::new(&dir).join("sample.json"),
            &c,
            &super::tests_support::points(),
        )
        .unwrap();
    }
}
