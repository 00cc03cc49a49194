//! TF32, the input format of [`Expr::Dot`](crate::Expr::Dot) on f32 tiles (Triton's default for f32
//! `tl.dot`, what tensor cores multiply): f32's sign and 8-bit exponent with a 10-bit mantissa.

/// f32 → TF32 as PTX's `cvt.rna.tf32.f32`: the top 10 mantissa bits kept, rounded to nearest
/// with ties **away from zero**; the result is an f32 whose low 13 bits are 0.
///
/// * Subnormals round the same way (a carry may make the smallest normal).
/// * A finite value at or past the midpoint above the largest TF32 (`0x7f7f_e000`, about
///   3.4028e38) rounds to the infinity of its sign; infinities stay.
/// * NaN stays NaN (the canonical quiet NaN here; back ends may keep another payload).
///
/// ```
/// use fuse_ir::tf32;
///
/// // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go away from zero.
/// assert_eq!(tf32::round(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
/// assert_eq!(tf32::round(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
/// // Below the midpoint: down.
/// assert_eq!(tf32::round(1.0 + 2f32.powi(-12)), 1.0);
/// assert_eq!(tf32::round(f32::MAX), f32::INFINITY);
/// assert!(tf32::round(f32::NAN).is_nan());
/// ```
pub fn round(x: f32) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    // Adding half of the dropped field to the magnitude rounds ties away from zero; a carry
    // moves into the exponent (up to the infinity's bit pattern for the largest values).
    let bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    let magnitude = ((bits & 0x7fff_ffff) + 0x1000) & !0x1fff;
    f32::from_bits(sign | magnitude)
}

#[cfg(test)]
mod tests {
    use crate::tf32;

    /// `tf32::round` against the definition in f64: the multiple of the TF32 spacing at `x`'s
    /// exponent nearest to `x`, ties away from zero, over random and boundary bit patterns.
    #[test]
    fn tf32_round_is_nearest_ties_away() {
        let reference = |x: f32| -> f32 {
            let a = f64::from(x.abs());
            let exp = if x.abs() < f32::MIN_POSITIVE { -126 } else { a.log2().floor() as i32 };
            let spacing = 2f64.powi(exp - 10);
            let r = (a / spacing + 0.5).floor() * spacing;
            let r = if r > f64::from(f32::MAX) { f32::INFINITY } else { r as f32 };
            if x.is_sign_negative() {
                -r
            } else {
                r
            }
        };
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut bits: Vec<u32> = (0..200_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u32
            })
            .collect();
        // Exact ties and their neighbours, zero, subnormals, the top of the range.
        for base in [0u32, 0x0000_1000, 0x0080_0000, 0x3f80_0000, 0x7f7f_e000, 0x7f7f_f000, 0x007f_f000] {
            for d in [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x1fff] {
                bits.push(base.wrapping_add(d));
                bits.push((base.wrapping_add(d)) | 0x8000_0000);
            }
        }
        for b in bits {
            let x = f32::from_bits(b);
            if !x.is_finite() {
                continue;
            }
            let (got, want) = (tf32::round(x), reference(x));
            assert_eq!(got.to_bits(), want.to_bits(), "{x:e} ({b:#010x}): got {got:e}, want {want:e}");
            assert_eq!(got.to_bits() & 0x1fff, 0, "{b:#010x}: low bits kept");
        }
        assert_eq!(tf32::round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(tf32::round(f32::from_bits(0x7f80_0001)).is_nan(), "a NaN with a low payload stays NaN");
    }
}
