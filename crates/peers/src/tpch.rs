//! Data a user has: TPC-H rows as keys and values, from the `tpchgen` crate.
//!
//! Two tables of TPC-H's schema, keyed as an application keys them in a key-value
//! store, by text with zero-padded numbers so that key order is number order:
//!
//! ```text
//! orders/0000000001         1|37|O|131251.81|1996-01-02|5-LOW|Clerk#000000951|0|nstructions sleep…|
//! lineitem/0000000001/01    1|156|4|1|17|17954.55|0.04|0.02|N|O|1996-03-13|…|egular courts above the|
//! lineitem/0000000001/02    1|68|9|2|36|34850.16|0.09|0.06|N|O|1996-04-12|…|ly final dependencies…|
//! ```
//!
//! The value is the row as dbgen prints it. Order keys are sparse (TPC-H uses the
//! first 8 of every 32), an order has 1 to 7 lines: both leave empty key ranges that
//! a range query asks about ("any lines of order 5?", "has order 1 a line 8?").
//!
//! dbgen draws comments from a 300 MiB pool of generated text; [`TpchRows::new`]
//! takes the pool's size, so tests can use a small one (values keep their shape and
//! distributions; comments repeat sooner).

use std::ops::Bound;

use bloomkv::filter::{RangeFilterBuilder, RangeFilterReader};
use tpchgen::distribution::Distributions;
use tpchgen::generators::{LineItemGenerator, OrderGenerator};
use tpchgen::text::TextPool;

use crate::ycsb::generator::SplitMix64;

/// dbgen's text pool: 300 MiB.
pub const DBGEN_TEXT_POOL: usize = 300 << 20;

/// The key of order `orderkey`.
pub fn order_key(orderkey: i64) -> Vec<u8> {
    format!("orders/{orderkey:010}").into_bytes()
}

/// The key of line `line` of order `orderkey`.
pub fn line_key(orderkey: i64, line: i32) -> Vec<u8> {
    format!("lineitem/{orderkey:010}/{line:02}").into_bytes()
}

/// Which TPC-H table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// ORDERS: 1.5 M rows per unit of scale.
    Orders,
    /// LINEITEM: about 6 M rows per unit of scale.
    LineItem,
}

impl Table {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Orders => "orders",
            Table::LineItem => "lineitem",
        }
    }
}

/// A source of TPC-H rows at one scale factor, with its own text pool.
pub struct TpchRows {
    scale: f64,
    pool: TextPool,
}

impl TpchRows {
    /// Rows at `scale` (1.0 = TPC-H's SF1), comments from a pool of `pool_bytes`
    /// (at least 1 KiB; dbgen's is [`DBGEN_TEXT_POOL`]).
    pub fn new(scale: f64, pool_bytes: usize) -> Self {
        let size = pool_bytes.clamp(1 << 10, i32::MAX as usize) as i32;
        TpchRows {
            scale,
            pool: TextPool::new(size, Distributions::static_default()),
        }
    }

    /// The first `limit` rows of `table` in generation order (key order), as
    /// (key, value).
    pub fn rows(&self, table: Table, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.part_rows(table, 1, 1, limit)
    }

    /// The first `limit` rows of part `part` (1-based) of `parts` equal parts of
    /// `table`: dbgen's way to generate a slice of a large table on its own.
    pub fn part_rows(
        &self,
        table: Table,
        part: i32,
        parts: i32,
        limit: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let d = Distributions::static_default();
        match table {
            Table::Orders => OrderGenerator::new_with_distributions_and_text_pool(
                self.scale, part, parts, d, &self.pool,
            )
            .iter()
            .take(limit)
            .map(|o| (order_key(o.o_orderkey), o.to_string().into_bytes()))
            .collect(),
            Table::LineItem => LineItemGenerator::new_with_distributions_and_text_pool(
                self.scale, part, parts, d, &self.pool,
            )
            .iter()
            .take(limit)
            .map(|l| {
                (
                    line_key(l.l_orderkey, l.l_linenumber),
                    l.to_string().into_bytes(),
                )
            })
            .collect(),
        }
    }
}

/// What a table's range filter answered about empty ranges, beside its bound.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RangeFp {
    /// The key set (`lineitem`, `orders`, `ycsb`).
    pub keys: String,
    /// The query kind.
    pub query: String,
    /// The table (0-based).
    pub table: usize,
    /// Keys in the table.
    pub table_keys: u64,
    /// Distinct integers the keys mapped to (fewer than `table_keys`: keys merged).
    pub mapped_keys: u64,
    /// Bytes of common prefix the map dropped, and bytes it read after it.
    pub prefix_len: usize,
    /// Bytes read after the prefix.
    pub mapped_bytes: usize,
    /// Empty ranges asked.
    pub queries: u64,
    /// Of those, answered "maybe" without a search (mapped length over the filter's L).
    pub too_long: u64,
    /// Of the searched ones, answered "maybe" (false positives).
    pub false_positives: u64,
    /// Searched ones.
    pub searched: u64,
    /// Observed rate: false positives / searched.
    pub fp: f64,
    /// The filter's bound averaged over the searched ranges: mean of `n·l/r`.
    pub bound: f64,
}

/// An empty range to ask a table: `[start, end]`.
pub type Query = (Vec<u8>, Vec<u8>);

/// Builds a range filter over each of `tables` key sets (16 bits per key, ranges up
/// to 64 mapped keys: the store's defaults) and asks each the empty ranges that
/// `queries(table_keys)` gives; each query is checked empty against the table's keys
/// first.
pub fn range_fp(
    name: &str,
    query_kind: &str,
    tables: &[Vec<Vec<u8>>],
    queries: impl Fn(&[Vec<u8>]) -> Vec<Query>,
) -> Result<Vec<RangeFp>, bloomkv::filter::FilterError> {
    let mut out = Vec::new();
    for (t, keys) in tables.iter().enumerate() {
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let mut b = RangeFilterBuilder::new(16.0, 64)?;
        for k in &sorted {
            b.add_key(k);
        }
        let reader = RangeFilterReader::open(&b.finish())?;
        let stats = reader.stats();
        let (mut asked, mut too_long, mut fps, mut searched, mut bound) = (0, 0, 0, 0, 0.0);
        for (a, z) in queries(&sorted) {
            // Empty in this table: no key in [a, z].
            let i = sorted.partition_point(|k| k < &a);
            if sorted.get(i).is_some_and(|k| k <= &z) || a > z {
                continue;
            }
            // Outside the table's key range the filter answers by comparison alone.
            if sorted.first().is_none_or(|f| &z < f) || sorted.last().is_none_or(|l| &a > l) {
                continue;
            }
            asked += 1;
            let lo = reader.map_key(a.as_slice().max(&sorted[0][..]));
            let hi = reader.map_key(z.as_slice().min(&sorted[sorted.len() - 1][..]));
            let len = hi - lo + 1;
            let maybe = reader.may_contain_range(&a, Bound::Included(&z));
            let b = reader.fp_bound(len);
            if b >= 1.0 {
                too_long += 1;
                continue;
            }
            searched += 1;
            bound += b;
            fps += maybe as u64;
        }
        out.push(RangeFp {
            keys: name.into(),
            query: query_kind.into(),
            table: t,
            table_keys: stats.keys,
            mapped_keys: stats.stored_hashes,
            prefix_len: stats.prefix_len,
            mapped_bytes: stats.mapped_bytes,
            queries: asked,
            too_long,
            false_positives: fps,
            searched,
            fp: fps as f64 / searched.max(1) as f64,
            bound: bound / searched.max(1) as f64,
        });
    }
    Ok(out)
}

/// Deals `keys` into `tables` overlapping tables at random (seeded), as the flat
/// benchmark shape does.
pub fn deal(keys: &[Vec<u8>], tables: usize, seed: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = SplitMix64::new(seed);
    let mut out = vec![Vec::new(); tables.max(1)];
    for k in keys {
        out[rng.below(tables.max(1) as u64) as usize].push(k.clone());
    }
    out
}

/// Queries for line-item tables, about the orders the table holds lines of: "has
/// order o a line n" for each line 1–8 the table lacks (`[key, key]`), or, with
/// `absent_orders`, "any lines of order o + 1" where the table has none
/// (`[lineitem/o+1/, lineitem/o+1/99]`; TPC-H's order keys are sparse).
pub fn line_queries(table: &[Vec<u8>], absent_orders: bool) -> Vec<Query> {
    let parse = |k: &[u8]| -> Option<i64> { std::str::from_utf8(k.get(9..19)?).ok()?.parse().ok() };
    let mut orders: Vec<i64> = table.iter().filter_map(|k| parse(k)).collect();
    orders.dedup();
    let mut q = Vec::new();
    for &o in &orders {
        if absent_orders {
            q.push((
                format!("lineitem/{:010}/", o + 1).into_bytes(),
                line_key(o + 1, 99),
            ));
        } else {
            for line in 1..=8 {
                let k = line_key(o, line);
                q.push((k.clone(), k));
            }
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_their_numbers() {
        assert!(line_key(9, 7) < line_key(10, 1));
        assert!(line_key(10, 2) < line_key(10, 10));
        assert!(order_key(99) < order_key(100));
    }
}
