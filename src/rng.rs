//! Reproducible random streams (STYLE.md, "Randomness and reproducibility"; SPEC §5.8).
//!
//! One 64-bit seed gives an independent ChaCha8 stream for every (mechanism, ε index, user, trial):
//! the key mixes the seed with the mechanism and ε index, the 64-bit ChaCha stream id is the user,
//! and each trial starts 2^36 words apart inside that stream. The key derivation is injective, so two
//! different tuples never share a stream, and a result depends only on its tuple — never on the
//! number of threads or the order in which work is scheduled.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The generator every mechanism draws from. ChaCha8's output is fixed across crate versions.
pub type Rng = ChaCha8Rng;

/// Each trial may draw up to 2^36 64-bit words before it would run into the next trial's words.
const TRIAL_SPACING_WORDS: u32 = 36;

/// SplitMix64's finaliser: a bijection on u64 with good avalanche.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable 32-bit identifier of a name (FNV-1a): streams keyed by mechanism *name* survive
/// reordering of the registry.
pub fn name_id(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// A family of independent random streams derived from one seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    seed: u64,
}

impl Streams {
    /// Streams derived from `seed`.
    pub fn new(seed: u64) -> Self {
        Streams { seed }
    }

    /// Streams from a seed drawn from the operating system's entropy; [`Streams::seed`] reports it
    /// so the run can be repeated. The seed is below 2^63 so that every configuration format
    /// (TOML integers are signed 64-bit) can record it.
    pub fn from_entropy() -> Self {
        Streams {
            seed: rand::random::<u64>() >> 1,
        }
    }

    /// The seed these streams derive from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// An independent family for another purpose (`label`), e.g. data generation versus selection
    /// in one experiment.
    pub fn derive(&self, label: u64) -> Streams {
        Streams {
            seed: mix64(self.seed ^ mix64(label.wrapping_add(0x9e37_79b9_7f4a_7c15))),
        }
    }

    /// The stream of one (mechanism, ε index, user, trial). `mech` is usually [`name_id`] of the
    /// mechanism's name.
    pub fn stream(&self, mech: u32, eps_index: u32, user: u64, trial: u32) -> Rng {
        let mut key = [0u8; 32];
        let words = [
            mix64(self.seed),
            mix64(self.seed.rotate_left(29) ^ 0x243f_6a88_85a3_08d3),
            (u64::from(mech) << 32) | u64::from(eps_index),
            0x7265_6373_656c_0001, // "recsel", format 1
        ];
        for (chunk, w) in key.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let mut rng = ChaCha8Rng::from_seed(key);
        rng.set_stream(user);
        rng.set_word_pos(u128::from(trial) << TRIAL_SPACING_WORDS);
        rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let s = Streams::new(7);
        let a: u64 = s.stream(1, 2, 3, 4).random();
        let b: u64 = s.stream(1, 2, 3, 4).random();
        assert_eq!(a, b);
        let others = [
            s.stream(2, 2, 3, 4).random::<u64>(),
            s.stream(1, 3, 3, 4).random::<u64>(),
            s.stream(1, 2, 4, 4).random::<u64>(),
            s.stream(1, 2, 3, 5).random::<u64>(),
            Streams::new(8).stream(1, 2, 3, 4).random::<u64>(),
            s.derive(1).stream(1, 2, 3, 4).random::<u64>(),
        ];
        for o in others {
            assert_ne!(a, o);
        }
    }
}
