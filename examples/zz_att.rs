#[path = "kernels/attention.rs"]
#[allow(dead_code)]
mod att;
use fuse::fuse_ir::Specialization;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (bm, bn, d, w, st): (u64, u64, u64, u32, u32) = (
        a[1].parse().unwrap(),
        a[2].parse().unwrap(),
        a[3].parse().unwrap(),
        a[4].parse().unwrap(),
        a[5].parse().unwrap(),
    );
    let spec = &att::attention::f16::SPEC;
    let facts: Vec<bool> = spec
        .specializations()
        .iter()
        .map(|s| match s {
            Specialization::BranchTaken(_) => false,
            Specialization::BranchSkipped(_) => true,
            _ => true,
        })
        .collect();
    let consts = [bm, bn, d];
    println!("{}", spec.full_source_staged(&consts, w, st, &facts));
    let cubin = spec.compile_for_arch_staged("sm_90a", &consts, w, st, &facts).unwrap();
    std::fs::write("/tmp/scratch/att.cubin", cubin).unwrap();
}
