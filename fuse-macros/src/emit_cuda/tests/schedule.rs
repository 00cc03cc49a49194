//! Where a uniform slow-path call goes (emit_cuda/schedule.rs): for a kernel that loads a 16-bit
//! float tile, at the head under `#if` (a thread holding at most 16 lanes) and in place under the
//! complementary `#if`; for one that does not, in place and unconditionally.
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

/// For each line of `src` that holds `division`, the nearest preprocessor line above it.
fn guarded_by<'a>(src: &'a str, division: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = src.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(division))
        .map(|(i, _)| lines[..i].iter().rev().find(|l| l.starts_with('#')).copied().unwrap_or(""))
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
