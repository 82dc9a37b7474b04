//! A store under another row label, so bloomkv's rows say "bloomkv" beside the peers.

use bloomkv_bench::{BenchError, BenchStore, FilterShape, StoreCounters, KEY_LEN};

/// `S` with its rows labeled `label`; everything else passes through.
pub struct Labeled<S> {
    label: String,
    inner: S,
}

impl<S: BenchStore> Labeled<S> {
    /// Wraps `inner` under `label`.
    pub fn new(label: impl Into<String>, inner: S) -> Self {
        Labeled {
            label: label.into(),
            inner,
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: BenchStore> BenchStore for Labeled<S> {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.inner.put(key, value)
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        self.inner.end_table()
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        self.inner.reopen()
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        self.inner.get(key)
    }

    fn multi_get(&self, keys: &[[u8; KEY_LEN]]) -> Result<u64, BenchError> {
        self.inner.multi_get(keys)
    }

    fn counters(&self) -> StoreCounters {
        self.inner.counters()
    }

    fn filter_shape(&self) -> FilterShape {
        self.inner.filter_shape()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn drop_caches(&self) {
        self.inner.drop_caches()
    }

    fn uring_reads(&self) -> Option<u64> {
        self.inner.uring_reads()
    }

    fn disk_bytes(&self) -> Option<u64> {
        self.inner.disk_bytes()
    }
}
