//! Typed tile storage, element conversions and the views of kernel buffers.
//!
//! Every interpreter operation dispatches on the dtype once per tile (the [`dispatch!`] macro
//! turns a runtime `DType` into a type alias) and then runs one monomorphised loop over plain
//! slices, so there is no per-element matching.
//!
//! The bottom of the CPU back end: imports nothing of the crate.

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

/// The conversions from f32 to a 2-byte float: round to nearest even, and every NaN becomes the
/// canonical `0x7fff` (what the GPU gives; `half` alone would keep the sign and payload).
macro_rules! round_from_f32 {
    ($($(#[$doc:meta])* $name:ident -> $t:ty;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name(x: f32) -> $t {
            if x.is_nan() {
                <$t>::from_bits(0x7fff)
            } else {
                <$t>::from_f32(x)
            }
        }
    )*};
}
round_from_f32! {
    /// f32 → f16 (as the GPU's `cvt.rn.f16.f32`).
    f32_to_f16 -> f16;
    /// f32 → bf16 (as CUDA's `__float2bfloat16_rn`).
    f32_to_bf16 -> bf16;
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

/// `impl Elem for $t`: a var's value `VarValue::$V`, kept in buffers as `$bits`. The
/// conversions into the type and out of it are each given as one expression of their argument;
/// `cast` names the constructor of the target type that the IR's `Cast` goes through
/// (`D::from_i64(..)`, `D::from_f32(..)`, ...) and its argument.
macro_rules! elem {
    ($t:ty, $V:ident, $bits:ty,
        into: { $($into:ident($arg:ident: $arg_ty:ty) = $into_body:expr;)* }
        out_of: { $($out_of:ident($x:ident) -> $ret:ty = $out_body:expr;)* }
        cast: |$c:ident| $via:ident($cast:expr) $(,)?
    ) => {
        impl Elem for $t {
            const DT: DType = DType::$V;
            type Bits = $bits;
            #[inline(always)]
            fn slice(v: &VarValue) -> Option<&[Self]> {
                if let VarValue::$V(v) = v {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn vec_mut(v: &mut VarValue) -> Option<&mut Vec<Self>> {
                if let VarValue::$V(v) = v {
                    Some(v)
                } else {
                    None
                }
            }
            $(
                #[inline(always)]
                fn $into($arg: $arg_ty) -> Self {
                    $into_body
                }
            )*
            $(
                #[inline(always)]
                fn $out_of(self) -> $ret {
                    let $x = self;
                    $out_body
                }
            )*
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                let $c = self;
                D::$via($cast)
            }
        }
    };
}

/// The integers: `as` conversions (ints wrap, floats truncate and saturate), cast through
/// `$wide` (`i64` for signed types, sign-extending; `u64` for unsigned ones) by `D::$via`.
macro_rules! int_elem {
    ($t:ty, $V:ident, $bits:ty, $wide:ty, $via:ident) => {
        elem!($t, $V, $bits,
            into: {
                from_bits(b: $bits) = b as $t;
                from_bool(b: bool) = b as $t;
                from_i64(v: i64) = v as $t;
                from_u64(v: u64) = v as $t;
                from_f32(v: f32) = v as $t;
                from_f64(v: f64) = v as $t;
            }
            out_of: { to_bits(x) -> $bits = x as $bits; as_i64(x) -> i64 = x as i64; }
            cast: |x| $via(x as $wide),
        );
    };
}
int_elem!(i8, I8, u8, i64, from_i64);
int_elem!(u8, U8, u8, u64, from_u64);
int_elem!(i32, I32, u32, i64, from_i64);
int_elem!(u32, U32, u32, u64, from_u64);
int_elem!(i64, I64, u64, i64, from_i64);
int_elem!(u64, U64, u64, u64, from_u64);

elem!(bool, Bool, u8,
    into: {
        from_bits(b: u8) = b != 0;
        from_bool(b: bool) = b;
        from_i64(v: i64) = v != 0;
        from_u64(v: u64) = v != 0;
        from_f32(v: f32) = v != 0.0;
        from_f64(v: f64) = v != 0.0;
    }
    out_of: { to_bits(x) -> u8 = x as u8; as_i64(x) -> i64 = x as i64; }
    cast: |x| from_bool(x),
);

elem!(f32, F32, u32,
    into: {
        from_bits(b: u32) = f32::from_bits(b);
        from_bool(b: bool) = b as u8 as f32;
        from_i64(v: i64) = v as f32;
        from_u64(v: u64) = v as f32;
        from_f32(v: f32) = v;
        from_f64(v: f64) = v as f32;
    }
    out_of: { to_bits(x) -> u32 = f32::to_bits(x); as_i64(x) -> i64 = x as i64; }
    cast: |x| from_f32(x),
);

/// f16 and bf16, rounding with `$round` (to nearest even, NaN to the canonical `0x7fff`).
macro_rules! half_elem {
    ($t:ty, $V:ident, $round:ident) => {
        elem!($t, $V, u16,
            into: {
                from_bits(b: u16) = <$t>::from_bits(b);
                from_bool(b: bool) = if b { <$t>::ONE } else { <$t>::ZERO };
                // Integers go through f32 (as the CUDA C `__float2half_rn((float)x)` does): they
                // may round twice for |v| > 2^24.
                from_i64(v: i64) = $round(v as f32);
                from_u64(v: u64) = $round(v as f32);
                from_f32(v: f32) = $round(v);
                from_f64(v: f64) = if v.is_nan() { <$t>::from_bits(0x7fff) } else { <$t>::from_f64(v) };
            }
            out_of: { to_bits(x) -> u16 = <$t>::to_bits(x); as_i64(x) -> i64 = x.to_f32() as i64; }
            cast: |x| from_f32(x.to_f32()),
        );
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

/// `impl Num for $t`: the identities of `max` and `min`, then each operation as one expression
/// of its operands (`a` is `self`).
macro_rules! num {
    ($t:ty, MAX_ID = $max_id:expr, MIN_ID = $min_id:expr,
        binary: { $($binary:ident($a:ident, $o:ident) = $binary_body:expr;)* }
        unary: { $($unary:ident($u:ident) = $unary_body:expr;)* }
    ) => {
        impl Num for $t {
            const MAX_ID: Self = $max_id;
            const MIN_ID: Self = $min_id;
            $(
                #[inline(always)]
                fn $binary(self, $o: Self) -> Self {
                    let $a = self;
                    $binary_body
                }
            )*
            $(
                #[inline(always)]
                fn $unary(self) -> Self {
                    let $u = self;
                    $unary_body
                }
            )*
        }
    };
}

/// The integer compute types: wrapping arithmetic, and 0 for a division or remainder by 0.
macro_rules! int_num {
    ($t:ty, $abs:expr) => {
        num!($t, MAX_ID = <$t>::MIN, MIN_ID = <$t>::MAX,
            binary: {
                vadd(a, o) = a.wrapping_add(o);
                vsub(a, o) = a.wrapping_sub(o);
                vmul(a, o) = a.wrapping_mul(o);
                vdiv(a, o) = if o == 0 { 0 } else { a.wrapping_div(o) };
                vrem(a, o) = if o == 0 { 0 } else { a.wrapping_rem(o) };
                vmax(a, o) = Ord::max(a, o);
                vmin(a, o) = Ord::min(a, o);
            }
            unary: {
                vneg(a) = a.wrapping_neg();
                vabs(a) = {
                    let f: fn($t) -> $t = $abs;
                    f(a)
                };
            }
        );
    };
}
int_num!(i32, i32::wrapping_abs);
int_num!(i64, i64::wrapping_abs);
int_num!(u32, |x| x);
int_num!(u64, |x| x);

// The identities of `max` and `min` are NaN, which maxNum and minNum ignore.
num!(f32, MAX_ID = f32::NAN, MIN_ID = f32::NAN,
    binary: {
        vadd(a, o) = a + o;
        vsub(a, o) = a - o;
        vmul(a, o) = a * o;
        vdiv(a, o) = a / o;
        // `fmodf` (exact; Rust's `%` on floats is fmod).
        vrem(a, o) = a % o;
        // IEEE maxNum (minNum): a NaN operand is ignored.
        vmax(a, o) = f32::max(a, o);
        vmin(a, o) = f32::min(a, o);
    }
    unary: {
        vneg(a) = -a;
        vabs(a) = f32::abs(a);
    }
);

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

/// Something elements can be loaded from: a plain slice of `B`s or a slice of atomics, each
/// item read as a `B`.
pub(crate) trait Source<B> {
    /// What the source holds per element (`B`, or its atomic).
    type Item;
    /// The items.
    fn items(&self) -> &[Self::Item];
    /// One item's value.
    fn read(item: &Self::Item) -> B;

    #[inline(always)]
    fn slen(&self) -> usize {
        self.items().len()
    }

    #[inline(always)]
    fn get(&self, i: usize) -> B {
        Self::read(&self.items()[i])
    }

    /// `out[i] = mask[i] ? self[start + i] : other[i]` where the whole window
    /// `start..start + out.len()` is in bounds (so reading a masked-off lane is harmless and the
    /// loop needs no per-lane checks).
    #[inline(always)]
    fn window<T: Elem<Bits = B>>(
        &self,
        start: usize,
        mask: Option<&[bool]>,
        other: ScalarOrTile<'_, T>,
        out: &mut [T],
    ) {
        let win = &self.items()[start..][..out.len()];
        match (mask, other) {
            (None, _) => {
                for (o, x) in out.iter_mut().zip(win) {
                    *o = T::from_bits(Self::read(x));
                }
            }
            (Some(m), ScalarOrTile::Scalar(v)) => {
                for ((o, x), &k) in out.iter_mut().zip(win).zip(m) {
                    let y = T::from_bits(Self::read(x));
                    *o = if k { y } else { v };
                }
            }
            (Some(m), ScalarOrTile::Tile(t)) => {
                for (((o, x), &k), &v) in out.iter_mut().zip(win).zip(m).zip(t) {
                    let y = T::from_bits(Self::read(x));
                    *o = if k { y } else { v };
                }
            }
        }
    }
}

/// An operand of `n` lanes: one value broadcast to all of them, or a tile of `n`.
#[derive(Clone, Copy)]
pub(crate) enum ScalarOrTile<'a, T> {
    Scalar(T),
    Tile(&'a [T]),
}

impl<B: Bits> Source<B> for [B] {
    type Item = B;
    #[inline(always)]
    fn items(&self) -> &[B] {
        self
    }
    #[inline(always)]
    fn read(item: &B) -> B {
        *item
    }
}

/// A writable buffer seen as a load source (`Relaxed` atomic loads).
pub(crate) struct Atomics<'a, B: Bits>(pub &'a [B::Atomic]);

impl<B: Bits> Source<B> for Atomics<'_, B> {
    type Item = B::Atomic;
    #[inline(always)]
    fn items(&self) -> &[B::Atomic] {
        self.0
    }
    #[inline(always)]
    fn read(item: &B::Atomic) -> B {
        B::aload(item)
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
