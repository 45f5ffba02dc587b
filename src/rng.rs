//! Reproducible random streams (docs/ARCHITECTURE.md, "Randomness and reproducibility"; docs/protocol.md, step 8).
//!
//! One 64-bit seed gives an independent ChaCha8 stream for every (mechanism, ε index, user, trial):
//! the key mixes the seed with the mechanism and ε index, the 64-bit ChaCha stream id is the user,
//! and each trial starts 2^36 words apart inside that stream. The key derivation is injective, so two
//! different tuples never share a stream, and a result depends only on its tuple — never on the
//! number of threads or the order in which work is scheduled.
//!
//! The secure mode ([`NoiseMode::Secure`], `--secure`) replaces all of this with [`SecureRng`]:
//! ChaCha20 keyed from OS entropy, with no seed at all.

use std::fmt;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The generator every mechanism draws from. ChaCha8's output is fixed across crate versions.
pub type Rng = ChaCha8Rng;

/// Each trial may draw up to 2^36 64-bit words before it would run into the next trial's words.
const TRIAL_SPACING_WORDS: u32 = 36;

/// SplitMix64's finaliser: a bijection on u64 with good avalanche.
pub fn mix64(mut z: u64) -> u64 {
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

/// A fresh 63-bit seed drawn from `rng`: how a seeded selection hands randomness to code that
/// brings its own generator (a Python function that seeds numpy), reproducibly.
pub fn child_seed(rng: &mut Rng) -> u64 {
    rand::RngCore::next_u64(rng) >> 1
}

/// The environment variable that seeds the noise of every DP release a process makes — the DP
/// fit's, its item universe's and the release statistics' — **predictable, never for a
/// release**: only the whole-release neighbour audit sets it (`recsel audit-release`), so that
/// two releases on neighbouring data draw the same noise and differ only where the data moved
/// them. A release made with it says so in its privacy report.
pub const AUDIT_NOISE_SEED: &str = "RECSEL_AUDIT_NOISE_SEED";

/// The seed of [`AUDIT_NOISE_SEED`] when it is set (a value that is not a u64 is ignored, so a
/// typo falls back to OS noise, the safe side).
pub fn audit_noise_seed() -> Option<u64> {
    std::env::var(AUDIT_NOISE_SEED).ok()?.trim().parse().ok()
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
        UserStreams::new(self, mech, eps_index, user).trial(trial)
    }
}

/// The streams of every trial of one (mechanism, ε index, user): the key and the ChaCha stream
/// id are set once, and each trial's generator is a copy moved to the trial's first word — the
/// same generator as [`Streams::stream`] builds from scratch.
#[derive(Debug, Clone)]
pub struct UserStreams {
    base: Rng,
}

impl UserStreams {
    /// The streams of (`mech`, `eps_index`, `user`) of `streams`.
    pub fn new(streams: &Streams, mech: u32, eps_index: u32, user: u64) -> Self {
        let mut key = [0u8; 32];
        let words = [
            mix64(streams.seed),
            mix64(streams.seed.rotate_left(29) ^ 0x243f_6a88_85a3_08d3),
            (u64::from(mech) << 32) | u64::from(eps_index),
            0x7265_6373_656c_0001, // "recsel", format 1
        ];
        for (chunk, w) in key.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let mut base = ChaCha8Rng::from_seed(key);
        base.set_stream(user);
        UserStreams { base }
    }

    /// The stream of `trial`.
    pub fn trial(&self, trial: u32) -> Rng {
        let mut rng = self.base.clone();
        rng.set_word_pos(u128::from(trial) << TRIAL_SPACING_WORDS);
        rng
    }
}

/// Where a run's randomness comes from: the one switch between experiments and releases
/// (`--secure`), carried by every runner's configuration and passed down to the mechanisms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseMode {
    /// Seeded ChaCha8 streams and floating-point noise: reproducible and fast (experiments).
    #[default]
    Fast,
    /// An OS-seeded ChaCha20 generator and exact discrete noise on a power-of-two grid, no seed
    /// (releases; `docs/secure.md`).
    Secure,
}

impl NoiseMode {
    /// `Secure` when `secure`, else `Fast`.
    pub fn from_flag(secure: bool) -> Self {
        if secure {
            NoiseMode::Secure
        } else {
            NoiseMode::Fast
        }
    }

    /// Whether this is the secure mode.
    pub fn is_secure(self) -> bool {
        self == NoiseMode::Secure
    }
}

/// The generator of the secure path: ChaCha20 (a cryptographic stream cipher) that exposes only
/// exact integer and bit draws. It deliberately does not implement `rand::RngCore`, so none of the
/// floating-point samplers of [`crate::numerics::distributions`] (which take [`Rng`]) can be called
/// with it: the secure path is separated from the float path by type (`docs/secure.md`).
///
/// The float samplers take the seeded generator …
///
/// ```
/// let mut rng = recsel::rng::Streams::new(1).stream(0, 0, 0, 0);
/// let _ = recsel::numerics::distributions::exp1(&mut rng);
/// ```
///
/// … and the secure generator cannot be passed to them (this example must fail to compile):
///
/// ```compile_fail
/// let mut rng = recsel::rng::SecureRng::from_seed_insecure(1);
/// let _ = recsel::numerics::distributions::exp1(&mut rng);
/// ```
///
/// nor to anything generic over `rand::RngCore` (such as every `rand_distr` distribution):
///
/// ```compile_fail
/// use rand::Rng as _;
/// let mut rng = recsel::rng::SecureRng::from_seed_insecure(1);
/// let _: f64 = rng.random();
/// ```
pub struct SecureRng {
    inner: rand_chacha::ChaCha20Rng,
    /// Unused random bits, consumed from the low end.
    bits: u64,
    /// How many bits of `bits` are still unused.
    left: u32,
}

impl fmt::Debug for SecureRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the generator's state.
        f.write_str("SecureRng { .. }")
    }
}

impl SecureRng {
    /// A generator keyed from the operating system's entropy (`getrandom`). This is the only
    /// constructor a release may use: there is no seed, so nobody can predict the noise.
    pub fn from_os() -> crate::error::Result<Self> {
        let inner = rand_chacha::ChaCha20Rng::try_from_os_rng().map_err(|e| {
            crate::error::Error::Invalid(format!("cannot read OS entropy for --secure: {e}"))
        })?;
        Ok(SecureRng {
            inner,
            bits: 0,
            left: 0,
        })
    }

    /// A generator keyed from `seed` — **predictable, never for a release**. It lets the tests and
    /// benchmarks run the exact samplers of the secure path reproducibly.
    pub fn from_seed_insecure(seed: u64) -> Self {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&mix64(seed).to_le_bytes());
        key[8..16].copy_from_slice(&mix64(seed ^ 0x5345_4355_5245).to_le_bytes());
        key[16..24].copy_from_slice(&0x7265_6373_656c_0002u64.to_le_bytes());
        Self::from_key(key)
    }

    fn from_key(key: [u8; 32]) -> Self {
        SecureRng {
            inner: rand_chacha::ChaCha20Rng::from_seed(key),
            bits: 0,
            left: 0,
        }
    }

    /// 64 uniform random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        use rand::RngCore as _;
        self.inner.next_u64()
    }

    /// One fair random bit.
    #[inline]
    pub fn bit(&mut self) -> bool {
        if self.left == 0 {
            self.bits = self.next_u64();
            self.left = 64;
        }
        let b = self.bits & 1 == 1;
        self.bits >>= 1;
        self.left -= 1;
        b
    }

    /// A uniform integer in `0..n` (n ≥ 1), exactly: Lemire's multiply-shift with rejection of
    /// the biased low products, so every value has probability exactly 1/n.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n; // 2^64 mod n
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniform integer in `0..n` (n ≥ 1) for 128-bit n, exactly (rejection from the smallest
    /// power of two ≥ n).
    #[inline]
    pub fn below_u128(&mut self, n: u128) -> u128 {
        debug_assert!(n > 0);
        if n <= u128::from(u64::MAX) {
            return u128::from(self.below(n as u64));
        }
        let bits = 128 - (n - 1).leading_zeros();
        let mask = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let x = ((u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())) & mask;
            if x < n {
                return x;
            }
        }
    }
}

/// The random source of one worker of a runner: seeded streams (fast mode, one stream per
/// (mechanism, ε index, user, trial)) or one OS-seeded secure generator (secure mode).
#[derive(Debug)]
pub enum Draws {
    /// Fast mode: the streams of the run's seed.
    Seeded(Streams),
    /// Secure mode: this worker's generator.
    Secure(Box<SecureRng>),
}

impl Draws {
    /// The source of one worker for `mode`; `streams` is used only in fast mode. Fails only when
    /// the OS has no entropy to give.
    pub fn new(mode: NoiseMode, streams: Streams) -> crate::error::Result<Self> {
        Ok(match mode {
            NoiseMode::Fast => Draws::Seeded(streams),
            NoiseMode::Secure => Draws::Secure(Box::new(SecureRng::from_os()?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn a_trial_of_the_user_streams_is_the_stream_built_from_scratch() {
        let s = Streams::new(11);
        for (mech, eps, user) in [(1, 0, 0), (7, 3, 12_345), (u32::MAX, 10, u64::MAX)] {
            let users = UserStreams::new(&s, mech, eps, user);
            for trial in [0, 1, 49, u32::MAX] {
                let (mut a, mut b) = (users.trial(trial), s.stream(mech, eps, user, trial));
                // Past a refill of the block buffer (32 words) too.
                for _ in 0..100 {
                    assert_eq!(a.random::<u64>(), b.random::<u64>());
                }
            }
        }
    }

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
