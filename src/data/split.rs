//! Test-user split (docs/protocol.md, step 3): a seeded random choice of test and validation users; each test
//! user's items are split 80% input / 20% held-out targets at random. The model is fitted on the
//! remaining (training) users only; validation users are held out: `fit` does not use them, a
//! release artifact calibrates its clip bounds on them (docs/deployment.md).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::preprocess::Interactions;
use super::synthetic::SyntheticShape;
use super::{select_rows, Csr, Dataset, Descriptor};
use crate::Result;

/// Split settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitConfig {
    /// Number of test users (reduced to a tenth of the users on small data).
    pub test_users: usize,
    /// Number of validation users (same rule).
    pub validation_users: usize,
    /// Share of each test user's items held out as targets.
    pub holdout: f64,
    /// Seed of the split (default 42).
    pub seed: u64,
}

impl SplitConfig {
    /// MovieLens: 10,000 test and 10,000 validation users.
    pub fn movielens(seed: u64) -> Self {
        SplitConfig {
            test_users: 10_000,
            validation_users: 10_000,
            holdout: 0.2,
            seed,
        }
    }
    /// Netflix: 40,000 test and 40,000 validation users.
    pub fn netflix(seed: u64) -> Self {
        SplitConfig {
            test_users: 40_000,
            validation_users: 40_000,
            holdout: 0.2,
            seed,
        }
    }
    /// Synthetic data: the split of the dataset it imitates.
    pub fn synthetic(shape: SyntheticShape, seed: u64) -> Self {
        match shape {
            SyntheticShape::Small => SplitConfig {
                test_users: 1_000,
                validation_users: 0,
                holdout: 0.2,
                seed,
            },
            SyntheticShape::Ml20m => Self::movielens(seed),
            SyntheticShape::Netflix => Self::netflix(seed),
        }
    }
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
    let n_users = data.matrix.rows();
    // Keep at least 80% of the users for training on small data.
    let (n_test, n_val) = if cfg.test_users + cfg.validation_users > n_users / 5 {
        let t = (n_users / 10).max(1);
        (t, if cfg.validation_users > 0 { t } else { 0 })
    } else {
        (cfg.test_users, cfg.validation_users)
    };
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut order: Vec<usize> = (0..n_users).collect();
    order.shuffle(&mut rng);
    let mut test_users: Vec<usize> = order[..n_test].to_vec();
    test_users.sort_unstable();
    let mut train_users: Vec<usize> = order[(n_test + n_val).min(n_users)..].to_vec();
    train_users.sort_unstable();
    let mut validation_users: Vec<usize> =
        order[n_test.min(n_users)..(n_test + n_val).min(n_users)].to_vec();
    validation_users.sort_unstable();
    let validation = select_rows(&data.matrix, &validation_users);

    let n_items = data.matrix.cols();
    let (mut ip, mut ii) = (vec![0usize], Vec::new());
    let (mut tp, mut ti) = (vec![0usize], Vec::new());
    for &u in &test_users {
        let mut items: Vec<u32> = data
            .matrix
            .outer_view(u)
            .map(|r| r.indices().to_vec())
            .unwrap_or_default();
        items.shuffle(&mut rng);
        let n_target = if items.len() >= 2 {
            ((items.len() as f64 * cfg.holdout).round() as usize).clamp(1, items.len() - 1)
        } else {
            0
        };
        let (target, input) = items.split_at_mut(n_target);
        target.sort_unstable();
        input.sort_unstable();
        ti.extend_from_slice(target);
        ii.extend_from_slice(input);
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
