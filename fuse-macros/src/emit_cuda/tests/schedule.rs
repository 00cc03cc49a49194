//! Where a uniform slow-path call goes (emit_cuda/analysis/schedule.rs and lower/mod.rs), when the host does not compute
//! it (it reads a program id): for a kernel that loads a 16-bit float tile, at the head under `#if` (a thread holding at most 16 lanes) and in place under the
//! complementary `#if`; for one that does not, in place and unconditionally. A division of
//! parameters is a parameter the runtime computes. Where a read-only load
//! written after a reduction goes: with the first load in a kernel without 16-bit float tiles on
//! one warp where it is small beside the first load, keeping its access number; else in place.
use super::super::emit_cuda;
use crate::tests::ok;

/// A row scaled by `1 / divisor`: `n` (the host computes it: host_scalars.rs in fuse-ir) or one
/// per program (`n + program_id(0)`: a uniform division on the device).
fn row_scale(t: &str, divisor: &str) -> String {
    format!(
        "fn row_scale<const BLOCK: usize>(x: *const {t}, y: *mut {t}, n: i32) {{
    let c = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + c, c < n, 0.0);
    let inv_n = 1.0 / ({divisor}) as f32;
    store(y + program_id(0) * n + c, v * inv_n, c < n);
}}"
    )
}

const PER_PROGRAM: &str = "n + program_id(0)";

/// For each line of `src` that holds `division`, the nearest preprocessor line above it (not a
/// `#pragma`).
fn guarded_by<'a>(src: &'a str, division: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = src.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(division))
        .map(|(i, _)| {
            lines[..i]
                .iter()
                .rev()
                .find(|l| l.starts_with('#') && !l.starts_with("#pragma"))
                .copied()
                .unwrap_or("")
        })
        .collect()
}

#[test]
fn a_16_bit_kernel_computes_its_division_at_the_head_or_in_place() {
    let src = emit_cuda(&ok(&row_scale("f16", PER_PROGRAM))).source;
    let guards = guarded_by(&src, "inv_n = (");
    assert_eq!(guards, ["#if FUSE_EPT0 <= 16", "#if !(FUSE_EPT0 <= 16)"], "{src}");
    // The head comes before the first load.
    let (head, load) = (src.find("#if FUSE_EPT0 <= 16").unwrap(), src.find("= load(x").unwrap());
    assert!(head < load, "{src}");
}

#[test]
fn a_32_bit_kernel_computes_its_division_in_place_unconditionally() {
    let src = emit_cuda(&ok(&row_scale("f32", PER_PROGRAM))).source;
    assert_eq!(src.matches("inv_n = (").count(), 1, "{src}");
    assert!(!src.contains("FUSE_EPT0 <= 16"), "{src}");
}

#[test]
fn a_division_of_parameters_is_a_parameter_the_runtime_computes() {
    for t in ["f16", "f32"] {
        let src = emit_cuda(&ok(&row_scale(t, "n"))).source;
        // After the lengths, before the error words; read where the division was, unguarded.
        assert!(
            src.contains("long long y_len,\n    float fuse_host0,\n    unsigned long long* fuse_err"),
            "{src}"
        );
        assert_eq!(src.matches("inv_n = fuse_host0;").count(), 1, "{src}");
        assert!(guarded_by(&src, "inv_n = ").iter().all(|g| !g.contains("FUSE_EPT0")), "{src}");
        assert!(!src.contains("inv_n = ("), "{src}");
    }
}

#[test]
fn a_division_only_a_host_scalar_reads_stays_off_the_head() {
    // `inv_n` is read only by `half`, which the runtime passes: neither is a slow-path call here.
    let src = emit_cuda(&ok("fn k<const BLOCK: usize>(x: *const f16, y: *mut f16, n: i32) {
    let c = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + c, c < n, 0.0);
    let inv_n = 1.0 / n as f32;
    let half = inv_n * 0.5;
    store(y + program_id(0) * n + c, v * half, c < n);
}"))
    .source;
    assert_eq!(src.matches(" = fuse_host0;").count(), 1, "{src}"); // `half` is renamed: a CUDA type
    assert!(!src.contains("FUSE_EPT0 <= 16"), "{src}");
}

/// Four rows scaled by their sums and a weight row loaded after the sums (`w` a `*const` or
/// `*mut`); with `rows` 1, one row of `[BLOCK]` (the weight row as large as the first tile).
fn weighted_rows(t: &str, w: &str, rows: u32) -> String {
    let (x_offs, sum, scale) = if rows == 1 {
        ("program_id(0) * n + c".to_string(), "sum(v)", "s * wv")
    } else {
        (
            format!("(program_id(0) * {rows} + arange(0, {rows})).expand_dims(1) * n + c.expand_dims(0)"),
            "v.sum(1)",
            "s.expand_dims(1) * wv.expand_dims(0)",
        )
    };
    format!(
        "fn weighted_rows<const BLOCK: usize>(x: *const {t}, w: {w} {t}, y: *mut {t}, n: i32) {{
    let c = arange(0, BLOCK);
    let offs = {x_offs};
    let v = load(x + offs);
    let s = {sum};
    let wv = load(w + c, c < n, 0.0);
    store(y + offs, v * {scale});
}}"
    )
}

/// Where the emitted source loads `w` and sums `v`.
fn load_and_sum(src: &str) -> (usize, usize) {
    (src.find("= load(w").expect("the weight load"), src.find("= sum(").expect("the sum"))
}

#[test]
fn a_32_bit_kernel_loads_a_small_read_only_row_with_its_first_load_on_one_warp() {
    let src = emit_cuda(&ok(&weighted_rows("f32", "*const", 4))).source;
    let (load, sum) = load_and_sum(&src);
    assert!(src.find("= load(x").unwrap() < load && load < sum, "{src}");
    // Still access 1 in program order (x is 0, the store 2): its bounds fact is FUSE_INB_1.
    let code = &src[load..sum];
    assert!(code.contains("FUSE_INB_1") && !code.contains("FUSE_INB_2"), "{src}");
    assert!(src[sum..].contains("FUSE_INB_2"), "{src}");
    // There on one warp where the row is at most half the first tile; else in place, after the sum.
    let here = "FUSE_NUM_WARPS == 1 && 2 * (BLOCK) <= ((BLOCK * 4))";
    assert_eq!(guarded_by(&src, "= load(w"), [format!("#if {here}"), format!("#if !({here})")], "{src}");
    assert!(src[sum..].contains("= load(w"), "{src}");
}

#[test]
fn a_weight_row_as_large_as_the_first_tile_stays_in_place() {
    let src = emit_cuda(&ok(&weighted_rows("f32", "*const", 1))).source;
    assert!(src.contains("#if FUSE_NUM_WARPS == 1 && 2 * (BLOCK) <= (BLOCK)\n"), "{src}");
}

#[test]
fn a_16_bit_kernel_or_a_writable_pointer_keeps_the_load_in_place() {
    for (t, w) in [("f16", "*const"), ("f32", "*mut")] {
        let src = emit_cuda(&ok(&weighted_rows(t, w, 4))).source;
        let (load, sum) = load_and_sum(&src);
        assert!(sum < load && src.matches("= load(w").count() == 1, "{t} {w}: {src}");
    }
}
