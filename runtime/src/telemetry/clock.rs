//! The clock that times polls and stamps events, used by the scheduler whether or not
//! the event ring is on (poll-time histograms, the per-task statistics, the ring).
//!
//! Recording must be cheap, so a reading is raw clock ticks: the x86-64 time-stamp
//! counter where it is invariant (about 10 ns to read here, against about 25 ns for
//! `Instant::now()`), else nanoseconds from `Instant`. Readers convert to nanoseconds since
//! the runtime started, with a tick rate measured against `Instant` once per process.

use std::time::{Duration, Instant};

/// `ticks` at `ns_per_tick_fp` (32.32 fixed point) nanoseconds each.
#[inline(always)]
pub(crate) fn scale_ticks(ticks: u64, ns_per_tick_fp: u64) -> u64 {
    ((ticks as u128 * ns_per_tick_fp as u128) >> 32) as u64
}

/// Reads the clock that times polls and stamps events.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    start: Instant,
    tsc0: u64,
    use_tsc: bool,
    /// Nanoseconds per tick in 32.32 fixed point, measured once at start.
    ns_per_tick_fp: u64,
}

/// Whether the CPU's time-stamp counter runs at a constant rate in all states (`cpuid`
/// leaf 0x8000_0007, EDX bit 8), so it can time events across cores.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn invariant_tsc() -> bool {
    let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
}

/// The time-stamp counter's rate, measured against `Instant` over 200 µs the first time a
/// runtime times its polls, once per process (the rate is invariant).
///
/// Each end of the span is an `Instant` read between two TSC reads. A thread preempted
/// between its `Instant` and TSC reads would skew the rate by the whole preemption (on a
/// loaded machine, milliseconds against a 200 µs span), so a measurement whose brackets
/// add up to more than 1/256 of the span is taken again (up to 1,000 times; then the
/// tightest one seen is used).
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn tsc_ns_per_tick_fp() -> u64 {
    /// An `Instant` and the TSC at the same moment, within the returned bracket width.
    fn paired_read() -> (Instant, u64, u64) {
        // SAFETY: `rdtsc` has no preconditions on x86-64.
        let a = unsafe { core::arch::x86_64::_rdtsc() };
        let i = Instant::now();
        // SAFETY: as above.
        let b = unsafe { core::arch::x86_64::_rdtsc() };
        (i, a / 2 + b / 2, b.saturating_sub(a))
    }
    static RATE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| {
        let mut best: Option<(u128, u64)> = None; // (bracket per span, 2^-32 scaled; rate)
        for _ in 0..1_000 {
            let (i0, t0, w0) = paired_read();
            while i0.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            let (i1, t1, w1) = paired_read();
            let Some(span) = t1.checked_sub(t0).filter(|&s| s > 0) else { continue };
            let rate = (((i1 - i0).as_nanos() << 32) / span as u128) as u64;
            let spread = (((w0 + w1) as u128) << 32) / span as u128;
            if (w0 + w1) as u128 * 256 <= span as u128 {
                return rate;
            }
            if best.is_none_or(|(s, _)| spread < s) {
                best = Some((spread, rate));
            }
        }
        best.map_or(1 << 32, |(_, rate)| rate)
    })
}
#[cfg(any(not(target_arch = "x86_64"), miri))]
fn tsc_ns_per_tick_fp() -> u64 {
    1 << 32
}

impl Clock {
    pub(crate) fn new() -> Clock {
        // Miri cannot run `cpuid`/`rdtsc`; it checks the same code on `Instant`.
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        let use_tsc = invariant_tsc();
        #[cfg(any(not(target_arch = "x86_64"), miri))]
        let use_tsc = false;
        let ns_per_tick_fp = if use_tsc { tsc_ns_per_tick_fp() } else { 1 << 32 };
        let mut c = Clock { start: Instant::now(), tsc0: 0, use_tsc, ns_per_tick_fp };
        c.tsc0 = c.raw();
        c
    }

    /// Nanoseconds per tick, 32.32 fixed point.
    #[inline(always)]
    pub(crate) fn ns_per_tick_fp(&self) -> u64 {
        self.ns_per_tick_fp
    }

    /// A tick count (a difference of raw readings) in nanoseconds.
    #[inline(always)]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> u64 {
        scale_ticks(ticks, self.ns_per_tick_fp)
    }

    /// Nanoseconds as a tick count (the inverse of `ticks_to_ns`, to a tick).
    pub(crate) fn ns_to_ticks(&self, ns: u64) -> u64 {
        (((ns as u128) << 32) / self.ns_per_tick_fp.max(1) as u128).min(u64::MAX as u128) as u64
    }

    /// Raw ticks (cheap).
    #[inline(always)]
    pub(crate) fn raw(&self) -> u64 {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if self.use_tsc {
            // SAFETY: `rdtsc` has no preconditions on x86-64.
            return unsafe { core::arch::x86_64::_rdtsc() };
        }
        self.start.elapsed().as_nanos() as u64
    }

    /// A raw reading to nanoseconds since start.
    pub(crate) fn since_start_ns(&self, raw: u64) -> u64 {
        self.ticks_to_ns(raw.saturating_sub(self.tsc0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Miri's clock advances with interpretation, so 5% of a span means nothing there.
    #[cfg_attr(miri, ignore)]
    #[test]
    fn clock_is_monotonic_and_converts_to_elapsed_ns() {
        let c = Clock::new();
        let a = c.raw();
        std::thread::sleep(Duration::from_millis(5));
        // `Instant` just before and just after the read brackets the true time, however
        // long the thread is preempted in between.
        let before = c.start.elapsed().as_nanos() as f64;
        let b = c.raw();
        let after = c.start.elapsed().as_nanos() as f64;
        assert!(b > a);
        let ns = c.since_start_ns(b);
        assert!(ns >= 4_000_000, "{ns} ns");
        // Within 5% of `Instant` over the same span.
        let ns = ns as f64;
        assert!(ns >= before * 0.95 && ns <= after * 1.05, "{ns} ns, not within 5% of [{before}, {after}]");
    }
}
