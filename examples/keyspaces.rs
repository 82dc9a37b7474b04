//! Two keyspaces, two filter settings, one store: what each keyspace's filter buys.
//!
//! A message pipeline keeps a de-duplication set ("have I seen this message id?",
//! asked mostly about ids it has never seen) and the message bodies (read only by ids
//! it knows). The first is all absent lookups, where a filter saves a disk read each
//! time; the second is all present lookups, where a filter only costs memory. So the
//! dedup keyspace gets a Ribbon filter at 16 bits per key, the bodies none, and one
//! write batch records a message in both: both or neither, also across a crash.
//!
//! The run stores `MESSAGES` messages, flushes, asks the dedup keyspace about as many
//! never-seen ids, and prints each keyspace's counters: table probes, probes the
//! filter answered "no" (a read avoided), data-block reads, filter memory.
//!
//! ```text
//! cargo run --release --example keyspaces -- [MESSAGES]
//! ```

use bloomkv::kv::{Db, FilterKind, Keyspace, Options, WriteBatch};

fn id(i: u64) -> String {
    format!("msg-{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// What one keyspace's counters say after the lookups.
#[derive(Debug)]
struct Tally {
    probes: u64,
    filter_negatives: u64,
    reads: u64,
    filter_bytes: u64,
}

fn tally(ks: &Keyspace) -> Tally {
    let s = ks.stats();
    Tally {
        probes: s.table_probes,
        filter_negatives: s.filter_negatives,
        reads: s.data_block_reads,
        filter_bytes: s.filter_memory_bytes,
    }
}

/// Stores `messages` messages in `dir`, then looks up as many unseen ids in the dedup
/// keyspace and every stored body; returns the two keyspaces' tallies.
fn run(dir: &std::path::Path, messages: u64) -> bloomkv::kv::Result<(Tally, Tally)> {
    let db = Db::open(dir, Options::default())?;
    let seen = db.keyspace(
        "seen",
        Options {
            filter: FilterKind::Ribbon,
            bits_per_key: 16.0,
            ..Options::default()
        },
    )?;
    let bodies = db.keyspace(
        "bodies",
        Options {
            filter: FilterKind::None,
            ..Options::default()
        },
    )?;
    for i in 0..messages {
        let mut batch = WriteBatch::new();
        batch.put_in(&seen, id(i), "");
        batch.put_in(&bodies, id(i), format!("body of message {i}"));
        db.write(batch)?;
    }
    seen.flush()?;
    bodies.flush()?;
    for i in messages..2 * messages {
        assert!(seen.get(id(i))?.is_none());
    }
    for i in 0..messages {
        assert!(bodies.get(id(i))?.is_some());
    }
    Ok((tally(&seen), tally(&bodies)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let messages: u64 = match std::env::args().nth(1) {
        Some(n) => n.replace('_', "").parse()?,
        None => 100_000,
    };
    let dir = tempfile::tempdir()?;
    let (seen, bodies) = run(dir.path(), messages)?;
    println!("{messages} messages; {messages} unseen ids asked of \"seen\", every body read from \"bodies\"");
    for (name, t) in [
        ("seen (Ribbon, 16 bits/key)", &seen),
        ("bodies (no filter)", &bodies),
    ] {
        println!(
            "{name:28} probes {:>8}  filter said no {:>8}  block reads {:>8}  filter {:>8} bytes",
            t.probes, t.filter_negatives, t.reads, t.filter_bytes
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dedup keyspace's filter answers almost every unseen id without a read; the
    /// bodies keyspace spends no filter memory and reads once per body.
    #[test]
    fn each_keyspace_gets_what_its_filter_setting_buys() {
        let dir = tempfile::tempdir().unwrap();
        let n = 20_000;
        let (seen, bodies) = run(dir.path(), n).unwrap();
        // Ribbon at 16 bits/key: an FP rate near 2^-16. Even at four times that, 20,000
        // lookups give a mean of 1.2 false positives (binomial sigma 1.1): 20 reads
        // would be 17 sigma out.
        assert!(seen.probes > n - 100, "{seen:?}");
        assert!(seen.filter_negatives >= n - 20, "{seen:?}");
        assert!(seen.reads <= 20, "{seen:?}");
        assert!(seen.filter_bytes > 0);
        assert_eq!(bodies.filter_bytes, 0, "{bodies:?}");
        assert_eq!(bodies.filter_negatives, 0, "{bodies:?}");
        assert!(bodies.reads > 0, "{bodies:?}");
    }
}
