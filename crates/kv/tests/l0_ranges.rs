//! The range check a get makes on each L0 table, at its edges.
//!
//! A get compares its key with each L0 table's smallest and largest key through words
//! taken after the tables' common prefix (`version.rs`, `L0Bounds`), and falls back to
//! whole keys only when the words tie. These tables are built so that every way the
//! words can mislead is met: bounds that differ only past the word, keys shorter than
//! the prefix or ending inside the word, zero bytes that padding could confuse, keys
//! outside the prefix on both sides. Every get must answer as a model does, and an
//! absent key must be checked against exactly the tables whose range holds it (the
//! store's `table_probes`): a table wrongly left out could lose a key, one wrongly
//! let in costs a probe.

use std::collections::BTreeMap;

use bloomkv_kv::{Db, Options};

/// One flush each: every table's keys share `p/abcdefgh` except where noted.
fn tables() -> Vec<Vec<Vec<u8>>> {
    let k = |s: &[u8]| s.to_vec();
    vec![
        // Bounds equal in the 8 bytes after the prefix, apart only after them.
        vec![k(b"p/abcdefgh/12345678a"), k(b"p/abcdefgh/12345678z")],
        // Bounds that end inside the word, one a prefix of the other.
        vec![
            k(b"p/abcdefgh/1"),
            k(b"p/abcdefgh/1\0"),
            k(b"p/abcdefgh/12"),
        ],
        // A bound that is the prefix itself, and zero bytes after it.
        vec![
            k(b"p/abcdefgh"),
            k(b"p/abcdefgh\0\0"),
            k(b"p/abcdefgh\0\x01"),
        ],
        // A wide table: its bounds differ in the first byte after the prefix.
        vec![
            k(b"p/abcdefgh"),
            k(b"p/abcdefgh/5"),
            k(b"p/abcdefgh\xff\xff"),
        ],
        // A newer version of keys the older tables hold.
        vec![k(b"p/abcdefgh/12345678a"), k(b"p/abcdefgh/1")],
    ]
}

/// Keys to look up: every written key, and around each of them the keys that sit at
/// the edge of a word: shorter, longer by a zero or 0xff byte, the last byte moved.
fn lookups(written: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<Vec<u8>> {
    let mut keys = vec![
        b"".to_vec(),
        b"p".to_vec(),
        b"p/abcdefg".to_vec(),
        b"p/abcdefh".to_vec(),
        b"p/abcdefgh\0".to_vec(),
        b"p/abcdefgh\0\0\0\0\0\0\0\0\0".to_vec(),
        b"q".to_vec(),
        b"\xff".to_vec(),
    ];
    for key in written.keys() {
        keys.push(key.clone());
        for n in 1..key.len() {
            keys.push(key[..n].to_vec());
        }
        for extra in [0u8, 1, 0xff] {
            let mut longer = key.clone();
            longer.push(extra);
            keys.push(longer);
        }
        let last = key.len() - 1;
        for delta in [-1i16, 1] {
            let mut moved = key.clone();
            let b = i16::from(moved[last]) + delta;
            if let Ok(b) = u8::try_from(b) {
                moved[last] = b;
                keys.push(moved);
            }
        }
    }
    keys.retain(|k| !k.is_empty()); // the store refuses the empty key
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn gets_at_the_edges_of_l0_ranges_answer_like_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        disable_auto_compaction: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = BTreeMap::new();
    let mut ranges = Vec::new();
    for (t, keys) in tables().into_iter().enumerate() {
        for key in &keys {
            let value = format!("table {t}").into_bytes();
            db.put(key, &value).unwrap();
            model.insert(key.clone(), value);
        }
        db.flush().unwrap();
        let lo = keys.iter().min().unwrap().clone();
        let hi = keys.iter().max().unwrap().clone();
        ranges.push((lo, hi));
    }
    assert_eq!(
        db.stats().tables_per_level[0],
        ranges.len(),
        "one L0 table per flush"
    );

    let keys = lookups(&model);
    assert!(keys.len() > 60, "{} lookups", keys.len());
    let mut absent = 0;
    for key in &keys {
        let before = db.stats().table_probes;
        let got = db.get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            model.get(key).map(Vec::as_slice),
            "get {key:?}"
        );
        if got.is_none() {
            // An absent key is checked in every table whose range holds it, no other.
            let holding = ranges
                .iter()
                .filter(|(lo, hi)| lo <= key && key <= hi)
                .count() as u64;
            let probes = db.stats().table_probes - before;
            assert_eq!(probes, holding, "tables probed for absent {key:?}");
            absent += 1;
        }
    }
    assert!(absent > 40, "{absent} absent lookups");
}
