//! TPC-H rows as keys and values: the loader, and the range filter on their keys.

use bloomkv_peers::tpch::{deal, line_queries, range_fp, Table, TpchRows};

fn rows(table: Table, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    TpchRows::new(0.01, 1 << 20).rows(table, n)
}

#[test]
fn the_loaders_keys_are_unique_and_its_values_deterministic() {
    for table in [Table::Orders, Table::LineItem] {
        let a = rows(table, 5000);
        assert_eq!(a.len(), 5000);
        let mut keys: Vec<&Vec<u8>> = a.iter().map(|(k, _)| k).collect();
        // Generation order is key order.
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{}", table.name());
        keys.dedup();
        assert_eq!(keys.len(), 5000, "{}", table.name());
        assert_eq!(a, rows(table, 5000), "{}", table.name());
        for (k, v) in &a {
            assert!(k.starts_with(table.name().as_bytes()));
            let text = std::str::from_utf8(v).unwrap();
            assert!(text.ends_with('|'), "{text}");
            // The row's first column is the order key the key names.
            let order: i64 = text.split('|').next().unwrap().parse().unwrap();
            let key = std::str::from_utf8(k).unwrap();
            assert!(key.contains(&format!("{order:010}")), "{key} {text}");
        }
    }
}

/// The range filter's false positives on TPC-H line-item keys against its bound, per
/// table (counts printed with `--nocapture`): every table's false positives within 3σ
/// (binomial) of its bound, and no two keys merged by the key map.
#[test]
fn range_filter_on_lineitem_keys_against_its_bound() {
    // Orders from the start and the end of SF1's order keys (1 to 6,000,000): the
    // tables span seven digits of order key, as tables of a real SF1 store do.
    let source = TpchRows::new(1.0, 1 << 20);
    let keys: Vec<Vec<u8>> = [1, 1500]
        .into_iter()
        .flat_map(|part| source.part_rows(Table::LineItem, part, 1500, 20_000))
        .map(|(k, _)| k)
        .collect();
    let tables = deal(&keys, 4, 7);
    for (kind, absent_orders) in [("absent line", false), ("absent order", true)] {
        let fp = range_fp("lineitem", kind, &tables, |t| {
            line_queries(t, absent_orders)
        })
        .unwrap();
        for r in &fp {
            println!(
                "{} {:>12} table {}: {} keys -> {} mapped (prefix {} B, {} B read); {} empty ranges, {} too long, {} searched, FP {:.5} against bound {:.5}",
                r.keys, r.query, r.table, r.table_keys, r.mapped_keys, r.prefix_len, r.mapped_bytes,
                r.queries, r.too_long, r.searched, r.fp, r.bound
            );
            assert_eq!(
                r.mapped_keys, r.table_keys,
                "keys merged in table {}",
                r.table
            );
            assert!(r.searched > 500 && r.too_long == 0, "{kind}: {r:?}");
            let (n, p) = (r.searched as f64, r.bound);
            let limit = n * p + 3.0 * (n * p * (1.0 - p)).sqrt();
            assert!(
                (r.false_positives as f64) <= limit,
                "{kind} table {}: {} false positives of {}, bound allows {limit:.1}",
                r.table,
                r.false_positives,
                r.searched
            );
        }
    }
}
