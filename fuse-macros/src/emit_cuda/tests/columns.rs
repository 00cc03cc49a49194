//! Axis-0 reductions and argmax/argmin as folds across threads: which layout each result takes,
//! the shape of the emitted folds (shuffles outside conditionals, the serial form only for warp
//! counts the fast form cannot take), and NVRTC compiles over tile shapes, warp counts, element
//! types and both architectures. (tests/emulated_cuda.rs runs the emitted code.)
use super::super::analysis::{layout::Layout, slices};
use super::super::emit_cuda;
use super::nvrtc::{compile, numbered, require_nvrtc};
use crate::tests::{ok, var_id};
use fuse_ir::{Kernel, Specialization};

/// Every axis-0 reduction and arg-reduction of a `[R, C]` tile of `T`, stored at once, broadcast
/// back and broadcast to a taller tile.
fn cols_kernel(t: &str) -> Kernel {
    let one = if t == "i32" { "1" } else { "1.0" };
    ok(&format!(
        "fn cols<const R: usize, const C: usize>(x: *const {t}, red: *mut {t}, arg: *mut i32, back: *mut {t}, tall: *mut {t}) {{
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r.expand_dims(1) * C + c.expand_dims(0);
    let v = load(x + program_id(0) * (R * C) + offs);
    let o = arange(0, C);
    let stored_sum = v.sum(0);
    store(red + o, stored_sum);
    store(red + C + o, v.max(0));
    store(red + 2 * C + o, v.min(0));
    let q = arange(0, R);
    let stored_arg0 = v.argmax(0);
    store(arg + o, stored_arg0);
    store(arg + C + o, v.argmin(0));
    let stored_arg1 = v.argmax(1);
    store(arg + 2 * C + q, stored_arg1);
    store(arg + 2 * C + R + q, v.argmin(1));
    store(arg + 2 * C + 2 * R + program_id(0), argmax(v) + argmin(v));
    let back_max = v.max(0);
    let back_sum = v.sum(0);
    let back_arg0 = v.argmax(0);
    let back_arg1 = v.argmin(1);
    let h = (back_arg0.expand_dims(0) == r.expand_dims(1)) & (back_arg1.expand_dims(1) == c.expand_dims(0));
    store(back + offs, v - back_max.expand_dims(0) + back_sum.expand_dims(0) + where_(h, {one}, 0));
    let t2 = arange(0, 2 * R);
    let c2 = arange(0, C);
    let tall_min = v.min(0);
    store(tall + t2.expand_dims(1) * C + c2.expand_dims(0), full([2 * R, C], {one}) + tall_min.expand_dims(0));
}}"
    ))
}

/// Literal unit axes: `[N, 1]` and `[1, N]` by reshape.
fn units_kernel() -> Kernel {
    ok("fn units<const R: usize, const C: usize>(x: *const f32, out: *mut f32, idx: *mut i32) {
    let n = arange(0, R * C);
    let v = load(x + program_id(0) * (R * C) + n);
    let col = reshape(v, [R * C, 1]);
    let row = reshape(v, [1, R * C]);
    let one = arange(0, 1);
    store(out + one, col.sum(0) + col.max(0) + col.min(0));
    store(out + 1 + n, row.max(0) + row.sum(0));
    store(idx + one, col.argmax(0) + row.argmin(1));
    store(idx + 1 + n, col.argmax(1) + row.argmin(0));
}")
}

/// The layout index of `name`.
fn layout_index(k: &Kernel, name: &str) -> usize {
    let mut layout = Layout::new(k);
    slices::assign(k, &mut layout)[var_id(k, name).0 as usize].expect("a tile")
}

/// The layout `name` (assigned once) ends in: `Some(true)` a column layout, `Some(false)` a row
/// layout, `None` its length's.
fn layout_of(k: &Kernel, name: &str) -> Option<bool> {
    let mut layout = Layout::new(k);
    let lay = slices::assign(k, &mut layout);
    let l = lay[var_id(k, name).0 as usize].expect("a tile");
    layout.row(l).map(|r| r.columns)
}

#[test]
fn axis_results_take_a_row_or_column_layout_only_where_broadcast_back() {
    let k = cols_kernel("f32");
    for (name, want) in [
        ("stored_sum", None),
        ("stored_arg0", None),
        ("stored_arg1", None),
        ("back_max", Some(true)),
        ("back_sum", Some(true)),
        ("back_arg0", Some(true)),
        ("back_arg1", Some(false)),
        // Broadcast to [2R, C]: the column layout of that tile, not of its source's.
        ("tall_min", Some(true)),
    ] {
        assert_eq!(layout_of(&k, name), want, "{name}");
    }
    let src = emit_cuda(&k).source;
    let p = layout_index(&k, "v");
    // Stored results are posted once per column / row; broadcast-back ones are read in registers.
    assert!(src.contains("// stored_sum = sum(v, 0): down the columns"), "{src}");
    assert!(src.contains(&format!("if (FUSE_OK{p}(fuse_j) && fuse_g0 < fuse_g) ((float*)fuse_xs)[fuse_g0 * FUSE_VEC{p} + fuse_v] = fuse_cv[(fuse_j % fuse_na) * FUSE_VEC{p} + fuse_v];")), "{src}");
    assert!(src.contains(&format!("back_max[fuse_i] = fuse_cv[((fuse_i / FUSE_VEC{p}) % fuse_na) * FUSE_VEC{p} + fuse_i % FUSE_VEC{p}];")), "{src}");
    assert!(src.contains(&format!("back_arg0[fuse_i] = fuse_ci[((fuse_i / FUSE_VEC{p}) % fuse_na) * FUSE_VEC{p} + fuse_i % FUSE_VEC{p}];")), "{src}");
    assert!(src.contains("back_arg1[fuse_j] = fuse_ri[fuse_j];"), "{src}");
    assert!(src.contains("stored_arg1[fuse_i] = ((int*)fuse_xs)[FUSE_IDX"), "{src}");
}

/// A conditional must never hold a shuffle (a full-mask `__shfl_xor_sync` in one arm runs in some
/// lanes only); `__syncthreads` only outside per-lane conditions.
#[test]
fn shuffles_and_barriers_are_unconditional() {
    for k in [cols_kernel("f32"), cols_kernel("i32"), cols_kernel("f16"), units_kernel()] {
        let src = emit_cuda(&k).source;
        for l in src.lines() {
            // In a line with a conditional, each shuffle goes into a temporary.
            if l.contains('?') {
                for (at, _) in l.match_indices("__shfl_xor_sync(") {
                    let before = &l[..at];
                    assert!(
                        before.ends_with("fuse_ov = ") || before.ends_with("fuse_oi = "),
                        "{}: a shuffle in a conditional expression: {l}",
                        k.name
                    );
                }
            }
            if l.contains("__syncthreads") {
                assert_eq!(l.trim(), "__syncthreads();", "{}: a conditional barrier: {l}", k.name);
            }
        }
    }
}

/// The whole-tile scratch of the serial form counts only where that form is compiled, so the fast
/// form of a large tile fits the 48 KiB of static shared memory.
#[test]
fn the_serial_forms_scratch_is_conditional() {
    let k = cols_kernel("f32");
    let src = emit_cuda(&k).source;
    let p = layout_index(&k, "v");
    // The scratch's size: the running maximum of its users' sizes and the dynamic-memory test.
    let decl: String = src
        .lines()
        .filter(|l| {
            l.starts_with("constexpr long long fuse_xs_bytes")
                || l.starts_with("#define FUSE_SCRATCH_DYNAMIC")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!decl.is_empty(), "a scratch");
    let whole = format!("(FUSE_L{p} * 4)");
    // Each occurrence is the serial form's, behind its condition.
    assert!(decl.contains(&format!("? 1 : {whole})")), "{decl}");
    assert_eq!(decl.matches(&whole).count(), decl.matches(&format!("? 1 : {whole})")).count(), "{decl}");
}

fn defines(k: &Kernel, r: u32, c: u32, warps: u32, spec: u32, specs: &[Specialization]) -> String {
    let mut d = format!("#define R {r}\n#define C {c}\n#define FUSE_NUM_WARPS {warps}\n");
    for s in specs {
        d.push_str(&format!("#define {} {spec}\n", s.macro_name(&k.params)));
    }
    d
}

/// NVRTC for sm_80 and sm_90: tile shapes whose rows fit a warp, span warps, are wider than the
/// block, a tile smaller than the block, one row, one column; every power-of-two warp count and
/// two odd ones (the serial form); f32, f16 and i32; launch facts off and on.
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn column_folds_compile_with_nvrtc() {
    require_nvrtc();
    const SHAPES: &[(u32, u32)] = &[(2, 1024), (64, 16), (16, 64), (128, 128), (1, 256), (256, 1), (4, 8)];
    const WARPS: &[u32] = &[1, 2, 4, 8, 16, 32, 3, 7];
    let kernels = [cols_kernel("f32"), cols_kernel("f16"), cols_kernel("i32"), units_kernel()];
    let outs: Vec<_> = kernels.iter().map(emit_cuda).collect();
    let mut jobs: Vec<(String, String, &str)> = Vec::new();
    let mut n = 0usize;
    for (ki, (k, out)) in kernels.iter().zip(&outs).enumerate() {
        for &(r, c) in SHAPES {
            for &w in WARPS {
                n += 1;
                // Each kernel sees every shape at most warp counts; the archs and facts
                // alternate. [128, 128] below 4 warps takes minutes to compile (512 elements a
                // thread, fully unrolled).
                if ((n + ki) % 2 == 1 && w != 32 && w != 7) || (r * c >= 16384 && w < 4) {
                    continue;
                }
                let arch = if n % 2 == 0 { "sm_80" } else { "sm_90" };
                let spec = (n / 2 % 2) as u32;
                let src = defines(k, r, c, w, spec, &out.specializations) + &out.source;
                jobs.push((format!("{} R={r} C={c} warps={w} facts={spec} {arch}", k.name), src, arch));
            }
        }
    }
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            // NVRTC takes 2 to 4 MiB of stack for the 512 elements a thread of [128, 128] at one
            // warp holds with the launch facts off (more than a spawned thread's 2 MiB).
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn_scoped(s, || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((what, src, arch)) = jobs.get(i) else { break };
                    if let Err(log) = compile(src, arch) {
                        failures.lock().unwrap().push(format!("== {what}\n{log}\n{}", numbered(src)));
                    }
                })
                .expect("a compile thread");
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} compiles failed; first:\n{}",
        failures.len(),
        jobs.len(),
        failures[0]
    );
    eprintln!("{} NVRTC compiles ok", jobs.len());
}

/// No local memory (the accumulators are indexed by constants after unrolling) and the folds'
/// shuffles are there, for a shape whose rows fit a warp.
#[test]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn column_folds_stay_in_registers() {
    require_nvrtc();
    let k = cols_kernel("f32");
    let out = emit_cuda(&k);
    for (r, c, w) in [(64, 16, 4), (2, 1024, 4), (128, 128, 8)] {
        let src = defines(&k, r, c, w, 1, &out.specializations) + &out.source;
        let ptx = compile(&src, "sm_90").unwrap_or_else(|log| panic!("{log}\n{}", numbered(&src)));
        assert!(!ptx.contains(".local"), "[{r}, {c}] {w} warps: local memory\n{ptx}");
        if c / 4 < 32 {
            assert!(ptx.contains("shfl.sync.bfly"), "[{r}, {c}]: no shuffles\n{ptx}");
        }
    }
}
