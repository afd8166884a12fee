//! The render seed and the generator behind `randInt` and `now`.
//!
//! fedvol's decisions are replayable, so rendering is too: the same template file name and the
//! same merged values always render the same text. The seed is the first 8 bytes
//! (little-endian) of SHA-256 over a version tag, the template's file name (its last path
//! component, so the directory it sits in does not matter) and an unambiguous encoding of every
//! value name and value ([`Values::encode`]). The generator is SplitMix64 from that seed: each
//! call of a random function takes the next number, in execution order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::values::Values;

/// Bumped if the seed's inputs or the generator change (rendered output would change).
const SEED_TAG: &[u8] = b"fedvol-template-seed-v1\0";

/// The render seed of a template whose file name is `file_name`, rendered with `values`.
pub fn seed(file_name: &str, values: &Values) -> u64 {
    let mut h = Sha256::new();
    h.update(SEED_TAG);
    h.update((file_name.len() as u64).to_le_bytes());
    h.update(file_name.as_bytes());
    h.update(values.encode());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

/// A SplitMix64 generator shared by the template functions of one render (cheap to clone; the
/// clones draw from one sequence).
#[derive(Debug, Clone)]
pub struct Rng {
    state: Arc<AtomicU64>,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Rng {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Self {
        Rng {
            state: Arc::new(AtomicU64::new(seed)),
        }
    }

    /// The next 64 random bits (SplitMix64, Steele, Lea and Flood 2014).
    pub fn next_u64(&self) -> u64 {
        let s = self.state.fetch_add(GOLDEN, Ordering::Relaxed).wrapping_add(GOLDEN);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by rejection so every number is equally likely.
    pub fn below(&self, n: u64) -> u64 {
        // Reject the top partial block of the u64 range.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // Reference values of SplitMix64 seeded with 0 (as in Vigna's splitmix64.c).
        let r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range_and_is_repeatable() {
        let a = Rng::new(42);
        let b = Rng::new(42);
        for n in [1, 2, 7, 1000, u64::MAX] {
            let (x, y) = (a.below(n), b.below(n));
            assert!(x < n);
            assert_eq!(x, y);
        }
    }

    #[test]
    fn seed_depends_on_file_name_and_values_only() {
        let v = Values::default();
        assert_eq!(seed("a.yaml", &v), seed("a.yaml", &v));
        assert_ne!(seed("a.yaml", &v), seed("b.yaml", &v));
    }
}
