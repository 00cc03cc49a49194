//! The README's quick start is real code: `tests/readme/quick_start.rs` is the README's first
//! `rust` block byte for byte, and it compiles and runs here (on the CPU interpreter without a GPU).

mod quick_start {
    include!("readme/quick_start.rs");

    #[test]
    fn quick_start_runs() {
        main().expect("the README's quick start returns Ok");
    }
}

#[test]
fn quick_start_is_the_readmes_first_rust_block() {
    let readme = include_str!("../README.md");
    let start = readme.find("```rust\n").expect("README has a rust block") + "```rust\n".len();
    let len = readme[start..].find("```").expect("the block ends");
    assert_eq!(
        &readme[start..start + len],
        include_str!("readme/quick_start.rs"),
        "README.md's quick start and tests/readme/quick_start.rs differ: change both"
    );
}
