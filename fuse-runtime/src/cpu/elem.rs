//! Typed tile storage, element conversions and the views of kernel buffers.
//!
//! Every interpreter operation dispatches on the dtype once per tile (the [`dispatch!`] macro
//! turns a runtime `DType` into a type alias) and then runs one monomorphised loop over plain
//! slices, so there is no per-element matching.

use fuse_ir::DType;
use half::{bf16, f16};
use std::mem::{align_of, size_of};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

/// The value of one var: scalars have length 1, tiles their length.
#[derive(Clone, Debug)]
pub(crate) enum VarValue {
    Bool(Vec<bool>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
}

impl VarValue {
    pub(crate) fn new(dtype: DType, len: usize) -> VarValue {
        match dtype {
            DType::Bool => VarValue::Bool(vec![false; len]),
            DType::I8 => VarValue::I8(vec![0; len]),
            DType::U8 => VarValue::U8(vec![0; len]),
            DType::I32 => VarValue::I32(vec![0; len]),
            DType::U32 => VarValue::U32(vec![0; len]),
            DType::I64 => VarValue::I64(vec![0; len]),
            DType::U64 => VarValue::U64(vec![0; len]),
            DType::F16 => VarValue::F16(vec![f16::ZERO; len]),
            DType::BF16 => VarValue::BF16(vec![bf16::ZERO; len]),
            DType::F32 => VarValue::F32(vec![0.0; len]),
        }
    }

    pub(crate) fn dtype(&self) -> DType {
        match self {
            VarValue::Bool(_) => DType::Bool,
            VarValue::I8(_) => DType::I8,
            VarValue::U8(_) => DType::U8,
            VarValue::I32(_) => DType::I32,
            VarValue::U32(_) => DType::U32,
            VarValue::I64(_) => DType::I64,
            VarValue::U64(_) => DType::U64,
            VarValue::F16(_) => DType::F16,
            VarValue::BF16(_) => DType::BF16,
            VarValue::F32(_) => DType::F32,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            VarValue::Bool(v) => v.len(),
            VarValue::I8(v) => v.len(),
            VarValue::U8(v) => v.len(),
            VarValue::I32(v) => v.len(),
            VarValue::U32(v) => v.len(),
            VarValue::I64(v) => v.len(),
            VarValue::U64(v) => v.len(),
            VarValue::F16(v) => v.len(),
            VarValue::BF16(v) => v.len(),
            VarValue::F32(v) => v.len(),
        }
    }

    /// The first element of an integer value, widened exactly (loop bounds).
    pub(crate) fn first_int(&self) -> Option<i128> {
        Some(match self {
            VarValue::I8(v) => i128::from(*v.first()?),
            VarValue::U8(v) => i128::from(*v.first()?),
            VarValue::I32(v) => i128::from(*v.first()?),
            VarValue::U32(v) => i128::from(*v.first()?),
            VarValue::I64(v) => i128::from(*v.first()?),
            VarValue::U64(v) => i128::from(*v.first()?),
            _ => return None,
        })
    }

    /// Sets the first element of an integer value (the loop variable); `v` is in range.
    pub(crate) fn set_first_int(&mut self, v: i128) -> Option<()> {
        match self {
            VarValue::I8(d) => *d.first_mut()? = v as i8,
            VarValue::U8(d) => *d.first_mut()? = v as u8,
            VarValue::I32(d) => *d.first_mut()? = v as i32,
            VarValue::U32(d) => *d.first_mut()? = v as u32,
            VarValue::I64(d) => *d.first_mut()? = v as i64,
            VarValue::U64(d) => *d.first_mut()? = v as u64,
            _ => return None,
        }
        Some(())
    }
}

/// `dispatch!(all dt, T => body, else fallback)`: runs `body` with `T` a type alias for the
/// element type of `dt` (one monomorphised copy per type). Sets: `all`, `num` (arithmetic compute
/// types), `cmp` (compute types), `bits` (bool and ints), `int`, `offset` (integer compute types).
macro_rules! dispatch {
    (@arms $dt:expr, $T:ident, $body:expr, $else:expr; $($V:ident => $t:ty),*) => {{
        #[allow(unreachable_patterns)]
        let r = match $dt {
            $(::fuse_ir::DType::$V => {
                #[allow(dead_code)]
                type $T = $t;
                $body
            })*
            _ => $else,
        };
        r
    }};
    (all $dt:expr, $T:ident => $body:expr, else $else:expr) => {
        dispatch!(@arms $dt, $T, $body, $else; Bool => bool, I8 => i8, U8 => u8, I32 => i32,
            U32 => u32, I64 => i64, U64 => u64, F16 => ::half::f16, BF16 => ::half::bf16, F32 => f32)
    };
    (num $dt:expr, $T:ident => $body:expr, else $else:expr) => {
        dispatch!(@arms $dt, $T, $body, $else; I32 => i32, U32 => u32, I64 => i64, U64 => u64, F32 => f32)
    };
    (cmp $dt:expr, $T:ident => $body:expr, else $else:expr) => {
        dispatch!(@arms $dt, $T, $body, $else; Bool => bool, I32 => i32, U32 => u32, I64 => i64,
            U64 => u64, F32 => f32)
    };
    (bits $dt:expr, $T:ident => $body:expr, else $else:expr) => {
        dispatch!(@arms $dt, $T, $body, $else; Bool => bool, I8 => i8, U8 => u8, I32 => i32,
            U32 => u32, I64 => i64, U64 => u64)
    };
    (int $dt:expr, $T:ident => $body:expr, else $else:expr) => {
        dispatch!(@arms $dt, $T, $body, $else; I8 => i8, U8 => u8, I32 => i32, U32 => u32,
            I64 => i64, U64 => u64)
    };
}
pub(crate) use dispatch;

/// f32 → f16, round to nearest even; every NaN becomes the canonical `0x7fff` (what the GPU's
/// `cvt.rn.f16.f32` gives; `half` alone would keep the sign and payload).
#[inline(always)]
pub(crate) fn f32_to_f16(x: f32) -> f16 {
    if x.is_nan() {
        f16::from_bits(0x7fff)
    } else {
        f16::from_f32(x)
    }
}

/// f32 → bf16, round to nearest even; NaN → canonical `0x7fff` (as CUDA's `__float2bfloat16_rn`).
#[inline(always)]
pub(crate) fn f32_to_bf16(x: f32) -> bf16 {
    if x.is_nan() {
        bf16::from_bits(0x7fff)
    } else {
        bf16::from_f32(x)
    }
}

/// An element type of tiles and buffers.
pub(crate) trait Elem: Copy + Default + PartialEq + PartialOrd + Send + Sync + 'static {
    const DT: DType;
    /// The unsigned integer of the same width: how the element lives in a buffer.
    type Bits: Bits;
    fn slice(d: &VarValue) -> Option<&[Self]>;
    fn vec_mut(d: &mut VarValue) -> Option<&mut Vec<Self>>;
    fn from_bits(b: Self::Bits) -> Self;
    fn to_bits(self) -> Self::Bits;
    fn from_bool(b: bool) -> Self;
    /// From a (sign-extended) signed integer: ints wrap, floats round to nearest even.
    fn from_i64(v: i64) -> Self;
    fn from_u64(v: u64) -> Self;
    /// From f32: ints truncate and saturate (NaN → 0), f16/bf16 round to nearest even.
    fn from_f32(v: f32) -> Self;
    /// Literals.
    fn from_f64(v: f64) -> Self;
    /// The IR's `Cast`.
    fn cast<D: Elem>(self) -> D;
    /// Integers: the value as i64 (signed sign-extend, unsigned reinterpret). Others: unspecified.
    fn as_i64(self) -> i64;
}

macro_rules! int_elem {
    ($t:ty, $V:ident, $bits:ty, $signed:expr) => {
        impl Elem for $t {
            const DT: DType = DType::$V;
            type Bits = $bits;
            #[inline(always)]
            fn slice(d: &VarValue) -> Option<&[Self]> {
                if let VarValue::$V(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn vec_mut(d: &mut VarValue) -> Option<&mut Vec<Self>> {
                if let VarValue::$V(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn from_bits(b: $bits) -> Self {
                b as $t
            }
            #[inline(always)]
            fn to_bits(self) -> $bits {
                self as $bits
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                b as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                if $signed {
                    D::from_i64(self as i64)
                } else {
                    D::from_u64(self as u64)
                }
            }
            #[inline(always)]
            fn as_i64(self) -> i64 {
                self as i64
            }
        }
    };
}
int_elem!(i8, I8, u8, true);
int_elem!(u8, U8, u8, false);
int_elem!(i32, I32, u32, true);
int_elem!(u32, U32, u32, false);
int_elem!(i64, I64, u64, true);
int_elem!(u64, U64, u64, false);

impl Elem for bool {
    const DT: DType = DType::Bool;
    type Bits = u8;
    #[inline(always)]
    fn slice(d: &VarValue) -> Option<&[Self]> {
        if let VarValue::Bool(v) = d {
            Some(v)
        } else {
            None
        }
    }
    #[inline(always)]
    fn vec_mut(d: &mut VarValue) -> Option<&mut Vec<Self>> {
        if let VarValue::Bool(v) = d {
            Some(v)
        } else {
            None
        }
    }
    #[inline(always)]
    fn from_bits(b: u8) -> Self {
        b != 0
    }
    #[inline(always)]
    fn to_bits(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn from_bool(b: bool) -> Self {
        b
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn cast<D: Elem>(self) -> D {
        D::from_bool(self)
    }
    #[inline(always)]
    fn as_i64(self) -> i64 {
        self as i64
    }
}

impl Elem for f32 {
    const DT: DType = DType::F32;
    type Bits = u32;
    #[inline(always)]
    fn slice(d: &VarValue) -> Option<&[Self]> {
        if let VarValue::F32(v) = d {
            Some(v)
        } else {
            None
        }
    }
    #[inline(always)]
    fn vec_mut(d: &mut VarValue) -> Option<&mut Vec<Self>> {
        if let VarValue::F32(v) = d {
            Some(v)
        } else {
            None
        }
    }
    #[inline(always)]
    fn from_bits(b: u32) -> Self {
        f32::from_bits(b)
    }
    #[inline(always)]
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
    #[inline(always)]
    fn from_bool(b: bool) -> Self {
        b as u8 as f32
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn cast<D: Elem>(self) -> D {
        D::from_f32(self)
    }
    #[inline(always)]
    fn as_i64(self) -> i64 {
        self as i64
    }
}

macro_rules! half_elem {
    ($t:ty, $V:ident, $round:ident) => {
        impl Elem for $t {
            const DT: DType = DType::$V;
            type Bits = u16;
            #[inline(always)]
            fn slice(d: &VarValue) -> Option<&[Self]> {
                if let VarValue::$V(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn vec_mut(d: &mut VarValue) -> Option<&mut Vec<Self>> {
                if let VarValue::$V(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn from_bits(b: u16) -> Self {
                <$t>::from_bits(b)
            }
            #[inline(always)]
            fn to_bits(self) -> u16 {
                <$t>::to_bits(self)
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                if b {
                    <$t>::ONE
                } else {
                    <$t>::ZERO
                }
            }
            /// Through f32 (as the CUDA C `__float2half_rn((float)x)` does): may round twice
            /// for |v| > 2^24.
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                $round(v as f32)
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                $round(v as f32)
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                $round(v)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                if v.is_nan() {
                    <$t>::from_bits(0x7fff)
                } else {
                    <$t>::from_f64(v)
                }
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                D::from_f32(self.to_f32())
            }
            #[inline(always)]
            fn as_i64(self) -> i64 {
                self.to_f32() as i64
            }
        }
    };
}
half_elem!(f16, F16, f32_to_f16);
half_elem!(bf16, BF16, f32_to_bf16);

/// Arithmetic on the compute types i32, u32, i64, u64, f32 with the IR's semantics.
pub(crate) trait Num: Elem {
    /// Identity of `max` (floats: NaN, which maxNum ignores).
    const MAX_ID: Self;
    const MIN_ID: Self;
    fn vadd(self, o: Self) -> Self;
    fn vsub(self, o: Self) -> Self;
    fn vmul(self, o: Self) -> Self;
    fn vdiv(self, o: Self) -> Self;
    fn vrem(self, o: Self) -> Self;
    fn vmax(self, o: Self) -> Self;
    fn vmin(self, o: Self) -> Self;
    fn vneg(self) -> Self;
    fn vabs(self) -> Self;
}

macro_rules! int_num {
    ($t:ty, $abs:expr) => {
        impl Num for $t {
            const MAX_ID: Self = <$t>::MIN;
            const MIN_ID: Self = <$t>::MAX;
            #[inline(always)]
            fn vadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn vsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn vmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn vdiv(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline(always)]
            fn vrem(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_rem(o)
                }
            }
            #[inline(always)]
            fn vmax(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            #[inline(always)]
            fn vmin(self, o: Self) -> Self {
                Ord::min(self, o)
            }
            #[inline(always)]
            fn vneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn vabs(self) -> Self {
                let f: fn(Self) -> Self = $abs;
                f(self)
            }
        }
    };
}
int_num!(i32, i32::wrapping_abs);
int_num!(i64, i64::wrapping_abs);
int_num!(u32, |x| x);
int_num!(u64, |x| x);

impl Num for f32 {
    const MAX_ID: Self = f32::NAN;
    const MIN_ID: Self = f32::NAN;
    #[inline(always)]
    fn vadd(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn vsub(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    fn vmul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn vdiv(self, o: Self) -> Self {
        self / o
    }
    /// `fmodf` (exact; Rust's `%` on floats is fmod).
    #[inline(always)]
    fn vrem(self, o: Self) -> Self {
        self % o
    }
    /// IEEE maxNum: a NaN operand is ignored.
    #[inline(always)]
    fn vmax(self, o: Self) -> Self {
        f32::max(self, o)
    }
    #[inline(always)]
    fn vmin(self, o: Self) -> Self {
        f32::min(self, o)
    }
    #[inline(always)]
    fn vneg(self) -> Self {
        -self
    }
    #[inline(always)]
    fn vabs(self) -> Self {
        f32::abs(self)
    }
}

/// `& | ^ !`: logical on bool, bitwise on ints.
pub(crate) trait Bitwise: Elem {
    fn vand(self, o: Self) -> Self;
    fn vor(self, o: Self) -> Self;
    fn vxor(self, o: Self) -> Self;
    fn vnot(self) -> Self;
}
macro_rules! bitwise {
    ($($t:ty),*) => {$(
        impl Bitwise for $t {
            #[inline(always)]
            fn vand(self, o: Self) -> Self { self & o }
            #[inline(always)]
            fn vor(self, o: Self) -> Self { self | o }
            #[inline(always)]
            fn vxor(self, o: Self) -> Self { self ^ o }
            #[inline(always)]
            fn vnot(self) -> Self { !self }
        }
    )*};
}
bitwise!(bool, i8, u8, i32, u32, i64, u64);

// ---------------------------------------------------------------------------------------------
// Buffers.

/// A kernel buffer, viewed as integers of its element's width. Read-only buffers are plain
/// slices; writable ones are slices of atomics (shared by programs on different threads; every
/// access is a `Relaxed` load/store, so even a racy user kernel is free of data-race UB).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mem<'a> {
    R8(&'a [u8]),
    R16(&'a [u16]),
    R32(&'a [u32]),
    R64(&'a [u64]),
    W8(&'a [AtomicU8]),
    W16(&'a [AtomicU16]),
    W32(&'a [AtomicU32]),
    W64(&'a [AtomicU64]),
}

impl Mem<'_> {
    /// Length in elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Mem::R8(s) => s.len(),
            Mem::R16(s) => s.len(),
            Mem::R32(s) => s.len(),
            Mem::R64(s) => s.len(),
            Mem::W8(s) => s.len(),
            Mem::W16(s) => s.len(),
            Mem::W32(s) => s.len(),
            Mem::W64(s) => s.len(),
        }
    }
}

// The atomics must have the layout of the integers they stand for (the alignment of the byte
// slice is checked against the atomic's alignment at run time).
const _: () = {
    assert!(size_of::<AtomicU8>() == size_of::<u8>() && align_of::<AtomicU8>() >= align_of::<u8>());
    assert!(size_of::<AtomicU16>() == size_of::<u16>() && align_of::<AtomicU16>() >= align_of::<u16>());
    assert!(size_of::<AtomicU32>() == size_of::<u32>() && align_of::<AtomicU32>() >= align_of::<u32>());
    assert!(size_of::<AtomicU64>() == size_of::<u64>() && align_of::<AtomicU64>() >= align_of::<u64>());
};

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// u8/u16/u32/u64: plain integers, any bit pattern valid.
pub(crate) trait Bits: sealed::Sealed + Copy + Send + Sync + 'static {
    type Atomic: Send + Sync + 'static;
    fn ro<'a>(m: &Mem<'a>) -> Option<&'a [Self]>;
    fn rw<'a>(m: &Mem<'a>) -> Option<&'a [Self::Atomic]>;
    fn store(a: &Self::Atomic, v: Self);
    fn aload(a: &Self::Atomic) -> Self;
}

macro_rules! bits {
    ($t:ty, $A:ty, $R:ident, $W:ident) => {
        impl Bits for $t {
            type Atomic = $A;
            #[inline(always)]
            fn ro<'a>(m: &Mem<'a>) -> Option<&'a [Self]> {
                if let Mem::$R(s) = *m {
                    Some(s)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn rw<'a>(m: &Mem<'a>) -> Option<&'a [$A]> {
                if let Mem::$W(s) = *m {
                    Some(s)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn store(a: &$A, v: $t) {
                a.store(v, Relaxed)
            }
            #[inline(always)]
            fn aload(a: &$A) -> $t {
                a.load(Relaxed)
            }
        }
    };
}

/// Something elements can be loaded from: a plain slice or a slice of atomics.
pub(crate) trait Source<B> {
    fn slen(&self) -> usize;
    fn get(&self, i: usize) -> B;
    /// `out[i] = mask[i] ? self[start + i] : other[i]` where the whole window
    /// `start..start + out.len()` is in bounds (so reading a masked-off lane is harmless and the
    /// loop needs no per-lane checks).
    fn window<T: Elem<Bits = B>>(&self, start: usize, mask: Option<&[bool]>, other: Bc<'_, T>, out: &mut [T]);
}

/// A scalar broadcast or a tile.
#[derive(Clone, Copy)]
pub(crate) enum Bc<'a, T> {
    One(T),
    All(&'a [T]),
}

#[inline(always)]
fn window<T: Elem, X>(
    win: &[X],
    get: impl Fn(&X) -> T::Bits,
    mask: Option<&[bool]>,
    other: Bc<'_, T>,
    out: &mut [T],
) {
    let win = &win[..out.len()];
    match (mask, other) {
        (None, _) => {
            for (o, x) in out.iter_mut().zip(win) {
                *o = T::from_bits(get(x));
            }
        }
        (Some(m), Bc::One(v)) => {
            for ((o, x), &k) in out.iter_mut().zip(win).zip(m) {
                let y = T::from_bits(get(x));
                *o = if k { y } else { v };
            }
        }
        (Some(m), Bc::All(t)) => {
            for (((o, x), &k), &v) in out.iter_mut().zip(win).zip(m).zip(t) {
                let y = T::from_bits(get(x));
                *o = if k { y } else { v };
            }
        }
    }
}

impl<B: Bits> Source<B> for [B] {
    #[inline(always)]
    fn slen(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn get(&self, i: usize) -> B {
        self[i]
    }
    #[inline(always)]
    fn window<T: Elem<Bits = B>>(
        &self,
        start: usize,
        mask: Option<&[bool]>,
        other: Bc<'_, T>,
        out: &mut [T],
    ) {
        window(&self[start..], |x| *x, mask, other, out)
    }
}

/// A writable buffer seen as a load source (`Relaxed` atomic loads).
pub(crate) struct Atomics<'a, B: Bits>(pub &'a [B::Atomic]);

impl<B: Bits> Source<B> for Atomics<'_, B> {
    #[inline(always)]
    fn slen(&self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn get(&self, i: usize) -> B {
        B::aload(&self.0[i])
    }
    #[inline(always)]
    fn window<T: Elem<Bits = B>>(
        &self,
        start: usize,
        mask: Option<&[bool]>,
        other: Bc<'_, T>,
        out: &mut [T],
    ) {
        window(&self.0[start..], |a| B::aload(a), mask, other, out)
    }
}

bits!(u8, AtomicU8, R8, W8);
bits!(u16, AtomicU16, R16, W16);
bits!(u32, AtomicU32, R32, W32);
bits!(u64, AtomicU64, R64, W64);

/// Views a read-only byte buffer as `B`s; `None` if misaligned or not a whole number of them.
pub(crate) fn view_ro<B: Bits>(b: &[u8]) -> Option<&[B]> {
    let size = size_of::<B>();
    if b.len() % size != 0 {
        return None;
    }
    if b.is_empty() {
        return Some(&[]);
    }
    if (b.as_ptr() as usize) % align_of::<B>() != 0 {
        return None;
    }
    // SAFETY: `B` is a plain unsigned integer (every bit pattern is valid, no padding), the
    // pointer is aligned for it, and `len / size` of them lie inside the borrowed bytes, which
    // stay borrowed (shared, so immutable) for the returned lifetime.
    Some(unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<B>(), b.len() / size) })
}

/// Views a writable byte buffer as atomics of `B`'s width; `None` if misaligned or not a whole
/// number of them.
pub(crate) fn view_rw<B: Bits>(b: &mut [u8]) -> Option<&[B::Atomic]> {
    let size = size_of::<B::Atomic>();
    if b.len() % size != 0 {
        return None;
    }
    if b.is_empty() {
        return Some(&[]);
    }
    if (b.as_ptr() as usize) % align_of::<B::Atomic>() != 0 {
        return None;
    }
    // SAFETY: the atomic has the size of `B` (checked at compile time above), the pointer is
    // aligned for the atomic, every bit pattern is a valid integer, and we consume the unique
    // borrow of the bytes for the returned lifetime, so all accesses during it go through the
    // atomics.
    Some(unsafe {
        std::slice::from_raw_parts(b.as_mut_ptr().cast::<B::Atomic>().cast_const(), b.len() / size)
    })
}
