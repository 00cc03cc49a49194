//! Emitter tests: hand-built IR for the seed kernels and a kernel using every IR construct;
//! structure/determinism checks here, NVRTC compiles in `nvrtc`.
use super::analysis::affine;
use super::lower::ctype;
use super::*;
use fuse_ir::*;

mod branches;
mod columns;
mod dot;
pub(super) mod kernels;
pub(super) mod nvrtc;
mod rows;
mod schedule;
mod tma;

use kernels::*;

#[test]
fn emit_is_deterministic() {
    for k in all_kernels() {
        let a = emit_cuda(&k);
        let b = emit_cuda(&k.clone());
        assert_eq!(a.source, b.source, "{}", k.name);
        assert_eq!(a.specializations, b.specializations, "{}", k.name);
        // Also independent of a JSON round trip (what the runtime sees; float literals serialise
        // by their bits, so infinities and NaN survive it).
        if let Ok(k2) = Kernel::from_json(&k.to_json()) {
            assert_eq!(a.source, emit_cuda(&k2).source, "{}", k.name);
        }
    }
}

#[test]
fn emit_structure_of_every_kernel() {
    for k in all_kernels() {
        let src = emit_cuda(&k).source;
        assert!(!src.contains("#include"), "{}: self-contained", k.name);
        assert!(src.starts_with(&format!("// fuse: CUDA C for kernel `{}`", k.name)), "{}", k.name);
        assert!(src.contains(&format!("extern \"C\" __global__ void FUSE_LAUNCH_BOUNDS {}(", k.name)));
        // One warp and at most 32 lanes of each tile a thread: at most 64 registers (32 blocks).
        assert!(src.contains(
            "#define FUSE_LAUNCH_BOUNDS __launch_bounds__(FUSE_THREADS, 32)\n#else\n#define FUSE_LAUNCH_BOUNDS __launch_bounds__(FUSE_THREADS)\n#endif"
        ));
        assert!(src.contains("    unsigned long long* fuse_err) {"), "{}", k.name);
        for c in &k.consts {
            assert!(src.contains(&format!("#ifndef {c}\n#error")), "{}: guard for {c}", k.name);
        }
        assert!(src.contains("#ifndef FUSE_NUM_WARPS\n#error"), "{}", k.name);
        // Balanced braces and preprocessor conditionals.
        assert_eq!(src.matches('{').count(), src.matches('}').count(), "{}", k.name);
        let opens = src.lines().filter(|l| l.starts_with("#if")).count();
        assert_eq!(opens, src.lines().filter(|l| l.starts_with("#endif")).count(), "{}", k.name);
        // No tabs, no trailing spaces: stable, readable layout.
        assert!(!src.contains('\t') && !src.lines().any(|l| l.ends_with(' ')), "{}", k.name);
    }
}

#[test]
fn emit_add_mul_signature_and_specializations() {
    let k = add_mul(DType::F32);
    let out = emit_cuda(&k);
    let src = &out.source;
    assert!(src.contains(
        "    const float* __restrict__ x,\n    const float* __restrict__ y,\n    const float* __restrict__ z,\n    float* __restrict__ out,\n    int n,\n    long long x_len,\n    long long y_len,\n    long long z_len,\n    long long out_len,\n    unsigned long long* fuse_err) {"
    ), "{src}");
    // The loads' destinations shadow the params in the user's code: renamed, not clobbered.
    assert!(src.contains("  float x_2[FUSE_EPT0];"), "{src}");
    assert_eq!(
        out.specializations,
        vec![
            Specialization::Align16(0),
            Specialization::Align16(1),
            Specialization::Align16(2),
            Specialization::Align16(3),
            Specialization::Div16(4),
            Specialization::InBounds(0),
            Specialization::InBounds(1),
            Specialization::InBounds(2),
            Specialization::InBounds(3),
            Specialization::AllTrue(0)
        ]
    );
    // Proven in bounds at launch, with a chunk-uniform mask: vector accesses, no check, no
    // per-lane path; else the checked fast/per-lane paths.
    assert!(src.contains("#if FUSE_INB_0 && FUSE_ALIGN16_x && (BLOCK % FUSE_VEC0 == 0) && FUSE_VEC0 >= 2 && ((BLOCK % FUSE_VEC0 == 0) && ((FUSE_DIV16_n ? 16 : 1) % FUSE_VEC0 == 0))"), "{src}");
    assert!(src.contains("#elif FUSE_ALIGN16_x && (BLOCK % FUSE_VEC0 == 0) && FUSE_VEC0 >= 2"), "{src}");
    assert!(
        src.contains(
            "if (FUSE_INB_3 || (unsigned long long)fuse_o < (unsigned long long)out_len) out[fuse_o] = "
        ),
        "{src}"
    );
    // `offs < n` is constant on each chunk when n is a multiple of VEC: read at the chunk's first slot.
    assert!(
        src.contains("&& mask[((BLOCK % FUSE_VEC0 == 0) && ((FUSE_DIV16_n ? 16 : 1) % FUSE_VEC0 == 0)) ? (fuse_b + fuse_v) - (fuse_b + fuse_v) % FUSE_VEC0 : (fuse_b + fuse_v)];"),
        "{src}"
    );
    assert!(src.contains("fuse_ldg_words<FUSE_VEC0 * 4 / 4>(fuse_wd + fuse_j * (FUSE_VEC0 * 4 / 4), x + (long long)offs[fuse_b]);"), "{src}");
    assert!(
        src.contains("fuse_st_words<FUSE_VEC0 * 4 / 4>(out + (long long)offs[fuse_b], fuse_w);"),
        "{src}"
    );
    // Per chunk: one vector access, no access (every lane off), or its lanes one by one (a
    // ragged edge); an out-of-bounds lane is noted, and reported once at the end without a call
    // on the lane path.
    assert!(src.contains("fuse_some[fuse_j] = fuse_any;"), "{src}");
    assert!(src.contains("} else if (fuse_some[fuse_j]) {"), "{src}");
    assert!(src.contains("const int fuse_i = fuse_b + fuse_v;"), "{src}");
    assert!(src.contains("else if (fuse_bad == 0u) { fuse_bad = 4u; fuse_bad_at = fuse_o; }"), "{src}");
    assert!(
        src.ends_with("  if (fuse_bad != 0u) fuse_oob(fuse_err, fuse_bad - 1u, fuse_bad_at);\n}\n"),
        "{src}"
    );
    // f16: storage as unsigned short, 8 elements per 16 bytes.
    let h = emit_cuda(&add_mul(DType::F16)).source;
    assert!(h.contains("const unsigned short* __restrict__ x,"), "{h}");
    assert!(h.contains("FUSE_L0 >= FUSE_THREADS * 8 ? 8"), "{h}");
    assert!(h.contains("asm(\"cvt.f32.f16 %0, %1;\""), "{h}");
}

#[test]
fn emit_softmax_reads_stride_divisibility() {
    let out = emit_cuda(&softmax());
    assert_eq!(
        out.specializations,
        vec![
            Specialization::Align16(0),
            Specialization::Align16(1),
            Specialization::Div16(2),
            Specialization::Div16(3),
            Specialization::Div16(4),
            Specialization::InBounds(0),
            Specialization::InBounds(1),
            Specialization::AllTrue(0)
        ]
    );
    let src = &out.source;
    assert!(src.contains("(FUSE_DIV16_in_stride ? 16 : 1) % FUSE_VEC0 == 0"), "{src}");
    // Two reductions, one barrier each.
    assert_eq!(src.matches("__syncthreads();").count(), 2, "{src}");
    assert!(src.contains("__shared__ float fuse_red_f32[2][FUSE_NUM_WARPS];"), "{src}");
    assert!(src.contains("fmaxf(fuse_r, "), "{src}");
}

#[test]
fn emit_wide_layernorm_loops_stay_contiguous() {
    let out = emit_cuda(&layernorm_wide());
    let src = &out.source;
    assert_eq!(src.matches("fuse_next(").count(), 3 + 4, "three loops (+ 4 helper overloads)\n{src}");
    // The loop counter steps by BLOCK from 0, so cols = start + arange is BLOCK-aligned.
    assert!(src.contains("#elif FUSE_ALIGN16_x && ((FUSE_DIV16_stride ? 16 : 1) % FUSE_VEC0 == 0 && BLOCK % FUSE_VEC0 == 0)"), "{src}");
    assert!(src.contains("#elif FUSE_ALIGN16_w && (BLOCK % FUSE_VEC0 == 0) && FUSE_VEC0 >= 2"), "{src}");
}

#[test]
fn emit_dropout_uses_philox_x4_where_aligned() {
    let src = emit_cuda(&bias_gelu_dropout(DType::F32)).source;
    assert!(src.contains("#if FUSE_VEC0 % 4 == 0 && (BLOCK % 4 == 0)"), "{src}");
    assert!(src.contains("fuse_uniform(fuse_p.w)"), "{src}");
    assert!(src.contains("fuse_rand_bits(fuse_seed, "), "per-element fallback\n{src}");
    // `r > p` on the Philox words.
    assert!(src.contains("const unsigned int fuse_lb0 = fuse_rand_gt_bound(t17);"), "{src}");
    assert!(src.contains("(fuse_bits_r[fuse_i] >= fuse_lb0 && fuse_bits_r[fuse_i] <= ~fuse_lb0)"), "{src}");
    // offs % h: one division per thread, then the remainder steps, where that is exact.
    assert!(src.contains("t7 = offs % t6: one division per thread, the rest stepped"), "{src}");
    // ... where no lane wrapped: the last slot is exactly K = (NCH - 1) * D + VEC - 1 above the first.
    assert!(
        src.contains("const bool fuse_step = offs[0] >= 0 && t6 > 0 && (FUSE_NCH0 == 1 || fuse_d < t6) && fuse_z >= fuse_a0 && (unsigned int)fuse_z - (unsigned int)fuse_a0 == (unsigned int)(FUSE_NCH0 - 1) * (unsigned int)fuse_d + (unsigned int)(FUSE_VEC0 - 1);"),
        "{src}"
    );
    assert!(
        src.contains(
            "if (fuse_j > 0) fuse_r = fuse_r >= t6 - fuse_d ? fuse_r - (t6 - fuse_d) : fuse_r + fuse_d;"
        ),
        "{src}"
    );
    // The bias offsets (offs % h) are consecutive in a chunk unless it wraps: a vector load
    // after a one-subtraction check, with the per-lane load as fallback.
    assert!(src.contains("#if FUSE_ALIGN16_bias && "), "{src}");
    assert!(
        src.contains(
            "&& (unsigned int)t7[fuse_b + FUSE_VEC0 - 1] - (unsigned int)t7[fuse_b] == FUSE_VEC0 - 1;"
        ),
        "{src}"
    );
    assert!(src.contains("__ldg(&bias[fuse_o])"), "{src}");
}

/// The dropout kernel with its `rand` made `rand16`: one Philox per eight aligned slots (half-words
/// in order: low then high half of x, y, z, w), the per-lane fallback, one integer compare against
/// `fuse_rand16_gt_bound`; the plain kernel's source has none of the rand16 helpers.
#[test]
fn emit_rand16_shares_one_philox_between_eight_lanes() {
    let plain = emit_cuda(&bias_gelu_dropout(DType::F16)).source;
    assert!(!plain.contains("rand16"), "{plain}");
    let src = emit_cuda(&bias_gelu_dropout16(DType::F16)).source;
    assert!(src.contains("// r = rand16("), "{src}");
    assert!(src.contains("#if FUSE_VEC0 % 8 == 0 && (BLOCK % 8 == 0)"), "{src}");
    assert!(src.contains("for (int fuse_q = 0; fuse_q < FUSE_EPT0; fuse_q += 8)"), "{src}");
    assert!(src.contains(">> 3;  // offsets 8c .. 8c + 7"), "{src}");
    for (j, part) in ["(fuse_p.x & 0xFFFFu)", "(fuse_p.x >> 16)", "(fuse_p.y & 0xFFFFu)", "(fuse_p.w >> 16)"]
        .iter()
        .zip([0, 1, 2, 7])
        .map(|(p, j)| (j, p))
    {
        let q = if j == 0 { "fuse_q".to_string() } else { format!("fuse_q + {j}") };
        assert!(src.contains(&format!("fuse_bits_r[{q}] = {part};")), "{q} {part}\n{src}");
    }
    // One call in the eight-slot path, one in the four-slot path (starts 4 | s, 8 ∤ s).
    assert_eq!(src.matches("fuse_philox((unsigned int)fuse_c").count(), 2, "{src}");
    assert!(src.contains("fuse_rand16_bits(fuse_seed, "), "per-element fallback\n{src}");
    assert!(src.contains("const unsigned int fuse_lb0 = fuse_rand16_gt_bound(t17);"), "{src}");
    assert!(src.contains("(fuse_bits_r[fuse_i] >= fuse_lb0)"), "{src}");
    assert!(!src.contains("fuse_rand_gt_bound(t17)"), "{src}");
}

/// f32 tiles have VEC 4, so rand16's eight-slot path never applies there: four slots at offsets
/// 4b..4b+3 share one Philox call and take the half of its eight half-words that they index
/// (words x, y for even b, z, w for odd), under `#elif` between the eight-slot path and the
/// per-lane fallback; `rand16(..) > p` stays one integer compare. `rand` (32-bit) has no such path.
#[test]
fn emit_rand16_f32_takes_four_of_eight() {
    let src = emit_cuda(&bias_gelu_dropout16(DType::F32)).source;
    let eight = src.find("#if FUSE_VEC0 % 8 == 0 && (BLOCK % 8 == 0)").unwrap_or_else(|| panic!("{src}"));
    let four = src.find("#elif FUSE_VEC0 % 4 == 0 && (BLOCK % 4 == 0)").unwrap_or_else(|| panic!("{src}"));
    let lane = src[four..].find("#else").map(|i| four + i).unwrap_or_else(|| panic!("{src}"));
    assert!(eight < four && four < lane, "{src}");
    let block = &src[four..lane];
    assert!(block.contains("for (int fuse_q = 0; fuse_q < FUSE_EPT0; fuse_q += 4) {"), "{block}");
    assert!(
        block.contains("const unsigned long long fuse_o = ((unsigned long long)(offs[fuse_q]));"),
        "{block}"
    );
    assert!(block.contains("const unsigned long long fuse_c = fuse_o >> 3;"), "{block}");
    assert_eq!(block.matches("fuse_philox(").count(), 1, "{block}");
    assert!(block.contains("const unsigned int fuse_w0 = (fuse_o & 4ull) ? fuse_p.z : fuse_p.x;"), "{block}");
    assert!(block.contains("const unsigned int fuse_w1 = (fuse_o & 4ull) ? fuse_p.w : fuse_p.y;"), "{block}");
    for (q, part) in [
        ("fuse_q", "(fuse_w0 & 0xFFFFu)"),
        ("fuse_q + 1", "(fuse_w0 >> 16)"),
        ("fuse_q + 2", "(fuse_w1 & 0xFFFFu)"),
        ("fuse_q + 3", "(fuse_w1 >> 16)"),
    ] {
        assert!(block.contains(&format!("fuse_bits_r[{q}] = {part};")), "{q} {part}\n{block}");
        assert!(block.contains(&format!("r[{q}] = fuse_uniform16(fuse_bits_r[{q}]);")), "{q}\n{block}");
    }
    assert!(src[lane..].contains("fuse_rand16_bits(fuse_seed, "), "per-element fallback\n{src}");
    assert!(src.contains("(fuse_bits_r[fuse_i] >= fuse_lb0)"), "{src}");
    assert_eq!(src.matches("#endif").count(), src.lines().filter(|l| l.starts_with("#if")).count());
    // f16 (VEC 8) has it too, for starts that are multiples of 4 but not 8; `rand` does not.
    let h = emit_cuda(&bias_gelu_dropout16(DType::F16)).source;
    assert!(h.contains("#elif FUSE_VEC0 % 4 == 0 && (BLOCK % 4 == 0)"), "{h}");
    let plain = emit_cuda(&bias_gelu_dropout(DType::F32)).source;
    assert!(!plain.contains("fuse_w0") && !plain.contains("#elif FUSE_VEC0 % 4"), "{plain}");
}

/// The shared-Philox paths of `rand16` as emitted, read back from the source and evaluated on the
/// host against `fuse_ir::philox::rand16` bit for bit: for the group of slots whose first offset
/// is `o` (4 | o, or 8 | o), each slot's half-word and its `fuse_uniform16` float is the
/// reference's at offset `o + j`, and `h >= rand16_gt_bound(p)` is the reference's `> p`.
#[test]
fn emit_rand16_shared_philox_paths_are_the_reference() {
    use fuse_ir::philox;
    /// A word read in the group's lines: a Philox output word or a selected one.
    #[derive(Clone, Copy, Debug)]
    enum Word {
        P(usize),
        /// `(fuse_o & 4ull) ? fuse_p.<hi> : fuse_p.<lo>`
        Sel {
            hi: usize,
            lo: usize,
        },
    }
    let lane = |c: &str| ["x", "y", "z", "w"].iter().position(|l| *l == c).unwrap_or_else(|| panic!("{c}"));
    let p_word = |t: &str| t.strip_prefix("fuse_p.").map(lane);
    /// The group's slot j: (word, high half?), with `fuse_c = <first offset> >> shift`.
    struct Group {
        step: u64,
        shift: u32,
        slots: Vec<(Word, bool)>,
    }
    let parse = |block: &str| -> Group {
        let step: u64 = block
            .split("fuse_q += ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{block}"));
        let c =
            block.lines().find_map(|l| l.trim().strip_prefix("const unsigned long long fuse_c = ")).unwrap();
        let c = c.split(';').next().unwrap();
        let shift: u32 = c.rsplit(">> ").next().unwrap().trim().parse().unwrap();
        // The counter is the group's first offset: `offs[fuse_q]` directly or through `fuse_o`.
        assert!(
            c.starts_with("fuse_o >>") || c.starts_with("((unsigned long long)(offs[fuse_q])) >>"),
            "{c}"
        );
        assert!(block.contains("fuse_philox((unsigned int)fuse_c, (unsigned int)(fuse_c >> 32), (unsigned int)fuse_seed, (unsigned int)(fuse_seed >> 32));"), "{block}");
        let mut named: Vec<(String, Word)> = Vec::new();
        for l in block.lines() {
            let Some(rest) = l.trim().strip_prefix("const unsigned int ") else { continue };
            let (name, e) = rest.split_once(" = ").unwrap();
            let e = e.strip_suffix(';').unwrap();
            let sel = e.strip_prefix("(fuse_o & 4ull) ? ").unwrap_or_else(|| panic!("{e}"));
            let (hi, lo) = sel.split_once(" : ").unwrap();
            named.push((name.into(), Word::Sel { hi: p_word(hi).unwrap(), lo: p_word(lo).unwrap() }));
        }
        let mut slots = Vec::new();
        for j in 0..step {
            let q = if j == 0 { "fuse_q".to_string() } else { format!("fuse_q + {j}") };
            let head = format!("fuse_bits_r[{q}] = (");
            let e = block
                .lines()
                .find_map(|l| l.trim().strip_prefix(head.as_str()))
                .unwrap_or_else(|| panic!("{head}\n{block}"));
            let e = e.strip_suffix(");").unwrap();
            let (w, high) = if let Some(w) = e.strip_suffix(" >> 16") {
                (w, true)
            } else {
                (e.strip_suffix(" & 0xFFFFu").unwrap_or_else(|| panic!("{e}")), false)
            };
            let word = p_word(w)
                .map(Word::P)
                .or_else(|| named.iter().find(|(n, _)| n == w).map(|&(_, x)| x))
                .unwrap_or_else(|| panic!("{w}"));
            assert!(block.contains(&format!("r[{q}] = fuse_uniform16(fuse_bits_r[{q}]);")), "{q}");
            slots.push((word, high));
        }
        Group { step, shift, slots }
    };
    let section = |src: &str, from: &str| -> String {
        let at = src.find(from).unwrap_or_else(|| panic!("{from}\n{src}"));
        let rest = &src[at + from.len()..];
        rest[..rest.find("\n#e").unwrap()].to_string()
    };
    let mut checked = 0;
    for (dtype, head, step) in [
        (DType::F32, "#elif FUSE_VEC0 % 4 == 0 && (BLOCK % 4 == 0)", 4),
        (DType::F16, "#elif FUSE_VEC0 % 4 == 0 && (BLOCK % 4 == 0)", 4),
        (DType::F16, "#if FUSE_VEC0 % 8 == 0 && (BLOCK % 8 == 0)", 8),
    ] {
        let src = emit_cuda(&bias_gelu_dropout16(dtype)).source;
        let g = parse(&section(&src, head));
        assert_eq!((g.step, g.shift, g.slots.len()), (step, 3, step as usize));
        let seeds = [0u64, 1, 0x1234_5678_9abc_def0, u64::MAX, 0xdead_beef];
        let bases = (0u64..600).chain([
            (1 << 29) - 2,
            (1 << 32) - 1,
            1 << 32,
            (1 << 35) - 1,
            1 << 35,
            (1 << 35) + 1,
            u64::MAX >> 3,
            (u64::MAX >> 3) - 1,
        ]);
        for seed in seeds {
            for b in bases.clone() {
                // Every offset o of the group's alignment: b counts groups of `step`.
                let Some(o) = b.checked_mul(step) else { continue };
                let c = o >> g.shift;
                let p = philox::philox4x32_10(
                    [c as u32, (c >> 32) as u32, 0, 0],
                    [seed as u32, (seed >> 32) as u32],
                );
                for (j, &(w, high)) in g.slots.iter().enumerate() {
                    let word = match w {
                        Word::P(i) => p[i],
                        Word::Sel { hi, lo } => p[if o & 4 != 0 { hi } else { lo }],
                    };
                    let h = if high { word >> 16 } else { word & 0xFFFF };
                    let at = o + j as u64;
                    let want = philox::rand16(seed, at);
                    assert_eq!(
                        philox::uniform16(h as u16).to_bits(),
                        want.to_bits(),
                        "{dtype:?} step {step}: seed {seed:#x}, offset {at} (group at {o}, slot {j})"
                    );
                    assert_eq!(h as u16, philox::half_word(p, at));
                    for pr in [0.0f32, 0.1, 0.5, 0.9, 1.0] {
                        assert_eq!(h >= philox::rand16_gt_bound(pr), want > pr, "p {pr}, offset {at}");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 30_000, "{checked}");
}

#[test]
fn emit_moves_uniform_scalars_between_the_loads_and_the_math() {
    let src = emit_cuda(&bias_gelu_dropout(DType::F32)).source;
    let at =
        |src: &str, needle: &str| src.find(needle).unwrap_or_else(|| panic!("{needle:?} missing\n{src}"));
    // The `rand > p` bound (its `p` is written after the math) comes after the prologue's last
    // load (the bias gather) and before the first statement that reads a loaded value.
    let bias_load = at(&src, "// t8 = load(bias[t7], mask m)");
    let bound = at(&src, "const unsigned int fuse_lb0 = fuse_rand_gt_bound(t17);");
    let math = at(&src, "v[fuse_i] = (t5[fuse_i] + t8[fuse_i]);");
    assert!(bias_load < bound && bound < math, "{src}");
    // LayerNorm's row length as a float stays after the row's load, where it was written.
    let src = emit_cuda(&layernorm_f16()).source;
    assert!(at(&src, "// xs = load(x[t3], mask mask)") < at(&src, "  t8 = "), "{src}");
}

#[test]
#[allow(clippy::excessive_precision)] // the literal as the emitted source spells it
fn emit_philox_constant_matches_reference() {
    // The source's literal 4.6566127342e-10f is the f32 the reference multiplies by.
    assert_eq!(4.6566127342e-10_f32.to_bits(), 0x2FFF_FFFF);
    assert_eq!(philox::uniform(u32::MAX >> 1), (0x7fff_ffff as f32) * 4.6566127342e-10_f32);
}

#[test]
fn emit_renames_colliding_identifiers() {
    let mut b = Builder::new(
        "k",
        &["BLOCK"],
        &[
            ("float", ptr(DType::F32, true)),
            ("n_len", ParamKind::Scalar(DType::I32)),
            ("n", ptr(DType::F32, false)),
        ],
    );
    let offs = b.tile_expr("fuse_tid", DType::I32, blk(), Expr::Arange { start: 0 });
    let v =
        b.tile_expr("int", DType::F32, blk(), Expr::Load { param: 2, offset: offs, mask: None, other: None });
    b.store(0, offs, v, None);
    let src = emit_cuda(&b.finish()).source;
    assert!(src.contains("    float* __restrict__ float_,\n    int n_len,\n    const float* __restrict__ n,\n    long long float__len,\n    long long n_len_2,"), "{src}");
    assert!(src.contains("  int fuse_tid_[FUSE_EPT0];") && src.contains("  float int_[FUSE_EPT0];"), "{src}");
}

#[test]
fn emit_literals() {
    use ctype::{f32_lit, int_lit};
    assert_eq!(int_lit(i128::from(i32::MIN), DType::I32), "(-2147483647 - 1)");
    assert_eq!(int_lit(-1, DType::U32), "4294967295u");
    assert_eq!(int_lit(5, DType::I64), "5LL");
    assert_eq!(f32_lit(0.5), "0.5f");
    assert_eq!(f32_lit(-1e-5), "(-1e-5f)");
    assert_eq!(f32_lit(f32::NEG_INFINITY), "__int_as_float((int)0xff800000u)");
    // A NaN keeps the bits it was given, sign included (`-f32::NAN`).
    assert_eq!(f32_lit(f32::NAN), "__int_as_float(0x7fc00000)");
    assert_eq!(f32_lit(-f32::NAN), "__int_as_float((int)0xffc00000u)");
}

#[test]
fn emit_affine_facts() {
    let k = layernorm_wide();
    let f = affine::Facts::analyse(&k);
    let contig =
        k.vars.iter().enumerate().filter(|(i, _)| matches!(f.vars[*i], affine::Fact::Contig(_))).count();
    assert!(contig >= 6, "cols and offsets of three loops: {contig}");
}

/// `FUSE_DUMP=dir cargo test emit_dump` writes every emitted source there (for reading).
#[test]
fn emit_dump() {
    if let Ok(dir) = std::env::var("FUSE_DUMP") {
        for k in all_kernels() {
            std::fs::write(format!("{dir}/{}.cu", k.name), emit_cuda(&k).source).unwrap();
        }
    }
}

/// `fuse_rand_gt_bound` (prelude.rs) mirrored in Rust, checked against the float test it replaces
/// (`fuse_ir::philox::uniform(x) > p`) at and around the bound it returns, for every branch.
#[test]
fn rand_gt_bound_is_exact() {
    // As the C helper tests it: a NaN `p` takes the first branch.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    fn bound(p: f32) -> u32 {
        if !(p < 1.0) {
            return 0x8000_0000;
        }
        if p < 0.0 {
            return 0;
        }
        if p == 0.0 {
            return 1;
        }
        let q = f32::from_bits((p * 2_147_483_648.0).to_bits() + 1);
        if q >= 2_147_483_648.0 {
            return 0x8000_0000;
        }
        if q < 16_777_216.0 {
            return q.floor() as u32 + 1;
        }
        let b = q.to_bits();
        let half_ulp = 1u32 << (((b >> 23) - 127) - 24);
        q as u32 + half_ulp - (b & 1) + 1
    }
    let keep = |x: u32, l: u32| x >= l && x <= !l;
    let mut ps: Vec<f32> = vec![
        f32::NAN,
        f32::INFINITY,
        -1.0,
        -0.0,
        0.0,
        1e-45,
        1e-30,
        1e-9,
        0.0078125,
        0.1,
        0.5,
        0.9,
        0.999_999_9,
        0.999_999_94,
        1.0,
        3.0,
    ];
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..2000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ps.push((s >> 40) as f32 / (1u64 << 24) as f32);
        ps.push(f32::from_bits(((s >> 32) as u32) % 0x3f80_0000));
    }
    for p in ps {
        let l = bound(p);
        let mut xs = vec![0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX];
        for c in [l, !l] {
            for d in 0..3u32 {
                xs.extend([c.wrapping_add(d), c.wrapping_sub(d)]);
            }
        }
        for x in xs {
            assert_eq!(keep(x, l), fuse_ir::philox::uniform(x) > p, "p={p:e} x={x:#x} L={l:#x}");
        }
    }
}
