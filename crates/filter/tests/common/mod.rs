//! What several test binaries share: reading the hex fixtures.

/// Bytes from lowercase hex.
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixture is hex"))
        .collect()
}

/// The Ribbon blocks of filter-block format version 2 (128-bit rows) written by the
/// builder before version 3: each fixture line ends with the whole block in hex.
#[allow(dead_code)] // each test binary compiles this module; not every one reads them
pub fn ribbon_v2_blocks() -> Vec<Vec<u8>> {
    include_str!("../fixtures/ribbon_blocks_v2.txt")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| unhex(l.rsplit(' ').next().expect("a line ends with its block")))
        .collect()
}
