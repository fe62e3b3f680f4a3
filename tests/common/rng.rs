//! Seeded random numbers for the randomized suites, faultfs's own included (it includes this
//! file by path): a printed seed replays a run.

use std::time::{SystemTime, UNIX_EPOCH};

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    // A seeded generator, not an iterator: it never ends, and callers want the number itself.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// The `n`-th generator of its own drawn from `seed` (splitmix64): a randomized suite gives
    /// each case one, so that case `n` of a seed is the same whatever the cases before it drew.
    pub fn split(seed: u64, n: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(n.wrapping_add(1)));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // Never 0, which xorshift would keep at 0.
        Rng((z ^ (z >> 31)) | 1)
    }
}

/// The seed in the environment variable `var`, or one from the clock (never 0, which xorshift
/// would keep at 0); printed with how to replay it.
pub fn seed(var: &str, suite: &str) -> u64 {
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let seed = std::env::var(var).ok().and_then(|s| s.parse().ok());
    let seed = seed.unwrap_or_else(|| now().as_nanos() as u64 | 1);
    eprintln!("{suite}: seed {seed} ({var}={seed} replays it)");
    seed
}
