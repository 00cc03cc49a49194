//! The `[ROWS, BLOCK]` tile of the several-rows-per-program kernels (`softmax_rows`,
//! `layernorm_rows`): BLOCK the next power of two of the row (at least 16) and ROWS = 2048 / BLOCK
//! (at most 64), so a tile of 1024–2048 lanes: 16 rows of 128, 8 of 256; rows up to 1024 wide.
//! Rows of 65-256 four-byte elements take a 1024-lane tile on one warp instead (8 rows of 128,
//! 4 of 256; 32 elements a thread, as torch.compile's kernels for these rows take): for f32 the
//! fastest of the tile x warps variants on Hopper, where 2-byte rows keep 2048 lanes on the
//! runtime's default warps.

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

/// `FUSE_ROWS_TILE` (1024, 2048, 4096 or 8192 lanes, for 128- and 256-column rows; a tuning
/// sweep's knob), if set.
fn tile_override() -> Option<usize> {
    static E: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *E.get_or_init(|| std::env::var("FUSE_ROWS_TILE").ok().and_then(|v| v.parse().ok()))
}

/// Whether rows of `n_cols` elements of `elem_bytes` bytes take the one-warp 1024-lane tile (4-byte
/// rows of 65-256 columns, a `BLOCK` of 128 or 256, unless `FUSE_ROWS_TILE` picks the tile).
fn one_warp_tile(n_cols: usize, elem_bytes: usize) -> bool {
    elem_bytes == 4 && matches!(n_cols.next_power_of_two(), 128 | 256) && tile_override().is_none()
}

/// The lanes of the rows tile for rows of `n_cols` elements of `elem_bytes` bytes: 1024 where
/// [`one_warp_tile`], else `FUSE_ROWS_TILE` or 2048.
pub fn tile_elems(n_cols: usize, elem_bytes: usize) -> usize {
    if one_warp_tile(n_cols, elem_bytes) {
        1024
    } else {
        tile_override().unwrap_or(2048)
    }
}

/// The warps: `warps` if given, one where [`one_warp_tile`], else `otherwise` (`None`: the
/// runtime's default).
pub fn warps(warps: Option<u32>, n_cols: usize, elem_bytes: usize, otherwise: Option<u32>) -> Option<u32> {
    warps.or(if one_warp_tile(n_cols, elem_bytes) { Some(1) } else { otherwise })
}

/// Calls `$go!(ROWS, BLOCK)` with the tile for `$n_cols` columns of `$elem_bytes`-byte elements;
/// past 1024 an error naming `$kernel` and the one-row kernel to use instead.
macro_rules! with_rows_tile {
    ($n_cols:expr, $elem_bytes:expr, $kernel:literal, $instead:literal, $go:ident) => {
        match (($n_cols).next_power_of_two().max(16), rows_tile::tile_elems($n_cols, $elem_bytes)) {
            // 1024 lanes: f32 rows of 65-256 columns (one_warp_tile), or a FUSE_ROWS_TILE sweep, as
            // are 4096 and 8192.
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
