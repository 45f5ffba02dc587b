//! Test-user split (docs/protocol.md, step 3): each user is a test, a validation or a training
//! user by a keyed hash of their own id and the public split seed ([`user_group`]), and each test
//! user's items are split 80% input / 20% held-out targets by a generator seeded from the split
//! seed and that user's own id ([`holdout_split`]). The model is fitted on the training users
//! only; validation users are held out: `fit` does not use them, a release artifact calibrates
//! its clip bounds on them (docs/deployment.md).
//!
//! Nothing here looks at another user: adding, removing or changing one user moves no other
//! user between the groups and changes no other user's held-out items. The price is that the
//! group sizes are not fixed: each user falls in a group with the group's share as probability,
//! so the sizes vary with the data (docs/privacy-report.md, "Populations").

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::preprocess::Interactions;
use super::synthetic::SyntheticShape;
use super::{select_rows, Csr, Dataset, Descriptor, Fnv64};
use crate::{Error, Result};

/// Share of the users that are test users on record data, and as many validation users where
/// the protocol holds some out (a public constant, never computed from the data).
pub const DEFAULT_SHARE: f64 = 0.1;

/// Split settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitConfig {
    /// Share of the users that are test users (each user independently, [`user_group`]).
    pub test_share: f64,
    /// Share of the users that are validation users (same rule).
    pub validation_share: f64,
    /// Share of each test user's items held out as targets.
    pub holdout: f64,
    /// Seed of the split (default 42).
    pub seed: u64,
}

impl SplitConfig {
    /// MovieLens: a tenth of the users are test users, a tenth validation users.
    pub fn movielens(seed: u64) -> Self {
        SplitConfig {
            test_share: DEFAULT_SHARE,
            validation_share: DEFAULT_SHARE,
            holdout: 0.2,
            seed,
        }
    }
    /// Netflix: the MovieLens shares.
    pub fn netflix(seed: u64) -> Self {
        Self::movielens(seed)
    }
    /// Synthetic data: the split of the dataset it imitates (small: test users only).
    pub fn synthetic(shape: SyntheticShape, seed: u64) -> Self {
        match shape {
            SyntheticShape::Small => SplitConfig {
                test_share: DEFAULT_SHARE,
                validation_share: 0.0,
                holdout: 0.2,
                seed,
            },
            SyntheticShape::Ml20m => Self::movielens(seed),
            SyntheticShape::Netflix => Self::netflix(seed),
        }
    }
}

/// How a data set's users were put in their groups (training, validation, test): the public,
/// declared inputs of the split and its rule in words. Recorded in a release (`release.json`,
/// `split`) and shown by its privacy report; never anything computed from the data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitRule {
    /// The split seed (public); `None` when the files' own split decides (LightGCN files in the
    /// paper's protocol).
    pub seed: Option<u64>,
    /// Share of the users drawn as test users (`None`: the files decide).
    pub test_share: Option<f64>,
    /// Share of the users drawn as validation (calibration) users.
    pub validation_share: Option<f64>,
    /// The rule in words.
    pub rule: String,
}

impl SplitRule {
    /// The rule of [`user_group`] with these shares.
    pub fn keyed(seed: u64, test_share: f64, validation_share: f64, who: &str) -> Self {
        SplitRule {
            seed: Some(seed),
            test_share: Some(test_share),
            validation_share: Some(validation_share),
            rule: format!(
                "each {who} is a test user with probability {test_share}, a validation \
                 (calibration) user with probability {validation_share}, else {}, by a keyed \
                 hash of the user's own id and the split seed {seed}: no user's presence moves \
                 another between groups, and the group sizes vary with the data",
                if who == "user" {
                    "a training user"
                } else {
                    "fitted on (as is every other user)"
                }
            ),
        }
    }

    /// The files' own split (the paper's LightGCN protocol).
    pub fn files() -> Self {
        SplitRule {
            seed: None,
            test_share: None,
            validation_share: None,
            rule: "the files' own split: every user's train.txt row is fitted on and every user \
                   with a test.txt row is a test user; no validation users"
                .into(),
        }
    }
}

/// Which group a user is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Fitted on.
    Train,
    /// Held out of the fit, never served: calibration and tuning.
    Validation,
    /// Held out of the fit, served and evaluated.
    Test,
}

/// A 64-bit key from the public `seed`, a purpose tag and one user's own bytes (their id, or
/// their row): FNV-1a over the three, finished by the SplitMix64 mixer. Not a secret key — the
/// seed is public — but a function of this user alone, which is what the split needs.
pub fn user_key(seed: u64, purpose: &[u8], own: &[u8]) -> u64 {
    let mut h = Fnv64::new();
    h.write(&seed.to_le_bytes());
    h.write(purpose);
    h.write(&[0]);
    h.write(own);
    let mut z = h.finish().wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A user's uniform draw in [0, 1) from the public `seed` and their own id ([`user_key`]).
pub fn user_uniform(seed: u64, user_id: &str) -> f64 {
    (user_key(seed, b"group", user_id.as_bytes()) >> 11) as f64 / (1u64 << 53) as f64
}

/// The group of the user `user_id`: test when its [`user_uniform`] draw is below `test_share`,
/// validation when below `test_share + validation_share`, training otherwise.
pub fn user_group(seed: u64, user_id: &str, test_share: f64, validation_share: f64) -> Group {
    let u = user_uniform(seed, user_id);
    if u < test_share {
        Group::Test
    } else if u < test_share + validation_share {
        Group::Validation
    } else {
        Group::Train
    }
}

/// Checks a pair of group shares: each in [0, 1), together at most a half (the rest is fitted on).
pub fn check_shares(test_share: f64, validation_share: f64) -> Result<()> {
    let ok = |x: f64| x.is_finite() && (0.0..1.0).contains(&x);
    if !ok(test_share) || !ok(validation_share) || test_share + validation_share > 0.5 {
        return Err(Error::Invalid(format!(
            "group shares: test {test_share} and validation {validation_share} must each be in \
             [0, 1) and together at most 0.5 (the rest of the users are fitted on)"
        )));
    }
    Ok(())
}

/// One user's items split into (input, held-out targets), both ascending: `holdout` of them
/// (rounded, at least one on either side; a row of one item has no target) held out at random by
/// a generator seeded from the public `seed` and `own` — the user's own id or row — only.
pub fn holdout_split(items: &[u32], holdout: f64, seed: u64, own: &[u8]) -> (Vec<u32>, Vec<u32>) {
    let mut items = items.to_vec();
    let mut rng = ChaCha8Rng::seed_from_u64(user_key(seed, b"holdout", own));
    items.shuffle(&mut rng);
    let n_target = if items.len() >= 2 {
        ((items.len() as f64 * holdout).round() as usize).clamp(1, items.len() - 1)
    } else {
        0
    };
    let mut input = items.split_off(n_target);
    items.sort_unstable();
    input.sort_unstable();
    (input, items)
}

/// Splits preprocessed interactions into a [`Dataset`] (a copy of them: [`split_owned`] needs
/// less memory).
pub fn split(descriptor: Descriptor, data: &Interactions, cfg: &SplitConfig) -> Result<Dataset> {
    split_owned(descriptor, data.clone(), cfg)
}

/// [`split`], consuming the interactions: the training rows are compacted in place in the
/// matrix's own storage instead of copied out of it (docs/real-data.md, "Memory").
pub fn split_owned(
    descriptor: Descriptor,
    data: Interactions,
    cfg: &SplitConfig,
) -> Result<Dataset> {
    check_shares(cfg.test_share, cfg.validation_share)?;
    let n_users = data.matrix.rows();
    let (mut test_users, mut validation_users, mut train_users) = (vec![], vec![], vec![]);
    for u in 0..n_users {
        match user_group(
            cfg.seed,
            &data.user_ids[u],
            cfg.test_share,
            cfg.validation_share,
        ) {
            Group::Test => test_users.push(u),
            Group::Validation => validation_users.push(u),
            Group::Train => train_users.push(u),
        }
    }
    let validation = select_rows(&data.matrix, &validation_users);

    let n_items = data.matrix.cols();
    let (mut ip, mut ii) = (vec![0usize], Vec::new());
    let (mut tp, mut ti) = (vec![0usize], Vec::new());
    for &u in &test_users {
        let items = super::row_items(&data.matrix, u);
        let (input, target) =
            holdout_split(items, cfg.holdout, cfg.seed, data.user_ids[u].as_bytes());
        ti.extend_from_slice(&target);
        ii.extend_from_slice(&input);
        tp.push(ti.len());
        ip.push(ii.len());
    }
    let ones = |n| vec![1.0f32; n];
    let test_input = Csr::new((test_users.len(), n_items), ip, ii.clone(), ones(ii.len()));
    let test_target = Csr::new((test_users.len(), n_items), tp, ti.clone(), ones(ti.len()));
    let test_user_ids = test_users
        .iter()
        .map(|&u| data.user_ids[u].clone())
        .collect();
    train_users.sort_unstable();
    let train = keep_rows(data.matrix, &train_users);
    let ds = Dataset {
        descriptor,
        train,
        test_input,
        test_target,
        validation,
        validation_target: Csr::zero((0, n_items)),
        heldout_popularity: None,
        heldout_rows: None,
        item_ids: data.item_ids,
        test_user_ids,
        validation_user_ids: validation_users
            .iter()
            .map(|&u| data.user_ids[u].clone())
            .collect(),
        split_rule: SplitRule::keyed(cfg.seed, cfg.test_share, cfg.validation_share, "user"),
    };
    ds.validate()?;
    Ok(ds)
}

/// The rows `rows` (ascending) of `m`, compacted in place in `m`'s storage: equal to
/// [`select_rows`]`(&m, rows)` without holding a second copy of the kept entries.
fn keep_rows(m: Csr, rows: &[usize]) -> Csr {
    let cols = m.cols();
    let (old_ptr, mut indices, mut data) = m.into_raw_storage();
    let mut indptr = Vec::with_capacity(rows.len() + 1);
    indptr.push(0usize);
    let mut write = 0usize;
    for &r in rows {
        let (a, b) = (old_ptr[r], old_ptr[r + 1]);
        // Rows ascend, so the destination never overtakes the source.
        indices.copy_within(a..b, write);
        write += b - a;
        indptr.push(write);
    }
    indices.truncate(write);
    indices.shrink_to_fit();
    data.truncate(write);
    data.shrink_to_fit();
    data.fill(1.0);
    Csr::new((rows.len(), cols), indptr, indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeping_rows_in_place_equals_copying_them() {
        let mut pairs: Vec<(u32, u32)> = (0..400u32).map(|k| (k % 37, (k * 7919) % 53)).collect();
        let m = super::super::csr_from_pairs(37, 53, &mut pairs);
        for rows in [
            vec![],
            vec![0],
            vec![3, 4, 9, 36],
            (0..37).collect::<Vec<_>>(),
        ] {
            let want = select_rows(&m, &rows);
            assert_eq!(keep_rows(m.clone(), &rows), want, "{rows:?}");
        }
    }
}
