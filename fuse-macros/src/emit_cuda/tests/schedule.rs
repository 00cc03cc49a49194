//! Where a uniform slow-path call goes (emit_cuda/schedule.rs): for a kernel that loads a 16-bit
//! float tile, at the head under `#if` (a thread holding at most 16 lanes) and in place under the
//! complementary `#if`; for one that does not, in place and unconditionally. Where a read-only load
//! written after a reduction goes: with the first load in a kernel without 16-bit float tiles on
//! one warp, keeping its access number, and in place on more warps.
use super::super::emit_cuda;
use crate::tests::ok;

fn row_scale(t: &str) -> String {
    format!(
        "fn row_scale<const BLOCK: usize>(x: *const {t}, y: *mut {t}, n: i32) {{
    let c = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + c, c < n, 0.0);
    let inv_n = 1.0 / n as f32;
    store(y + program_id(0) * n + c, v * inv_n, c < n);
}}"
    )
}

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
    let src = emit_cuda(&ok(&row_scale("f16"))).source;
    let guards = guarded_by(&src, "inv_n = (");
    assert_eq!(guards, ["#if FUSE_EPT0 <= 16", "#if !(FUSE_EPT0 <= 16)"], "{src}");
    // The head comes before the first load.
    let (head, load) = (src.find("#if FUSE_EPT0 <= 16").unwrap(), src.find("= load(x").unwrap());
    assert!(head < load, "{src}");
}

#[test]
fn a_32_bit_kernel_computes_its_division_in_place_unconditionally() {
    let src = emit_cuda(&ok(&row_scale("f32"))).source;
    assert_eq!(src.matches("inv_n = (").count(), 1, "{src}");
    assert!(!src.contains("FUSE_EPT0 <= 16"), "{src}");
}

/// A row scaled by its sum and a weight row loaded after the sum (`w` a `*const` or `*mut`).
fn weighted_row(t: &str, w: &str) -> String {
    format!(
        "fn weighted_row<const BLOCK: usize>(x: *const {t}, w: {w} {t}, y: *mut {t}, n: i32) {{
    let c = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + c, c < n, 0.0);
    let s = sum(v);
    let wv = load(w + c, c < n, 0.0);
    store(y + program_id(0) * n + c, v * s * wv, c < n);
}}"
    )
}

/// Where the emitted source loads `w` and sums `v`.
fn load_and_sum(src: &str) -> (usize, usize) {
    (src.find("= load(w").expect("the weight load"), src.find("= sum(").expect("the sum"))
}

#[test]
fn a_32_bit_kernel_loads_a_read_only_row_with_its_first_load_on_one_warp() {
    let src = emit_cuda(&ok(&weighted_row("f32", "*const"))).source;
    let (load, sum) = load_and_sum(&src);
    assert!(src.find("= load(x").unwrap() < load && load < sum, "{src}");
    // Still access 1 in program order (x is 0, the store 2): its bounds fact is FUSE_INB_1.
    let code = &src[load..sum];
    assert!(code.contains("FUSE_INB_1") && !code.contains("FUSE_INB_2"), "{src}");
    assert!(src[sum..].contains("FUSE_INB_2"), "{src}");
    // On one warp there; on more in place, after the sum.
    assert_eq!(guarded_by(&src, "= load(w"), ["#if FUSE_NUM_WARPS == 1", "#if FUSE_NUM_WARPS != 1"], "{src}");
    assert!(src[sum..].contains("= load(w"), "{src}");
}

#[test]
fn a_16_bit_kernel_or_a_writable_pointer_keeps_the_load_in_place() {
    for (t, w) in [("f16", "*const"), ("f32", "*mut")] {
        let src = emit_cuda(&ok(&weighted_row(t, w))).source;
        let (load, sum) = load_and_sum(&src);
        assert!(sum < load, "{t} {w}: {src}");
    }
}
