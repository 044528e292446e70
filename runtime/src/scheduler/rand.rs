//! Victim selection: the xorshift PRNG (`FastRand`, shift triplet 17/7/16, the family
//! Tokio uses: a few shifts and xors per draw) and
//! Lemire's multiply-shift reduction to `[0, n)`, with no division. (The multiply-shift
//! maps 2^32 inputs onto n buckets whose sizes differ by at most one: for a steal victim
//! that is uniform to within n/2^32, which is all the fairness a victim choice needs.)

/// A per-worker xorshift64+ generator with two 32-bit halves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastRand {
    one: u32,
    two: u32,
}

impl FastRand {
    /// Seed from a 64-bit value; the seed mixes the worker index with the golden-ratio
    /// constant so workers draw different sequences.
    pub(crate) fn new(seed: u64) -> FastRand {
        let one = (seed >> 32) as u32;
        let mut two = seed as u32;
        if one == 0 && two == 0 {
            // The all-zero state is a fixed point of xorshift.
            two = 1;
        }
        FastRand { one, two }
    }

    /// A seed for worker `index`: the clock, mixed with the index.
    pub(crate) fn seed_for(index: usize) -> u64 {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        ts.wrapping_add((index as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub(crate) fn fastrand(&mut self) -> u32 {
        let mut s1 = self.one;
        let s0 = self.two;
        s1 ^= s1 << 17;
        s1 = s1 ^ s0 ^ (s1 >> 7) ^ (s0 >> 16);
        self.one = s0;
        self.two = s1;
        s0.wrapping_add(s1)
    }

    /// A value in `[0, n)` by Lemire's reduction: the high half of `rand * n`.
    pub(crate) fn fastrand_n(&mut self, n: u32) -> u32 {
        ((self.fastrand() as u64 * n as u64) >> 32) as u32
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fastrand_n_stays_in_range_and_covers_it() {
        let mut r = FastRand::new(FastRand::seed_for(3));
        let mut seen = [0u32; 7];
        for _ in 0..70_000 {
            let v = r.fastrand_n(7);
            assert!(v < 7);
            seen[v as usize] += 1;
        }
        // Each bucket gets about 10,000; a broken reduction would leave some empty.
        assert!(seen.iter().all(|&c| (9_000..11_000).contains(&c)), "{seen:?}");
    }

    #[test]
    fn zero_seed_does_not_get_stuck() {
        let mut r = FastRand::new(0);
        let a = r.fastrand();
        let b = r.fastrand();
        assert!(a != 0 || b != 0);
    }
}
