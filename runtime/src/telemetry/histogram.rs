//! Fixed log2 histograms: 32 owner-written counters, no allocation to record.
//!
//! Bucket 0 holds 0 and 1; bucket `i` (1..=30) holds `[2^i, 2^(i+1))`; bucket 31 holds
//! everything from 2^31 up. Recording is one `leading_zeros` and one counter increment.

use super::Counter;

/// Buckets per histogram.
pub const BUCKETS: usize = 32;

/// A histogram written by one owner (a worker).
#[derive(Default)]
pub(crate) struct LogHistogram {
    buckets: [Counter; BUCKETS],
    /// The sum of the recorded values (what Prometheus's `_sum` needs).
    sum: Counter,
}

#[inline]
pub(crate) fn bucket(v: u64) -> usize {
    ((63 - (v | 1).leading_zeros()) as usize).min(BUCKETS - 1)
}

impl LogHistogram {
    /// Owner only.
    #[inline]
    pub(crate) fn record(&self, v: u64) {
        self.buckets[bucket(v)].inc();
        self.sum.add(v);
    }

    /// Add this histogram's counts into `into`.
    pub(crate) fn add_to(&self, into: &mut Histogram) {
        for (o, b) in into.buckets.iter_mut().zip(self.buckets.iter()) {
            *o += b.get();
        }
        into.sum = into.sum.wrapping_add(self.sum.get());
    }
}

/// A read-out histogram: `buckets[i]` counts values in [`Histogram::bucket_range`]`(i)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// Counts per bucket.
    pub buckets: Vec<u64>,
    /// The sum of all recorded values (read a moment apart from the buckets, like every
    /// snapshot value).
    pub sum: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { buckets: vec![0; BUCKETS], sum: 0 }
    }
}

impl Histogram {
    /// The values bucket `i` holds: `lo..hi` (`hi` is `u64::MAX` for the last).
    pub fn bucket_range(i: usize) -> std::ops::Range<u64> {
        let lo = if i == 0 { 0 } else { 1u64 << i };
        let hi = if i + 1 >= BUCKETS { u64::MAX } else { 1u64 << (i + 1) };
        lo..hi
    }

    /// Total count.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The upper bound of the bucket holding the `q`-quantile (0.0..=1.0), or `None` if empty.
    pub fn quantile_upper_bound(&self, q: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let target = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= target {
                return Some(Histogram::bucket_range(i).end);
            }
        }
        None
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 1);
        assert_eq!(bucket(1024), 10);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for v in [0u64, 1, 5, 77, 1 << 20, 123_456_789] {
            assert!(Histogram::bucket_range(bucket(v)).contains(&v), "{v}");
        }
    }

    #[test]
    fn counts_and_quantiles() {
        let h = LogHistogram::default();
        for v in [1u64, 2, 3, 100, 1000] {
            h.record(v);
        }
        let mut out = Histogram::default();
        h.add_to(&mut out);
        assert_eq!(out.count(), 5);
        assert_eq!(out.sum, 1106);
        assert_eq!(out.quantile_upper_bound(0.5), Some(4));
        assert_eq!(out.quantile_upper_bound(1.0), Some(1024));
    }
}
