//! The source documents' first example: a filter sized for 1000 items at 1% false
//! positives holds seven fruits and rejects "watermelon"; then a badly sized filter
//! (20 bits, 2 hashes, 10 items) fills to ~70% and starts answering "maybe" for
//! fruits it never saw.
//!
//! The formulas behind both filters, derived: `docs/GUIDE.md`, section 3 (its exercises
//! use this example).
//!
//! Run: `cargo run --example fruits`

use bloomkv::{BloomFilter, FilterError};

const FRUITS: [&str; 7] = [
    "apple", "banana", "cherry", "grape", "orange", "pear", "mango",
];
const TEN_ITEMS: [&str; 10] = [
    "apple", "banana", "cherry", "grape", "orange", "pear", "mango", "kiwi", "lemon", "plum",
];
const ABSENT: [&str; 12] = [
    "watermelon",
    "apricot",
    "blueberry",
    "coconut",
    "date",
    "fig",
    "guava",
    "lime",
    "lychee",
    "papaya",
    "peach",
    "quince",
];

fn main() -> Result<(), FilterError> {
    let mut filter = BloomFilter::with_rate(1000, 0.01)?;
    println!("Optimal size: {}", filter.num_bits());
    println!("Optimal hash count: {}", filter.num_hashes());
    for fruit in FRUITS {
        filter.insert(fruit);
    }
    println!();
    println!("'watermelon' in filter: {}", filter.contains("watermelon"));
    println!("Statistics: {}", json(&filter));

    // Too small for its load: 20 bits, 2 hashes, 10 items.
    let mut small = BloomFilter::new(20, 2)?;
    for item in TEN_ITEMS {
        small.insert(item);
    }
    println!();
    println!(
        "Small filter: 'watermelon' in filter: {}",
        small.contains("watermelon")
    );
    println!("Small filter statistics: {}", json(&small));

    // Which fruits it never saw does it claim to have seen? With ~40% predicted,
    // about one in three of these comes out "maybe".
    let false_positives: Vec<&str> = ABSENT
        .iter()
        .copied()
        .filter(|f| small.contains(f))
        .collect();
    println!(
        "Small filter false positives among {} absent fruits: {} {:?}",
        ABSENT.len(),
        false_positives.len(),
        false_positives
    );
    for fruit in TEN_ITEMS {
        assert!(
            small.contains(fruit),
            "a Bloom filter never forgets an item"
        );
    }
    Ok(())
}

fn json(filter: &BloomFilter) -> String {
    serde_json::to_string_pretty(&filter.stats()).unwrap_or_else(|e| format!("<{e}>"))
}
