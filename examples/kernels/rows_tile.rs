//! The `[ROWS, BLOCK]` tile of the several-rows-per-program kernels (`softmax_rows`,
//! `layernorm_rows`): BLOCK the next power of two of the row (at least 16) and ROWS = 2048 / BLOCK
//! (at most 64), so a tile of 1024–2048 lanes: 16 rows of 128, 8 of 256; rows up to 1024 wide.

/// `(n_rows, n_cols)` as the kernels' `i32`s, or an error naming `kernel`.
pub fn dims(kernel: &str, n_rows: usize, n_cols: usize) -> fuse::Result<(i32, i32)> {
    match (i32::try_from(n_rows), i32::try_from(n_cols)) {
        (Ok(r), Ok(c)) => Ok((r, c)),
        _ => Err(fuse::Error::InvalidLaunch(format!("{kernel}: {n_rows}x{n_cols} does not fit i32"))),
    }
}

/// One program per `rows` rows, with `warps` warps (the runtime's default if `None`).
pub fn grid(n_rows: usize, rows: usize, warps: Option<u32>) -> fuse::LaunchConfig {
    let grid = fuse::LaunchConfig::new(n_rows.div_ceil(rows) as u32);
    match warps {
        Some(w) => grid.num_warps(w),
        None => grid,
    }
}

/// The elements of a rows tile: 2048, or `FUSE_ROWS_TILE` (1024, 4096 or 8192, for 128- and
/// 256-column rows; a tuning sweep's knob).
pub fn tile_elems() -> usize {
    static E: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *E.get_or_init(|| std::env::var("FUSE_ROWS_TILE").ok().and_then(|v| v.parse().ok()).unwrap_or(2048))
}

/// Calls `$go!(ROWS, BLOCK)` with the tile for `$n_cols` columns; past 1024 an error naming
/// `$kernel` and the one-row kernel to use instead.
macro_rules! with_rows_tile {
    ($n_cols:expr, $kernel:literal, $instead:literal, $go:ident) => {
        match (($n_cols).next_power_of_two().max(16), rows_tile::tile_elems()) {
            // Tuning sweeps of the anchor widths (FUSE_ROWS_TILE elements a tile).
            (128, 1024) => $go!(8, 128),
            (128, 4096) => $go!(32, 128),
            (128, 8192) => $go!(64, 128),
            (256, 1024) => $go!(4, 256),
            (256, 4096) => $go!(16, 256),
            (256, 8192) => $go!(32, 256),
            (16, _) => $go!(64, 16),
            (32, _) => $go!(64, 32),
            (64, _) => $go!(32, 64),
            (128, _) => $go!(16, 128),
            (256, _) => $go!(8, 256),
            (512, _) => $go!(4, 512),
            (1024, _) => $go!(2, 1024),
            _ => Err(fuse::Error::InvalidLaunch(format!(
                "{}: {} columns: use `{}` past 1024",
                $kernel, $n_cols, $instead
            ))),
        }
    };
}
