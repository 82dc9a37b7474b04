//! Hostile lengths and counts, and decoders fed random and mutated bytes.
//!
//! Every length or count the store reads from disk is checked against the bytes that
//! are actually there before it sizes anything. This binary proves it with a global
//! allocator that records the largest single allocation: decoding a file that claims
//! gigabytes must never ask for more than a few megabytes.
//!
//! The proptest part runs each decoder (WAL, write batch, manifest, table, filter)
//! over arbitrary bytes and over valid files with random damage: thousands of cases,
//! no panic, and a result that is either a clean error or consistent data.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bloomkv_filter::{BloomPolicy, FilterPolicy};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::manifest::ManifestState;
use bloomkv_kv::sstable::{Table, TableBuilder, TableOptions};
use bloomkv_kv::{wal, write_batch, Counters, Error, ValueKind, WriteBatch};
use bytes::Bytes;
use proptest::prelude::*;

/// The system allocator, recording the largest allocation since the last reset.
struct Measuring;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the only addition is an atomic maximum of the size.
unsafe impl GlobalAlloc for Measuring {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` and `layout` come from this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Measuring = Measuring;

/// Tests in this binary that measure allocations run one at a time.
static MEASURE: Mutex<()> = Mutex::new(());

/// Runs `f` and returns its result with the largest allocation it made.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let _one = MEASURE.lock().unwrap_or_else(|p| p.into_inner());
    LARGEST.store(0, Ordering::SeqCst);
    let out = f();
    (out, LARGEST.load(Ordering::SeqCst))
}

/// No decoder may allocate more than this from a hostile length.
const LIMIT: usize = 4 << 20;

fn path() -> PathBuf {
    PathBuf::from("/db/000007.x")
}

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// A valid WAL record header for a payload of `len` bytes whose checksum is `payload_crc`.
fn wal_header(len: u32, payload_crc: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&payload_crc.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    h.push(1);
    let hcrc = crc(&h);
    h.extend_from_slice(&hcrc.to_le_bytes());
    h
}

#[test]
fn a_wal_record_claiming_gigabytes_is_refused_before_allocation() {
    for claimed in [u32::MAX, 1 << 30, 300 << 20] {
        let mut log = wal_header(claimed, 0);
        log.extend_from_slice(b"a few bytes, then more after them");
        // Nothing valid follows the claim: the whole log is a dropped tail.
        let (r, largest) = largest_allocation(|| wal::parse_wal(Bytes::from(log.clone()), &path()));
        assert!(
            largest < LIMIT,
            "allocated {largest} bytes for a {claimed}-byte claim"
        );
        assert_eq!(r.unwrap().torn_tail_bytes, log.len() as u64, "{claimed}");
        // With a valid record after it, the claim is corruption: still no allocation.
        wal::encode_record(b"a valid record after the claim", &mut log);
        let (r, largest) = largest_allocation(|| wal::parse_wal(Bytes::from(log), &path()));
        assert!(largest < LIMIT);
        assert!(
            matches!(r, Err(Error::Corruption { .. })),
            "{claimed}: {r:?}"
        );
    }
    // Within the record limit but past the end of the file: a torn tail, nothing read.
    let log = wal_header(200 << 20, 0);
    let (r, largest) = largest_allocation(|| wal::parse_wal(Bytes::from(log), &path()));
    assert!(largest < LIMIT);
    assert_eq!(r.unwrap().records.len(), 0);
}

#[test]
fn a_write_batch_claiming_billions_of_operations_is_refused_before_allocation() {
    let mut payload = 1u64.to_le_bytes().to_vec();
    payload.extend_from_slice(&u32::MAX.to_le_bytes());
    payload.extend_from_slice(&[1, 3, b'k', b'e', b'y', 0]);
    let payload = Bytes::from(payload);
    let (r, largest) = largest_allocation(|| write_batch::decode(&payload, &path()));
    assert!(largest < LIMIT, "allocated {largest}");
    assert!(matches!(r, Err(Error::Corruption { .. })));
}

#[test]
fn a_manifest_claiming_billions_of_tables_or_huge_keys_is_refused_before_allocation() {
    // Header: magic, version, next_file_number, last_sequence, wal_number, count.
    let header = |count: u32| {
        let mut m = b"BKVMANIF".to_vec();
        m.extend_from_slice(&1u32.to_le_bytes());
        m.extend_from_slice(&10u64.to_le_bytes());
        m.extend_from_slice(&5u64.to_le_bytes());
        m.extend_from_slice(&9u64.to_le_bytes());
        m.extend_from_slice(&count.to_le_bytes());
        m
    };
    let seal = |mut m: Vec<u8>| {
        let c = crc(&m);
        m.extend_from_slice(&c.to_le_bytes());
        m
    };
    let many_tables = seal(header(u32::MAX));
    // One table whose smallest key claims 4 GiB.
    let mut huge_key = header(1);
    huge_key.extend_from_slice(&0u32.to_le_bytes()); // level
    for v in [3u64, 100, 1, 1] {
        huge_key.extend_from_slice(&v.to_le_bytes()); // number, size, entries, max_seq
    }
    huge_key.extend_from_slice(&u32::MAX.to_le_bytes());
    huge_key.extend_from_slice(b"short");
    let huge_key = seal(huge_key);
    for bytes in [many_tables, huge_key] {
        let (r, largest) =
            largest_allocation(|| ManifestState::decode(&bytes, Path::new("MANIFEST")));
        assert!(largest < LIMIT, "allocated {largest}");
        assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
    }
}

/// A small valid table's bytes, with the standard Bloom filter.
fn table_bytes(n: usize) -> Vec<u8> {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let p = path();
    let policy: Arc<dyn FilterPolicy> = Arc::new(BloomPolicy::standard(10.0).unwrap());
    let mut b = TableBuilder::new(
        fs.create(&p).unwrap(),
        p.clone(),
        TableOptions {
            block_size: 128,
            filter_policy: Some(policy),
            ..TableOptions::default()
        },
    );
    for i in 0..n {
        b.add(
            format!("key{i:04}").as_bytes(),
            i as u64 + 1,
            ValueKind::Put,
            b"value",
        )
        .unwrap();
    }
    b.finish().unwrap();
    fs.file_bytes(&p).unwrap()
}

fn policies() -> Vec<Arc<dyn FilterPolicy>> {
    vec![
        Arc::new(BloomPolicy::standard(10.0).unwrap()),
        Arc::new(BloomPolicy::cache_local(10.0).unwrap()),
    ]
}

/// Opens `bytes` as a table and, if that works, reads every key it claims and iterates.
fn open_and_read(bytes: Vec<u8>) -> Result<usize, Error> {
    let fs = MemFileSystem::new();
    fs.set_file_bytes(&path(), bytes);
    let file = fs.open_random(&path())?;
    let table = Table::open(file, path(), Arc::new(Counters::default()), &policies())?;
    // Every answer is checked against what `table_bytes(40)` (every table here) wrote:
    // key{i} -> "value" at seq i + 1 for i < 40, nothing above.
    let wrong = |what: String| Err(Error::InvalidArgument(format!("wrong answer: {what}")));
    let entries = 40;
    for i in 0..50 {
        let k = format!("key{i:04}");
        let found = table.get(k.as_bytes(), bloomkv_filter::KeyHash::of(k.as_bytes()))?;
        let right = match &found {
            Some(e) => i < entries && e.value == "value" && e.seq == i as u64 + 1,
            None => i >= entries,
        };
        if !right {
            return wrong(format!("get {k} gave {found:?}"));
        }
    }
    let mut n = 0;
    for e in table.iter() {
        let e = e?;
        if e.key != format!("key{n:04}") || e.value != "value" || e.seq != n as u64 + 1 {
            return wrong(format!("entry {n} is {e:?}"));
        }
        n += 1;
    }
    Ok(n)
}

/// The footer's field offsets (see docs/FORMAT.md): handles of index, filter and
/// properties, then version and the CRC of bytes 0..52.
fn reseal_footer(bytes: &mut [u8]) {
    let f = bytes.len() - 64;
    let c = crc(&bytes[f..f + 52]);
    bytes[f + 52..f + 56].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn a_table_footer_claiming_gigabyte_blocks_is_refused_before_allocation() {
    let original = table_bytes(40);
    let f = original.len() - 64;
    for field in [8usize, 24, 40] {
        // index size, filter size, properties size
        for claimed in [u64::MAX, 3 << 30, 1 << 40] {
            let mut bytes = original.clone();
            bytes[f + field..f + field + 8].copy_from_slice(&claimed.to_le_bytes());
            reseal_footer(&mut bytes);
            let (r, largest) = largest_allocation(|| open_and_read(bytes));
            assert!(largest < LIMIT, "field {field}: allocated {largest}");
            assert!(
                matches!(r, Err(Error::Corruption { .. })),
                "field {field}: {r:?}"
            );
        }
    }
    // Handles pointing before the data or overlapping the footer.
    for offset in [0u64, u64::MAX - 3, original.len() as u64 - 10] {
        let mut bytes = original.clone();
        bytes[f..f + 8].copy_from_slice(&offset.to_le_bytes());
        reseal_footer(&mut bytes);
        let (r, largest) = largest_allocation(|| open_and_read(bytes));
        assert!(largest < LIMIT);
        assert!(
            matches!(r, Err(Error::Corruption { .. })),
            "offset {offset}: {r:?}"
        );
    }
}

/// Rewrites the properties block of `bytes` with `edit` applied to its varint fields
/// `[entries, deletions, max_seq, data_blocks, data_size]`, re-sealing its trailer and
/// the footer so that only the claim is wrong.
fn with_properties(bytes: &[u8], edit: impl Fn(&mut [u64; 5])) -> Vec<u8> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let f = bytes.len() - 64;
    let (off, size) = (u64_at(f + 32) as usize, u64_at(f + 40) as usize);
    let block = &bytes[off..off + size];
    // format_version u32, then smallest and largest as varint length + bytes.
    let mut pos = 4;
    let varint = |pos: &mut usize| {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = block[*pos];
            *pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    };
    for _ in 0..2 {
        let len = varint(&mut pos) as usize;
        pos += len;
    }
    let numbers_start = pos;
    let mut numbers = [0u64; 5];
    for n in numbers.iter_mut() {
        *n = varint(&mut pos);
    }
    edit(&mut numbers);
    let mut new_block = block[..numbers_start].to_vec();
    for mut v in numbers {
        while v >= 0x80 {
            new_block.push((v as u8) | 0x80);
            v >>= 7;
        }
        new_block.push(v as u8);
    }
    new_block.extend_from_slice(&block[pos..]);
    let mut sealed = new_block.clone();
    sealed.push(0);
    let c = crc(&sealed);
    sealed.extend_from_slice(&c.to_le_bytes());
    // The properties block is the last before the footer: rebuild from there.
    assert_eq!(off + size + 5, f, "properties come last");
    let mut out = bytes[..off].to_vec();
    out.extend_from_slice(&sealed);
    let mut footer = bytes[f..].to_vec();
    footer[40..48].copy_from_slice(&(new_block.len() as u64).to_le_bytes());
    out.extend_from_slice(&footer);
    reseal_footer(&mut out);
    out
}

#[test]
fn a_table_claiming_more_entries_than_its_bytes_can_hold_is_corrupt() {
    let original = table_bytes(40);
    // Unchanged, the rewritten table still opens: the helper itself is sound.
    assert_eq!(
        open_and_read(with_properties(&original, |_| {})).unwrap(),
        40
    );
    type Edit = fn(&mut [u64; 5]);
    let cases: [(&str, Edit); 4] = [
        ("a trillion entries", |n| n[0] = 1 << 40),
        ("u64::MAX entries", |n| n[0] = u64::MAX),
        ("a data size beyond the data blocks", |n| n[4] = 1 << 40),
        ("a data size short of the data blocks", |n| n[4] /= 2),
    ];
    for (what, edit) in cases {
        let bytes = with_properties(&original, edit);
        let (r, largest) = largest_allocation(|| open_and_read(bytes));
        assert!(largest < LIMIT, "{what}: allocated {largest}");
        match r {
            Err(Error::Corruption { file, reason }) => {
                assert_eq!(file, path());
                assert!(reason.contains("properties"), "{what}: {reason}");
            }
            other => panic!("{what}: expected corruption, got {other:?}"),
        }
    }
}

fn sample_wal() -> Vec<u8> {
    let mut log = Vec::new();
    for i in 0..6u64 {
        let mut b = WriteBatch::new();
        b.put(format!("k{i}"), format!("value {i}"));
        if i % 2 == 0 {
            b.delete(format!("d{i}"));
        }
        wal::encode_record(&b.into_payload(i * 10 + 1).unwrap(), &mut log);
    }
    log
}

fn sample_manifest() -> Vec<u8> {
    use bloomkv_kv::manifest::TableMeta;
    let t = |level, number, s: &'static str, l: &'static str| TableMeta {
        level,
        number,
        file_size: 4096,
        smallest: Bytes::from_static(s.as_bytes()),
        largest: Bytes::from_static(l.as_bytes()),
        entries: 10,
        max_seq: number * 3,
        data_size: Some(4000),
    };
    ManifestState::new(20, 100, 19, vec![t(0, 12, "a", "m"), t(1, 7, "b", "z")]).encode()
}

/// Damage: set `bytes[at % len] ^= x` for each pair, then maybe cut or extend.
fn mutate(mut bytes: Vec<u8>, flips: &[(usize, u8)], cut: Option<usize>, extra: &[u8]) -> Vec<u8> {
    if !bytes.is_empty() {
        let n = bytes.len();
        for &(at, x) in flips {
            bytes[at % n] ^= x;
        }
    }
    if let Some(c) = cut {
        bytes.truncate(c % (bytes.len() + 1));
    }
    bytes.extend_from_slice(extra);
    bytes
}

fn damage() -> impl Strategy<Value = (Vec<(usize, u8)>, Option<usize>, Vec<u8>)> {
    (
        proptest::collection::vec((any::<usize>(), 1u8..=255), 0..4),
        proptest::option::of(any::<usize>()),
        proptest::collection::vec(any::<u8>(), 0..8),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn wal_decoding_of_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(replay) = wal::parse_wal(Bytes::from(bytes), &path()) {
            for r in &replay.records {
                let _ = write_batch::decode(r, &path());
            }
        }
    }

    #[test]
    fn damaged_wals_decode_to_a_prefix_or_corruption((flips, cut, extra) in damage()) {
        let original = sample_wal();
        let good = wal::parse_wal(Bytes::from(original.clone()), &path()).unwrap().records;
        match wal::parse_wal(Bytes::from(mutate(original, &flips, cut, &extra)), &path()) {
            Ok(replay) => {
                // Whatever validates is a prefix of the real records, byte for byte.
                prop_assert!(replay.records.len() <= good.len());
                for (a, b) in replay.records.iter().zip(&good) {
                    prop_assert_eq!(a, b);
                }
            }
            Err(Error::Corruption { file, .. }) => prop_assert_eq!(file, path()),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    #[test]
    fn write_batch_decoding_of_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = write_batch::decode(&Bytes::from(bytes), &path());
    }

    #[test]
    fn manifest_decoding_of_random_and_damaged_bytes_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        (flips, cut, extra) in damage(),
    ) {
        let _ = ManifestState::decode(&bytes, &path());
        let original = sample_manifest();
        let damaged = mutate(original.clone(), &flips, cut, &extra);
        match ManifestState::decode(&damaged, &path()) {
            // A CRC-32 misses such damage with odds of 2^-32: never, in these runs.
            Ok(state) => prop_assert!(damaged == original, "damage accepted: {:?}", state),
            Err(Error::Corruption { .. }) => {}
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    #[test]
    fn table_decoding_of_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let r = open_and_read(bytes);
        prop_assert!(matches!(r, Err(Error::Corruption { .. })), "{:?}", r);
    }

    #[test]
    fn damaged_tables_read_right_or_report_corruption((flips, cut, extra) in damage()) {
        let original = table_bytes(40);
        let damaged = mutate(original.clone(), &flips, cut, &extra);
        let unchanged = damaged == original;
        match open_and_read(damaged) {
            Ok(n) => prop_assert_eq!(n, 40),
            Err(Error::Corruption { file, .. }) => {
                prop_assert!(!unchanged);
                prop_assert_eq!(file, path());
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    #[test]
    fn filter_decoding_of_random_and_damaged_bytes_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        (flips, cut, extra) in damage(),
    ) {
        for policy in policies() {
            let _ = policy.open_reader(&bytes);
            let mut builder = policy.new_builder();
            for i in 0..50u32 {
                builder.add_hash(bloomkv_filter::KeyHash::of(&i.to_le_bytes()));
            }
            let block = builder.finish();
            let damaged = mutate(block.clone(), &flips, cut, &extra);
            if let Ok(reader) = policy.open_reader(&damaged) {
                // Only an undamaged block may open; it has no false negatives.
                prop_assert!(damaged == block);
                for i in 0..50u32 {
                    prop_assert!(reader.may_contain_hash(bloomkv_filter::KeyHash::of(&i.to_le_bytes())));
                }
            }
        }
    }
}
