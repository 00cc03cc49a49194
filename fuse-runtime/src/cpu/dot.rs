//! `dot(a, b[, acc])` ([`fuse_ir::Expr::Dot`]): each output element starts from the accumulator
//! and adds `a[m, k] * b[k, n]` for `k = 0..K` in order, in f32 (product, then sum, each rounded)
//! or in wrapping i32, exactly as the IR specifies, so the CUDA C fallback agrees bit for bit.
//!
//! The loops run `m`, then `k`, then `n` along a row of the output: every element still folds its
//! `k` in increasing order, and the innermost loop walks `b` and the output contiguously.
//!
//! Imports `cpu/elem.rs` and `cpu/error.rs`.

use super::elem::VarValue;
use super::error::CpuError;
use fuse_ir::tf32;

fn bad(msg: impl Into<String>) -> CpuError {
    CpuError::InvalidKernel(msg.into())
}

/// `out = acc + a @ b` for `a` of dims `[m, k]` and `b` of `[k, n]` (the checker's shapes, checked
/// again in `check.rs`).
pub(super) fn dot(
    a: &VarValue,
    b: &VarValue,
    acc: Option<&VarValue>,
    a_dims: &[usize],
    b_dims: &[usize],
    out: &mut VarValue,
) -> Result<(), CpuError> {
    let (&[m, k], &[k2, n]) = (a_dims, b_dims) else {
        return Err(bad(format!("dot of dims {a_dims:?} and {b_dims:?}")));
    };
    if k != k2 || a.len() != m * k || b.len() != k * n || acc.is_some_and(|c| c.len() != m * n) {
        return Err(bad(format!("dot of dims {a_dims:?} and {b_dims:?} with mismatched data")));
    }
    let widen = |d: &VarValue| -> Option<Vec<f32>> {
        Some(match d {
            VarValue::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            VarValue::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
            VarValue::F32(v) => v.iter().map(|&x| tf32::round(x)).collect(),
            _ => return None,
        })
    };
    match (a, b, out) {
        (VarValue::I8(a), VarValue::I8(b), VarValue::I32(out)) => {
            start_from(out, acc, m * n, |d| if let VarValue::I32(v) = d { Some(v) } else { None })?;
            product(a, b, out, m, k, n, |r: i32, x: i8, y: i8| {
                r.wrapping_add(i32::from(x).wrapping_mul(i32::from(y)))
            });
            Ok(())
        }
        (a, b, VarValue::F32(out)) if a.dtype() == b.dtype() => {
            let (Some(a), Some(b)) = (widen(a), widen(b)) else {
                return Err(bad(format!("dot of {} tiles", a.dtype())));
            };
            start_from(out, acc, m * n, |d| if let VarValue::F32(v) = d { Some(v) } else { None })?;
            product(&a, &b, out, m, k, n, |r: f32, x: f32, y: f32| r + x * y);
            Ok(())
        }
        (a, b, out) => Err(bad(format!("dot of {} and {} into {}", a.dtype(), b.dtype(), out.dtype()))),
    }
}

/// The output's starting values: the accumulator's, else zeros.
fn start_from<T: Copy + Default>(
    out: &mut Vec<T>,
    acc: Option<&VarValue>,
    len: usize,
    typed: impl Fn(&VarValue) -> Option<&Vec<T>>,
) -> Result<(), CpuError> {
    out.clear();
    match acc {
        None => out.resize(len, T::default()),
        Some(d) => out.extend_from_slice(typed(d).ok_or_else(|| bad("dot accumulator of another dtype"))?),
    }
    Ok(())
}

/// `out[i, j] = step(out[i, j], a[i, kk], b[kk, j])` for `kk = 0..k` in order.
#[inline(always)]
fn product<X: Copy, R: Copy>(
    a: &[X],
    b: &[X],
    out: &mut [R],
    m: usize,
    k: usize,
    n: usize,
    step: impl Fn(R, X, X) -> R,
) {
    for i in 0..m {
        let row = &mut out[i * n..(i + 1) * n];
        for kk in 0..k {
            let x = a[i * k + kk];
            let b_row = &b[kk * n..(kk + 1) * n];
            for (r, &y) in row.iter_mut().zip(b_row) {
                *r = step(*r, x, y);
            }
        }
    }
}
