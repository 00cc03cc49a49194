//! Compile-time diagnostics: every mistake in a kernel is a compile error at the user's
//! token, and the tricky valid forms compile. The `.stderr` files were written by the toolchain in
//! `rust-toolchain.toml`; regenerate them with `TRYBUILD=overwrite cargo test --release --test ui`
//! and read the diff (docs/LANGUAGE.md, "Diagnostics").

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
