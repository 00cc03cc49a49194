//! Branches decided on the host before a launch ([`fuse_ir::Kernel::uniform_branches`]): which
//! conditions qualify, what the host computes for them, and the `FUSE_IFT_<k>` / `FUSE_IFF_<k>`
//! guard the source puts on them.
use super::super::emit_cuda;
use crate::tests::ok;
use fuse_ir::{HostScalar, Specialization};

const DROPOUT: &str = "fn k(x: *const f32, y: *mut f32, n: i32, p: f32, flags: u32) {
    let i = program_id(0) * 128 + arange(0, 128);
    let mut v = load(x + i, i < n, 0.0);
    let keep = 1.0 / (1.0 - p);
    let on = p * 2.0 > 0.5 && (flags & 6) != 0u32;
    if on {
        v = v * keep;
    }
    let first = load(x + 0);
    if first > 0.0 {
        v = v + 1.0;
    }
    if n - 3 >= 0 {
        v = v * 2.0;
    }
    if on {
        v = v - 1.0;
    }
    store(y + i, v, i < n);
}";

#[test]
fn conditions_on_scalar_parameters_are_decided_on_the_host() {
    let k = ok(DROPOUT);
    // `on` (twice: one entry) and `n - 3 >= 0`; not the condition read from memory.
    let branches = k.uniform_branches();
    assert_eq!(branches.len(), 2, "{branches:?}");
    let eval = |n: i32, p: f32, flags: u32| {
        let args = move |i: u32| match i {
            2 => Some(HostScalar::Int(n.into())),
            3 => Some(HostScalar::Float(p.into())),
            4 => Some(HostScalar::Int(flags.into())),
            _ => None,
        };
        branches.iter().map(|p| p.eval(&args, &[])).collect::<Vec<_>>()
    };
    let b = |v: bool| Some(HostScalar::Bool(v));
    assert_eq!(eval(10, 0.3, 2), [b(true), b(true)]);
    // 0.5 > 0.5 is false.
    assert_eq!(eval(10, 0.25, 2), [b(false), b(true)]);
    // flags & 6 == 0.
    assert_eq!(eval(10, 0.3, 1), [b(false), b(true)]);
    // NaN compares false.
    assert_eq!(eval(2, f32::NAN, 4), [b(false), b(false)]);
    // i32 wrap-around as on the GPU: i32::MIN - 3 wraps to a large positive value.
    assert_eq!(eval(i32::MIN, 0.0, 0)[1], b(true));
    // A parameter the host does not know leaves the branch undecided.
    assert_eq!(branches[0].eval(&|_| None, &[]), None);
}

#[test]
fn a_decided_branch_is_guarded_by_its_launch_facts() {
    let out = emit_cuda(&ok(DROPOUT));
    let src = &out.source;
    for g in ["if (FUSE_IFT_0 || (!FUSE_IFF_0 && on))", "if (FUSE_IFT_1 || (!FUSE_IFF_1 && "] {
        assert!(src.contains(g), "{g} missing:\n{src}");
    }
    assert_eq!(src.matches("FUSE_IFT_0 ||").count(), 2, "both `if on` share branch 0");
    for s in [
        Specialization::BranchTaken(0),
        Specialization::BranchSkipped(0),
        Specialization::BranchTaken(1),
        Specialization::BranchSkipped(1),
    ] {
        assert!(out.specializations.contains(&s), "{s:?} not listed: {:?}", out.specializations);
    }
    assert!(!out.specializations.contains(&Specialization::BranchTaken(2)));
}
