//! Helpers shared by the store's integration tests.

/// A scan's items as owned pairs; panics on an error item (the tests want none).
pub fn collect(
    scan: impl Iterator<Item = bloomkv_kv::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.map(|kv| {
        let (k, v) = kv.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}
