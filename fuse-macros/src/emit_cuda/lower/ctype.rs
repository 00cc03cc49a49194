//! C spellings of IR types, literals and conversions.
use super::prelude::Needs;
use fuse_ir::{DType, Literal};

/// The C type a value of this dtype is held in (registers and memory alike).
pub fn c_type(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        // Half types are carried as their bits; arithmetic widens them to f32 first.
        DType::F16 | DType::BF16 => "unsigned short",
        DType::F32 => "float",
    }
}

/// The unsigned type of the same width, for wrapping signed arithmetic.
pub fn unsigned_of(d: DType) -> &'static str {
    match d {
        DType::I64 | DType::U64 => "unsigned long long",
        _ => "unsigned int",
    }
}

pub fn f32_lit(x: f32) -> String {
    if x.is_nan() {
        // The NaN's own bits, sign included (`-f32::NAN`), rather than one fixed NaN. (A NaN's
        // sign and payload are still outside the GPU/CPU bit-identity contract: docs/LANGUAGE.md.)
        match x.to_bits() {
            b if b < 0x8000_0000 => format!("__int_as_float(0x{b:08x})"),
            b => format!("__int_as_float((int)0x{b:08x}u)"),
        }
    } else if x == f32::INFINITY {
        "__int_as_float(0x7f800000)".into()
    } else if x == f32::NEG_INFINITY {
        "__int_as_float((int)0xff800000u)".into()
    } else {
        // Debug prints the shortest text that reads back as the same f32.
        let s = format!("{x:?}f");
        if x.is_sign_negative() {
            format!("({s})")
        } else {
            s
        }
    }
}

/// An integer constant of dtype `d` holding `v` wrapped to `d`'s width.
pub fn int_lit(v: i128, d: DType) -> String {
    match d {
        DType::Bool => (if v != 0 { "true" } else { "false" }).into(),
        DType::I8 => format!("((signed char){})", v as i8),
        DType::U8 => format!("((unsigned char){})", v as u8),
        DType::I32 => match v as i32 {
            i32::MIN => "(-2147483647 - 1)".into(),
            x if x < 0 => format!("({x})"),
            x => format!("{x}"),
        },
        DType::U32 => format!("{}u", v as u32),
        DType::I64 => match v as i64 {
            i64::MIN => "(-9223372036854775807LL - 1LL)".into(),
            x if x < 0 => format!("({x}LL)"),
            x => format!("{x}LL"),
        },
        DType::U64 => format!("{}ull", v as u64),
        DType::F32 => f32_lit(v as f32),
        DType::F16 | DType::BF16 => unreachable!("half literals go through f32"),
    }
}

/// A literal of destination dtype `d`.
pub fn literal(lit: &Literal, d: DType, needs: &mut Needs) -> String {
    if d.is_float() {
        let x = match *lit {
            Literal::Bool(b) => f32::from(u8::from(b)),
            Literal::Int(v) => v as f32,
            Literal::UInt(v) => v as f32,
            Literal::Float(v) => v as f32,
        };
        return convert(&f32_lit(x), DType::F32, d, needs);
    }
    let v: i128 = match *lit {
        Literal::Bool(b) => i128::from(b),
        Literal::Int(v) => i128::from(v),
        Literal::UInt(v) => i128::from(v),
        // Not produced by the checker; truncate like a cast would.
        Literal::Float(v) => v as i128,
    };
    int_lit(v, d)
}

/// `e` (a C expression holding a `from` value) converted to `to` with the IR's cast semantics:
/// float→int truncates and saturates (NaN → 0), int→int wraps, narrowing floats round to nearest
/// even, anything→bool is `!= 0`.
pub fn convert(e: &str, from: DType, to: DType, needs: &mut Needs) -> String {
    if from == to {
        return e.to_string();
    }
    match (from, to) {
        (DType::F16, _) => {
            needs.f16 = true;
            convert(&format!("fuse_f16_to_f32({e})"), DType::F32, to, needs)
        }
        (DType::BF16, _) => {
            needs.bf16 = true;
            convert(&format!("fuse_bf16_to_f32({e})"), DType::F32, to, needs)
        }
        (_, DType::F16) => {
            needs.f16 = true;
            format!("fuse_f32_to_f16({})", convert(e, from, DType::F32, needs))
        }
        (_, DType::BF16) => {
            needs.bf16 = true;
            format!("fuse_f32_to_bf16({})", convert(e, from, DType::F32, needs))
        }
        (DType::F32, DType::Bool) => format!("({e} != 0.0f)"),
        (_, DType::Bool) => format!("({e} != 0)"),
        (DType::Bool, DType::F32) => format!("({e} ? 1.0f : 0.0f)"),
        (DType::F32, _) => {
            needs.f2i = true;
            match to {
                DType::I32 => format!("fuse_f2i_s32({e})"),
                DType::U32 => format!("fuse_f2i_u32({e})"),
                DType::I64 => format!("fuse_f2i_s64({e})"),
                DType::U64 => format!("fuse_f2i_u64({e})"),
                // Saturate at 32 bits, then clamp to the byte's range: the same as saturating at once.
                DType::I8 => format!("((signed char)fuse_clamp_s32(fuse_f2i_s32({e}), -128, 127))"),
                DType::U8 => format!("((unsigned char)fuse_clamp_s32(fuse_f2i_s32({e}), 0, 255))"),
                _ => unreachable!(),
            }
        }
        (_, DType::F32) => format!("((float)({e}))"),
        // int/bool → int: C conversions wrap (two's complement on CUDA).
        (_, to) => format!("(({})({e}))", c_type(to)),
    }
}
