//! The store in a dozen lines: open, put, get, delete, scan, batch, stats.
//!
//! `cargo run --example quickstart`

use bloomkv::{Db, Options, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;

    db.put("apple", "red")?;
    db.put("banana", "yellow")?;
    db.put("cherry", "dark red")?;
    db.delete("banana")?;

    // Several writes that land together or not at all, also across a crash.
    let mut batch = WriteBatch::new();
    batch.put("date", "brown");
    batch.put("elderberry", "purple");
    db.write(batch)?;

    // Move everything into an SSTable with a Bloom filter block.
    db.flush()?;

    println!("apple  -> {:?}", db.get("apple")?);
    println!("banana -> {:?}", db.get("banana")?);
    // "coconut" lies inside the table's key range; the filter rules it out without a read.
    println!("coconut -> {:?}", db.get("coconut")?);

    println!("scan [b, e):");
    for item in db.scan("b".."e") {
        let (key, value) = item?;
        println!(
            "  {} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }

    let stats = db.stats();
    println!(
        "gets {}, filter checks {}, reads avoided {}, data-block reads {}, tables {:?}",
        stats.gets,
        stats.filter_checks,
        stats.filter_negatives,
        stats.data_block_reads,
        stats.tables_per_level
    );
    db.close()?;
    Ok(())
}
