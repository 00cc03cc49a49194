//! Philox4x32-10 as Random123 and Triton define it, and the uniform-float mapping every back end
//! must reproduce bit for bit.
//!
//! `rand(seed, offset)`: with `o = offset as u64` (signed offsets sign-extend), the counter is
//! `((o >> 2) as u32, (o >> 34) as u32, 0, 0)`, the key `(seed as u32, (seed as u64 >> 32) as u32)`,
//! and the value is `uniform(philox(counter, key)[o & 3])`. So four consecutive offsets that start
//! at a multiple of 4 share one Philox call (the GPU exploits that).
//!
//! ```
//! use fuse_ir::philox;
//!
//! // Random123's known answer for a zero counter and key.
//! assert_eq!(philox::philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
//! let u = philox::rand(42, 7);
//! assert!((0.0..1.0).contains(&u));
//! ```

/// Rounds per Philox call.
pub const ROUNDS: usize = 10;
/// The multiplier of counter word 0 (Random123's `PHILOX_M4x32_0`).
pub const M0: u32 = 0xD251_1F53;
/// The multiplier of counter word 2 (Random123's `PHILOX_M4x32_1`).
pub const M1: u32 = 0xCD9E_8D57;
/// Added to key word 0 after each round (Random123's `PHILOX_W32_0`, the golden ratio).
pub const W0: u32 = 0x9E37_79B9;
/// Added to key word 1 after each round (Random123's `PHILOX_W32_1`, `sqrt(3) - 1`).
pub const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: four random words for a 128-bit `counter` and 64-bit `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for _ in 0..ROUNDS {
        let prod_b = u64::from(M1) * u64::from(c2);
        let prod_a = u64::from(M0) * u64::from(c0);
        let (hi_b, lo_b) = ((prod_b >> 32) as u32, prod_b as u32);
        let (hi_a, lo_a) = ((prod_a >> 32) as u32, prod_a as u32);
        c0 = hi_b ^ c1 ^ k0;
        c1 = lo_b;
        c2 = hi_a ^ c3 ^ k1;
        c3 = lo_a;
        k0 = k0.wrapping_add(W0);
        k1 = k1.wrapping_add(W1);
    }
    [c0, c1, c2, c3]
}

/// Triton's `uint_to_uniform_float`: `i = x as i32; if i < 0 { i = !i }; i as f32 * 4.6566127342e-10`,
/// a float in `[0, 1)`.
pub fn uniform(x: u32) -> f32 {
    let mut i = x as i32;
    if i < 0 {
        i = !i;
    }
    i as f32 * 4.656_612_7e-10_f32
}

/// `rand(seed, offset)` for one lane: a float in `[0, 1)` (see the [module docs](self) for
/// how the offset picks the counter and the word).
pub fn rand(seed: u64, offset: u64) -> f32 {
    let block = offset >> 2;
    let out = philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
    uniform(out[(offset & 3) as usize])
}

/// `rand16(seed, offset)` for one lane: with `o = offset as u64`, the counter is
/// `((o >> 3) as u32, (o >> 35) as u32, 0, 0)`, the key as for [`rand`], and the lane takes
/// 16-bit half-word `o & 7` of the block (word `(o & 7) / 2`, its low half for even `o`, its
/// high half for odd), `h`, and gives [`uniform16`]`(h) = (h + 1/2) / 2^16`. Eight
/// consecutive offsets that start at a multiple of 8 share one Philox call.
pub fn rand16(seed: u64, offset: u64) -> f32 {
    let block = offset >> 3;
    let out = philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
    uniform16(half_word(out, offset))
}

/// Half-word `o & 7` of a Philox block: word `(o & 7) >> 1`, low half for even `o`.
pub fn half_word(block: [u32; 4], o: u64) -> u16 {
    let w = block[((o & 7) >> 1) as usize];
    if o & 1 == 0 {
        w as u16
    } else {
        (w >> 16) as u16
    }
}

/// `(h + 1/2) / 2^16`: the midpoint of the `h`-th of 2^16 equal steps of [0, 1), exact in f32
/// (17 significant bits). Never 0 or 1, so `rand16(..) > p` keeps a lane with probability
/// `1 - m / 2^16`, `m = floor(p * 2^16 + 1/2)` clamped to [0, 2^16]: `p` rounded to the nearest
/// multiple of 2^-16, exactly `p` for such multiples (0 keeps every lane, 1 none).
pub fn uniform16(h: u16) -> f32 {
    (f32::from(h) + 0.5) * (1.0 / 65536.0)
}

/// How many half-words `h` have `uniform16(h) <= p` (so `uniform16(h) > p` iff `h >= m`): the
/// integer form of the `rand16(..) > p` test the GPU uses. A NaN `p` gives 2^16 (the float test
/// is false for every lane).
pub fn rand16_gt_bound(p: f32) -> u32 {
    if p.is_nan() {
        return 65536;
    }
    // p * 2^16 is exact in f64, and so is adding 1/2 for every p that matters (|p| <= 1).
    let m = (f64::from(p) * 65536.0 + 0.5).floor();
    m.clamp(0.0, 65536.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand16_bound_matches_the_float_test() {
        let ps = [
            -1.0f32,
            -0.0,
            0.0,
            1e-30,
            2f32.powi(-18),
            2f32.powi(-17),
            2f32.powi(-16),
            0.1,
            0.25,
            0.5 - 2f32.powi(-25),
            0.5,
            0.5 + 2f32.powi(-17),
            0.9,
            1.0 - 2f32.powi(-17),
            1.0,
            1.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut more = Vec::new();
        for _ in 0..2000 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            more.push(((rng >> 40) as f32) / (1u64 << 24) as f32);
            // and values right at and beside the steps
            let k = (rng >> 48) as f32;
            more.push(k / 65536.0);
            more.push((k + 0.5) / 65536.0);
            more.push(f32::from_bits(((k + 0.5) / 65536.0).to_bits().wrapping_sub(1)));
        }
        for &p in ps.iter().chain(&more) {
            let m = rand16_gt_bound(p);
            for h in 0..=u16::MAX {
                assert_eq!(uniform16(h) > p, u32::from(h) >= m, "p = {p:e}, h = {h}");
            }
        }
    }

    #[test]
    fn rand16_takes_half_words_in_order() {
        let seed = 0x0123_4567_89ab_cdefu64;
        for b in [0u64, 1, 5, 1 << 31, (1 << 32) + 3] {
            let w = philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
            for j in 0..8u64 {
                let want = (w[(j / 2) as usize] >> (16 * (j % 2))) & 0xffff;
                assert_eq!(rand16(seed, 8 * b + j), (want as f32 + 0.5) / 65536.0);
            }
        }
        assert_eq!(uniform16(0), 2f32.powi(-17));
        assert_eq!(uniform16(u16::MAX), 1.0 - 2f32.powi(-17));
    }

    #[test]
    fn known_answer_counter0_key0() {
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
    }

    #[test]
    fn uniform_is_in_unit_interval() {
        for x in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX, 12345] {
            let u = uniform(x);
            assert!((0.0..1.0).contains(&u), "{x:#x} -> {u}");
        }
    }
}
