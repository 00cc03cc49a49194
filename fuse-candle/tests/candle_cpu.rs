//! The fused LayerNorm op `fuse_candle::ops::FusedLayerNorm` and the crate's helpers on candle's
//! CPU device (fuse's interpreter runs the kernel): checked against candle's own ops in f64 on
//! fresh random inputs (seed printed; `FUSE_TEST_SEED` replays), with views that start inside
//! their storage, non-contiguous views, wrong dtypes and wrong shapes. The op's output starts
//! NaN-poisoned and NaN never passes a comparison.

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Shape, Tensor};
use fuse::fused_kernel;
use fuse_candle::ops::FusedLayerNorm;
use fuse_candle::{contiguous_range, cpu_slice, KernelResultExt};
use fuse_testkit::candle::{candle_layernorm, error_ratio, tolerance, Rng};
use std::cell::RefCell;

const EPS: f64 = 1e-5;
const OP: FusedLayerNorm = FusedLayerNorm { eps: EPS as f32 };

thread_local!(static RNG: RefCell<Rng> = RefCell::new(Rng::fresh("candle_cpu")));

/// A random tensor: normal(shift, scale) in `dtype` on the CPU.
fn random(dims: &[usize], scale: f64, shift: f64, dtype: DType) -> Tensor {
    RNG.with(|r| r.borrow_mut().tensor(dims, scale, shift, dtype, &Device::Cpu)).unwrap()
}

/// Random LayerNorm inputs: x with a non-zero mean, weight around 1, bias around 0.
fn inputs(dims: &[usize], dtype: DType) -> (Tensor, Tensor, Tensor) {
    let cols = *dims.last().unwrap();
    (random(dims, 2.0, 0.5, dtype), random(&[cols], 0.3, 1.0, dtype), random(&[cols], 0.5, 0.0, dtype))
}

/// The fused op on (x, w, b) is within `dtype`'s tolerance of candle's ops in f64.
fn assert_matches_candle(what: &str, x: &Tensor, w: &Tensor, b: &Tensor) {
    let got = x.apply_op3_no_bwd(w, b, &OP).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.dims(), x.dims(), "{what}: shape");
    assert_eq!(got.dtype(), x.dtype(), "{what}: dtype");
    let want = candle_layernorm(x, w, b, EPS).unwrap();
    let (atol, rtol) = tolerance(x.dtype());
    let (ratio, max_abs) = error_ratio(&got, &want, atol, rtol).unwrap();
    assert!(
        ratio <= 1.0,
        "{what}: max abs error {max_abs:e} is {ratio:.2} times the tolerance ({atol:e} + {rtol:e}|want|)"
    );
}

/// The message of an error the op must return.
fn op_error(x: &Tensor, w: &Tensor, b: &Tensor) -> String {
    match x.apply_op3_no_bwd(w, b, &OP) {
        Ok(_) => panic!(
            "expected an error for x {:?} {:?}, w {:?}, b {:?}",
            x.dims(),
            x.dtype(),
            w.dims(),
            b.dims()
        ),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "the error should mention {p:?}:\n{msg}");
    }
}

#[test]
fn matches_candle_ops_f32_several_shapes() {
    for dims in [&[1, 1][..], &[3, 7], &[17, 100], &[64, 1000], &[2, 3, 50], &[5, 4096], &[2, 16384], &[9]] {
        let (x, w, b) = inputs(dims, DType::F32);
        assert_matches_candle(&format!("f32 {dims:?}"), &x, &w, &b);
    }
}

#[test]
fn matches_candle_ops_f16_and_bf16() {
    for dtype in [DType::F16, DType::BF16] {
        for dims in [&[1, 2][..], &[13, 300], &[4, 2, 768], &[3, 4096]] {
            let (x, w, b) = inputs(dims, dtype);
            assert_matches_candle(&format!("{dtype:?} {dims:?}"), &x, &w, &b);
        }
    }
}

#[test]
fn honours_the_start_offset_of_narrowed_tensors() {
    for dtype in [DType::F32, DType::F16] {
        let (rows, cols) = (37, 300);
        let big = random(&[rows + 10, cols], 2.0, 0.5, dtype);
        let x = big.narrow(0, 7, rows).unwrap();
        assert_eq!(x.layout().start_offset(), 7 * cols);
        assert!(x.is_contiguous());
        // weight and bias are views into the middle of larger vectors too.
        let w = random(&[cols + 50], 0.3, 1.0, dtype).narrow(0, 20, cols).unwrap();
        let b = random(&[2 * cols], 0.5, 0.0, dtype).narrow(0, cols, cols).unwrap();
        assert!(w.layout().start_offset() == 20 && b.layout().start_offset() == cols);
        assert_matches_candle(&format!("{dtype:?} narrowed"), &x, &w, &b);
        // The rows before and after the view are not read: making them NaN changes nothing.
        let got = x.apply_op3_no_bwd(&w, &b, &OP).unwrap();
        let mut perturbed = big.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap();
        for (r, row) in perturbed.iter_mut().enumerate() {
            if !(7..7 + rows).contains(&r) {
                row.iter_mut().for_each(|v| *v = f32::NAN);
            }
        }
        let poisoned = Tensor::new(perturbed, &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
        let x2 = poisoned.narrow(0, 7, rows).unwrap();
        let got2 = x2.apply_op3_no_bwd(&w, &b, &OP).unwrap();
        let bits =
            |t: &Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(bits(&got2), bits(&got), "{dtype:?}: rows outside the view changed the result");
    }
}

#[test]
fn a_three_dimensional_view_with_an_offset() {
    let big = random(&[4, 6, 128], 1.0, -1.0, DType::F32);
    let x = big.narrow(0, 1, 2).unwrap(); // [2, 6, 128], starts at element 768
    assert_eq!(x.layout().start_offset(), 6 * 128);
    let (_, w, b) = inputs(&[1, 128], DType::F32);
    assert_matches_candle("f32 [2, 6, 128] at offset 768", &x, &w, &b);
}

#[test]
fn non_contiguous_input_is_an_error_naming_the_argument() {
    let (rows, cols) = (20, 64);
    let x = random(&[cols, rows], 2.0, 0.5, DType::F32).t().unwrap(); // [rows, cols], column-major
    assert_eq!(x.dims(), &[rows, cols][..]);
    assert!(!x.is_contiguous());
    let (w64, b64) = (random(&[cols], 0.3, 1.0, DType::F32), random(&[cols], 0.5, 0.0, DType::F32));
    let msg = op_error(&x, &w64, &b64);
    assert_mentions(&msg, &["`fused-layernorm`", "argument `x`", "not contiguous", ".contiguous()"]);
    // The documented remedy works and gives candle's answer.
    assert_matches_candle("transposed, then .contiguous()", &x.contiguous().unwrap(), &w64, &b64);
    // A narrow along the last dimension is not contiguous either.
    let (big, _, _) = inputs(&[rows, cols + 8], DType::F32);
    let msg = op_error(&big.narrow(1, 4, cols).unwrap(), &w64, &b64);
    assert_mentions(&msg, &["argument `x`", "not contiguous"]);
    // A strided weight (a column of a matrix) is named as such.
    let m = random(&[cols, 3], 1.0, 0.0, DType::F32);
    let column = m.narrow(1, 1, 1).unwrap().squeeze(1).unwrap();
    assert!(!column.is_contiguous());
    let (x_ok, _, _) = inputs(&[rows, cols], DType::F32);
    assert_mentions(&op_error(&x_ok, &column, &b64), &["argument `weight`", "not contiguous"]);
}

#[test]
fn wrong_dtypes_are_errors_naming_the_dtypes() {
    let (x, w, b) = inputs(&[4, 32], DType::F64);
    assert_mentions(&op_error(&x, &w, &b), &["`fused-layernorm`", "argument `x`", "F64", "F32, F16, BF16"]);
    let (x, w, b) = inputs(&[4, 32], DType::F32);
    let msg = op_error(&x, &w.to_dtype(DType::F16).unwrap(), &b);
    assert_mentions(&msg, &["argument `weight`", "F16", "written for F32"]);
    let msg = op_error(&x.to_dtype(DType::BF16).unwrap(), &w.to_dtype(DType::BF16).unwrap(), &b);
    assert_mentions(&msg, &["argument `bias`", "F32", "written for BF16"]);
    let xi = Tensor::zeros((4, 32), DType::U32, &Device::Cpu).unwrap();
    assert_mentions(&op_error(&xi, &w, &b), &["U32"]);
}

#[test]
fn wrong_shapes_are_errors() {
    let (x, w, b) = inputs(&[4, 32], DType::F32);
    let w33 = random(&[33], 1.0, 0.0, DType::F32);
    assert_mentions(&op_error(&x, &w33, &b), &["weight", "[33]", "32"]);
    let b2 = b.reshape((1, 32)).unwrap();
    assert_mentions(&op_error(&x, &w, &b2), &["bias", "[1, 32]"]);
    let scalar = Tensor::new(1.0f32, &Device::Cpu).unwrap();
    assert_mentions(&op_error(&scalar, &w, &b), &["scalar"]);
    let (wide, ww, wb) = inputs(&[1, 16385], DType::F32);
    assert_mentions(&op_error(&wide, &ww, &wb), &["16385", "16384"]);
}

#[test]
fn empty_rows_give_an_empty_result() {
    let x = Tensor::zeros((0, 16), DType::F32, &Device::Cpu).unwrap();
    let (_, w, b) = inputs(&[1, 16], DType::F32);
    let y = x.apply_op3_no_bwd(&w, &b, &OP).unwrap();
    assert_eq!(y.dims(), &[0, 16][..]);
}

/// The checks can fail: a LayerNorm that is slightly wrong (unbiased variance, a bias off by
/// 1e-3, a NaN) is outside the tolerance the op is held to.
#[test]
fn the_comparison_rejects_slightly_wrong_results() {
    let (x, w, b) = inputs(&[16, 256], DType::F32);
    let want = candle_layernorm(&x, &w, &b, EPS).unwrap();
    let (atol, rtol) = tolerance(DType::F32);
    let unbiased = {
        let x = x.to_dtype(DType::F64).unwrap();
        let mean = x.mean_keepdim(1).unwrap();
        let xc = x.broadcast_sub(&mean).unwrap();
        let var = (xc.sqr().unwrap().sum_keepdim(1).unwrap() / 255.0).unwrap();
        let rstd = (var + EPS).unwrap().sqrt().unwrap().recip().unwrap();
        let w = w.to_dtype(DType::F64).unwrap();
        let b = b.to_dtype(DType::F64).unwrap();
        xc.broadcast_mul(&rstd).unwrap().broadcast_mul(&w).unwrap().broadcast_add(&b).unwrap()
    };
    assert!(error_ratio(&unbiased, &want, atol, rtol).unwrap().0 > 1.0);
    let shifted = (want.clone() + 1e-3).unwrap();
    assert!(error_ratio(&shifted, &want, atol, rtol).unwrap().0 > 1.0);
    let mut v = want.flatten_all().unwrap().to_vec1::<f64>().unwrap();
    v[100] = f64::NAN;
    let with_nan = Tensor::from_vec(v, want.dims(), &Device::Cpu).unwrap();
    assert_eq!(error_ratio(&with_nan, &want, 1.0, 1.0).unwrap().0, f64::INFINITY);
    for dtype in [DType::F16, DType::BF16] {
        let (atol, rtol) = tolerance(dtype);
        let half_b = (b.to_dtype(dtype).unwrap().to_dtype(DType::F32).unwrap() + 0.05).unwrap();
        let off = candle_layernorm(&x, &w, &half_b, EPS).unwrap();
        assert!(error_ratio(&off, &want, atol, rtol).unwrap().0 > 1.0, "{dtype:?}");
    }
}

// ---- The helpers themselves ----

#[test]
fn contiguous_range_follows_the_start_offset() {
    let l = Layout::contiguous_with_offset((3, 4), 10);
    assert_eq!(contiguous_range("op", "x", &l).unwrap(), 10..22);
    let t = Layout::new(Shape::from((4, 3)), vec![1, 4], 0);
    let msg = contiguous_range("op", "x", &t).unwrap_err().to_string();
    assert_mentions(&msg, &["`op`", "argument `x`", "not contiguous", "[4, 3]", "[1, 4]", ".contiguous()"]);
}

#[test]
fn cpu_slice_is_the_views_elements_in_place() {
    let storage = CpuStorage::F32((0..20).map(|i| i as f32).collect());
    let l = Layout::contiguous_with_offset((2, 3), 5);
    let s = cpu_slice::<f32>("op", "x", &storage, &l).unwrap();
    assert_eq!(s, &[5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
    let CpuStorage::F32(all) = &storage else { unreachable!() };
    assert!(std::ptr::eq(&all[5], &s[0]), "no copy");
    // Past the end of the storage, the wrong type: errors, not panics.
    let past = Layout::contiguous_with_offset((2, 3), 16);
    assert_mentions(
        &cpu_slice::<f32>("op", "x", &storage, &past).unwrap_err().to_string(),
        &["16..22", "20"],
    );
    let msg = cpu_slice::<i32>("op", "x", &storage, &l).unwrap_err().to_string();
    assert_mentions(&msg, &["F32", "written for I32"]);
}

#[test]
fn sizes_that_do_not_fit_are_errors() {
    assert_eq!(fuse_candle::to_i32("op", "cols", 7).unwrap(), 7);
    assert_mentions(
        &fuse_candle::to_i32("op", "cols", 1 << 31).unwrap_err().to_string(),
        &["cols", "2147483648", "i32"],
    );
    assert_mentions(&fuse_candle::to_u32("op", "rows", 1 << 32).unwrap_err().to_string(), &["rows", "u32"]);
}

/// Reads `n` elements from a buffer that may be shorter: out of bounds when it is.
#[fused_kernel]
fn copy_n<const BLOCK: usize>(x: *const f32, y: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    store(y + offs, load(x + offs, m), m);
}

/// A `CustomOp1` that claims its input has 8 more elements than it has: fuse's out-of-bounds
/// error must reach the caller as a candle error naming the op.
struct Overreach;
impl CustomOp1 for Overreach {
    fn name(&self) -> &'static str {
        "overreach"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = cpu_slice::<f32>(self.name(), "x", s, l)?;
        let mut y = vec![0.0f32; x.len() + 8];
        let n = fuse_candle::to_i32(self.name(), "n", x.len() + 8)?;
        copy_n::launch::<64>(&fuse_candle::cpu_device(), 1, x, &mut y, n).in_op(self.name())?;
        Ok((fuse_candle::cpu_storage(y), Shape::from(x.len() + 8)))
    }
}

#[test]
fn a_fuse_error_becomes_a_candle_error_naming_the_op() {
    let x = random(&[10], 1.0, 0.0, DType::F32);
    let msg = x.apply_op1_no_bwd(&Overreach).unwrap_err().to_string();
    assert_mentions(&msg, &["fuse kernel in candle op `overreach`", "out of bounds", "`x`", "index 10"]);
}
