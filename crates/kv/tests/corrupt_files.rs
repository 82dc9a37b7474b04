//! Damaged files: every byte of a table, the WAL and the manifest flipped, every
//! truncation, zero-filled ranges, garbage appended, files deleted.
//!
//! A small store is built once on the in-memory file system: an older table, a newer
//! table that overwrites and deletes some of the older one's keys, and a WAL holding
//! writes not yet flushed. Each damage is applied to a copy, the store is reopened on
//! it, and every key is read with `get` and with a scan. What is allowed:
//!
//! * the right value (a present key is never `None`, a deleted key never comes back,
//!   an overwritten value never shows through a damaged newer table);
//! * `Error::Corruption` naming the damaged file, from `open`, `get` or the scan;
//! * for the WAL only: a damaged or cut last record is indistinguishable from a write
//!   the crash interrupted, so the WAL's keys may come back as a prefix of its records.
//!
//! A damaged filter block alone must cost nothing but speed: the store opens, every
//! answer is right, and `filter_corrupt` counts it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, Error, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/db";
const TABLE_KEYS: usize = 40;
const WAL_KEYS: usize = 20;

fn options(fs: &MemFileSystem) -> Options {
    Options {
        block_size: 256,
        disable_auto_compaction: true,
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn tkey(i: usize) -> String {
    format!("t{i:03}")
}

fn wkey(i: usize) -> String {
    format!("w{i:03}")
}

/// The store every damage starts from, the expected contents, and its files.
struct Fixture {
    fs: MemFileSystem,
    expected: BTreeMap<String, Option<String>>,
    older_table: PathBuf,
    newer_table: PathBuf,
    wal: PathBuf,
    manifest: PathBuf,
}

fn fixture() -> Fixture {
    let fs = MemFileSystem::new();
    let mut expected = BTreeMap::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..TABLE_KEYS {
        db.put(tkey(i), format!("old-{i}")).unwrap();
        expected.insert(tkey(i), Some(format!("old-{i}")));
    }
    db.flush().unwrap();
    for i in 0..TABLE_KEYS {
        if i % 3 == 0 {
            db.put(tkey(i), format!("new-{i}")).unwrap();
            expected.insert(tkey(i), Some(format!("new-{i}")));
        } else if i % 3 == 1 {
            db.delete(tkey(i)).unwrap();
            expected.insert(tkey(i), None);
        }
    }
    db.flush().unwrap();
    for i in 0..WAL_KEYS {
        db.put(wkey(i), format!("wal-{i}")).unwrap();
        expected.insert(wkey(i), Some(format!("wal-{i}")));
    }
    let tables: Vec<PathBuf> = db.table_infos().into_iter().map(|t| t.path).collect();
    db.close().unwrap();
    assert_eq!(tables.len(), 2, "two L0 tables, newest first");
    let wal = fs
        .paths()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    Fixture {
        expected,
        newer_table: tables[0].clone(),
        older_table: tables[1].clone(),
        wal,
        manifest: Path::new(DIR).join("MANIFEST"),
        fs,
    }
}

/// How one damaged store behaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Verdict {
    /// Opened, and every answer was right.
    AllRight,
    /// Opened; some reads reported corruption in the damaged file, the rest were right.
    SomeReadsCorrupt,
    /// `open` reported corruption in the damaged file.
    RefusedAtOpen,
    /// (WAL only) opened with the WAL's last records dropped as a torn tail.
    WalPrefix,
}

fn is_corruption_of(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corruption { file: f, .. } if f == file)
}

/// Opens `fs`, reads everything, and checks it against `fx` (see the module docs).
/// Returns the verdict and the store's `filter_corrupt` count.
fn check(fx: &Fixture, fs: &MemFileSystem, damaged: &Path, what: &str) -> (Verdict, u64) {
    let db = match Db::open(DIR, options(fs)) {
        Ok(db) => db,
        Err(e) if is_corruption_of(&e, damaged) => return (Verdict::RefusedAtOpen, 0),
        Err(e) => panic!(
            "{what}: open failed with something else than corruption of the damaged file: {e}"
        ),
    };
    let mut corrupt_reads = false;
    let mut wal_present = Vec::new();
    for (k, want) in &fx.expected {
        match db.get(k) {
            Ok(got) => {
                let got = got.map(|b| String::from_utf8(b.to_vec()).unwrap());
                if damaged == fx.wal && k.starts_with('w') && got.is_none() {
                    wal_present.push(false);
                    continue;
                }
                if k.starts_with('w') {
                    wal_present.push(true);
                }
                assert_eq!(&got, want, "{what}: wrong answer for {k}");
            }
            Err(e) if is_corruption_of(&e, damaged) => corrupt_reads = true,
            Err(e) => panic!("{what}: get({k}) failed with {e}"),
        }
    }
    // A scan sees the same, or stops at a corruption error naming the file.
    let mut scanned = BTreeMap::new();
    let mut scan_failed = false;
    for item in db.scan::<&str, _>(..) {
        match item {
            Ok((k, v)) => {
                scanned.insert(
                    String::from_utf8(k.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                );
            }
            Err(e) if is_corruption_of(&e, damaged) => {
                scan_failed = true;
                break;
            }
            Err(e) => panic!("{what}: scan failed with {e}"),
        }
    }
    if !scan_failed {
        for (k, v) in &scanned {
            assert_eq!(
                fx.expected.get(k),
                Some(&Some(v.clone())),
                "{what}: scan returned {k}={v}"
            );
        }
        let missing = fx
            .expected
            .iter()
            .filter(|(k, v)| v.is_some() && !scanned.contains_key(*k))
            .filter(|(k, _)| !(damaged == fx.wal && k.starts_with('w')));
        assert_eq!(missing.count(), 0, "{what}: scan missed a present key");
    }
    let filter_corrupt = db.stats().filter_corrupt;
    drop(db);
    // The WAL's keys are all there, or a prefix of them (a dropped torn tail).
    let recovered = wal_present.iter().take_while(|p| **p).count();
    assert!(
        wal_present[recovered..].iter().all(|p| !p),
        "{what}: the WAL's records came back with a hole: {wal_present:?}"
    );
    let verdict = if corrupt_reads || scan_failed {
        Verdict::SomeReadsCorrupt
    } else if recovered < WAL_KEYS {
        Verdict::WalPrefix
    } else {
        Verdict::AllRight
    };
    (verdict, filter_corrupt)
}

/// One kind of damage.
#[derive(Debug, Clone)]
enum Damage {
    FlipBit(usize),
    Truncate(usize),
    Zero(usize, usize),
    Append(Vec<u8>),
    Garbage(usize, Vec<u8>),
}

impl Damage {
    fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            Damage::FlipBit(i) => bytes[*i] ^= 1 << (i % 8),
            Damage::Truncate(n) => bytes.truncate(*n),
            Damage::Zero(at, n) => {
                let end = (at + n).min(bytes.len());
                bytes[*at..end].iter_mut().for_each(|b| *b = 0);
            }
            Damage::Append(extra) => bytes.extend_from_slice(extra),
            Damage::Garbage(at, g) => {
                let end = (at + g.len()).min(bytes.len());
                bytes[*at..end].copy_from_slice(&g[..end - at]);
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Damage::FlipBit(_) => "flip",
            Damage::Truncate(_) => "truncate",
            Damage::Zero(..) => "zero-fill",
            Damage::Append(_) => "append",
            Damage::Garbage(..) => "overwrite",
        }
    }
}

/// Every single-bit flip, every truncation, zero-filled windows, garbage overwrites
/// and appended bytes, for a file of `len` bytes.
fn damages(len: usize, seed: u64) -> Vec<Damage> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out: Vec<Damage> = (0..len).map(Damage::FlipBit).collect();
    out.extend((0..len).map(Damage::Truncate));
    out.extend((0..len).step_by(8).map(|at| Damage::Zero(at, 32)));
    for _ in 0..64 {
        let at = rng.gen_range(0..len);
        let g: Vec<u8> = (0..rng.gen_range(1..16)).map(|_| rng.gen()).collect();
        out.push(Damage::Garbage(at, g));
    }
    for n in [1, 7, 13, 64, 4096] {
        out.push(Damage::Append((0..n).map(|_| rng.gen()).collect()));
        out.push(Damage::Append(vec![0; n]));
    }
    out
}

/// The regions of a table file, from its footer (see docs/FORMAT.md).
fn table_region(bytes: &[u8], pos: usize) -> &'static str {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let footer = bytes.len() - 64;
    let handle = |i: usize| (u64_at(footer + 16 * i), u64_at(footer + 16 * i + 8) + 5);
    let (index, filter, props) = (handle(0), handle(1), handle(2));
    let inside = |(off, len): (usize, usize)| pos >= off && pos < off + len;
    if pos >= footer {
        "footer"
    } else if inside(filter) {
        "filter"
    } else if inside(index) {
        "index"
    } else if inside(props) {
        "properties"
    } else {
        "data"
    }
}

#[derive(Default)]
struct Report {
    cases: usize,
    by: BTreeMap<(String, Verdict), usize>,
}

/// Applies every damage in `list` to `file` in its own copy of the store and checks it.
fn run_damages(fx: &Fixture, file: &Path, list: &[Damage], report: &mut Report) {
    let original = fx.fs.file_bytes(file).unwrap();
    for d in list {
        let fs = fx.fs.deep_copy();
        let mut bytes = original.clone();
        d.apply(&mut bytes);
        fs.set_file_bytes(file, bytes);
        let what = format!("{} with {d:?}", file.display());
        let (verdict, filter_corrupt) = check(fx, &fs, file, &what);
        let mut label = d.name().to_string();
        if let (Damage::FlipBit(pos), true) = (d, file == fx.newer_table || file == fx.older_table)
        {
            let region = table_region(&original, *pos);
            if region == "filter" {
                // A damaged filter costs speed only.
                assert_eq!(
                    verdict,
                    Verdict::AllRight,
                    "{what}: filter damage changed an answer"
                );
                assert!(
                    filter_corrupt >= 1,
                    "{what}: filter_corrupt did not count it"
                );
            }
            label = format!("flip {region}");
        }
        if file == fx.manifest {
            assert_eq!(
                verdict,
                Verdict::RefusedAtOpen,
                "{what}: a damaged manifest must be refused"
            );
        }
        report.cases += 1;
        *report.by.entry((label, verdict)).or_default() += 1;
    }
}

fn print(name: &str, report: &Report) {
    eprintln!("{name}: {} damaged copies, 0 wrong answers", report.cases);
    for ((label, verdict), n) in &report.by {
        eprintln!("  {label:16} {verdict:?}: {n}");
    }
}

#[test]
fn every_byte_of_the_newer_table_damaged_gives_right_answers_or_corruption() {
    let fx = fixture();
    let len = fx.fs.file_bytes(&fx.newer_table).unwrap().len();
    let mut report = Report::default();
    run_damages(&fx, &fx.newer_table, &damages(len, 1), &mut report);
    print(&format!("newer table ({len} bytes)"), &report);
    // Every region was hit, and the filter region only ever cost speed.
    for region in ["data", "filter", "index", "properties", "footer"] {
        assert!(
            report
                .by
                .keys()
                .any(|(l, _)| l == &format!("flip {region}")),
            "no flip landed in the {region}"
        );
    }
}

#[test]
fn every_byte_of_the_older_table_flipped_never_shows_through_wrongly() {
    let fx = fixture();
    let len = fx.fs.file_bytes(&fx.older_table).unwrap().len();
    let list: Vec<Damage> = (0..len).map(Damage::FlipBit).collect();
    let mut report = Report::default();
    run_damages(&fx, &fx.older_table, &list, &mut report);
    print(&format!("older table ({len} bytes)"), &report);
}

#[test]
fn every_byte_of_the_wal_damaged_gives_a_prefix_or_corruption() {
    let fx = fixture();
    let len = fx.fs.file_bytes(&fx.wal).unwrap().len();
    let mut report = Report::default();
    run_damages(&fx, &fx.wal, &damages(len, 2), &mut report);
    print(&format!("WAL ({len} bytes)"), &report);
}

#[test]
fn every_byte_of_the_manifest_damaged_is_refused_naming_it() {
    let fx = fixture();
    let len = fx.fs.file_bytes(&fx.manifest).unwrap().len();
    let mut list = damages(len, 3);
    // Appending zeros or garbage, truncating: all break the checksum or the length.
    list.retain(|d| !matches!(d, Damage::Truncate(n) if *n == len));
    let mut report = Report::default();
    run_damages(&fx, &fx.manifest, &list, &mut report);
    print(&format!("manifest ({len} bytes)"), &report);
}

#[test]
fn a_missing_table_or_manifest_is_corruption_naming_it() {
    let fx = fixture();
    for file in [&fx.newer_table, &fx.older_table, &fx.manifest] {
        let fs = fx.fs.deep_copy();
        fs.remove(file).unwrap();
        match Db::open(DIR, options(&fs)) {
            Err(e @ Error::Corruption { .. }) => {
                let Error::Corruption { file: named, .. } = &e else {
                    unreachable!()
                };
                // A missing manifest is reported on the manifest, naming a stray file.
                assert_eq!(
                    named,
                    if file == &fx.manifest {
                        &fx.manifest
                    } else {
                        file
                    },
                    "{e}"
                );
            }
            other => panic!(
                "{} deleted: expected corruption, got {other:?}",
                file.display()
            ),
        }
    }
    // A missing WAL is a store whose unflushed writes never reached the disk: the
    // tables' contents remain.
    let fs = fx.fs.deep_copy();
    fs.remove(&fx.wal).unwrap();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..TABLE_KEYS {
        let got = db
            .get(tkey(i))
            .unwrap()
            .map(|b| String::from_utf8(b.to_vec()).unwrap());
        assert_eq!(&got, &fx.expected[&tkey(i)]);
    }
}

/// Numbers a file supplies (a sequence number, a file number) are counted on from at
/// open: past their ceilings (`MAX_SEQ`, `MAX_FILE_NUMBER`, 2^63 - 1) they are refused
/// as corruption, or the file is not the store's, and open never overflows.
#[test]
fn numbers_past_their_ceilings_are_refused_not_counted_on_from() {
    use bloomkv_kv::filename::{manifest_path, wal_file_name, MAX_FILE_NUMBER};
    use bloomkv_kv::manifest::{read_manifest, ManifestState};

    let fresh = || {
        let fs = MemFileSystem::new();
        let db = Db::open(DIR, options(&fs)).unwrap();
        db.put("a", "1").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
        let state = read_manifest(&fs, Path::new(DIR)).unwrap().unwrap();
        (fs, state)
    };
    let open = |fs: &MemFileSystem| {
        let fs = fs.clone();
        std::panic::catch_unwind(move || Db::open(DIR, options(&fs)))
            .unwrap_or_else(|_| panic!("open panicked"))
    };

    // A manifest whose checksum holds, with a number past its ceiling.
    let manifest = manifest_path(Path::new(DIR));
    for (next_file, last_seq) in [
        (u64::MAX, None),
        (MAX_FILE_NUMBER + 1, None),
        (0, Some(u64::MAX)),
    ] {
        let (fs, s) = fresh();
        let bad = ManifestState::new(
            next_file.max(s.next_file_number()),
            last_seq.unwrap_or(s.last_sequence()),
            s.wal_number(),
            s.tables().to_vec(),
        );
        fs.set_file_bytes(&manifest, bad.encode());
        match open(&fs) {
            Err(e) => assert!(is_corruption_of(&e, &manifest), "{e:?}"),
            Ok(_) => panic!("a manifest past a ceiling opened ({next_file}, {last_seq:?})"),
        }
    }

    // A log record, checksums valid, of an empty batch numbered u64::MAX: the log's
    // last record, so the default recovery drops it as a torn tail; either way the
    // store never counts on from it.
    let (fs, s) = fresh();
    let mut payload = u64::MAX.to_le_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_le_bytes());
    let mut log = Vec::new();
    bloomkv_kv::wal::encode_record(&payload, &mut log);
    fs.set_file_bytes(&Path::new(DIR).join(wal_file_name(s.wal_number())), log);
    match open(&fs) {
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "{e:?}"),
        Ok(db) => {
            db.put("b", "2").unwrap();
            assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
            assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
        }
    }

    // A file named with a number past the ceiling is not the store's: open leaves it
    // alone and numbers its own files as before.
    let (fs, _) = fresh();
    let stray = Path::new(DIR).join(wal_file_name(u64::MAX));
    fs.set_file_bytes(&stray, b"not ours".to_vec());
    let db = open(&fs).unwrap();
    db.put("b", "2").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = open(&fs).unwrap();
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(fs.read_all(&stray).unwrap(), b"not ours");
}
