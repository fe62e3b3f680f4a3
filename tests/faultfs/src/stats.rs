//! Counters that let a test check that faultfs took effect (read with `stats`).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Stats {
    pub writes: AtomicU64,
    pub bytes_written: AtomicU64,
    pub reads: AtomicU64,
    /// Successful file fsyncs and fdatasyncs.
    pub fsyncs: AtomicU64,
    /// Successful directory fsyncs.
    pub fsyncdirs: AtomicU64,
    /// Bytes written to the durable store by fsyncs.
    pub bytes_durable: AtomicU64,
    /// Operations failed on purpose by a fault rule.
    pub faults: AtomicU64,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// `name=value` pairs, space-separated.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "fsyncs={} fsyncdirs={} writes={} bytes_written={} bytes_durable={} reads={} faults={}",
            get(&self.fsyncs),
            get(&self.fsyncdirs),
            get(&self.writes),
            get(&self.bytes_written),
            get(&self.bytes_durable),
            get(&self.reads),
            get(&self.faults),
        )
    }
}
