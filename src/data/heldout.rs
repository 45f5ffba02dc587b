//! Users held out of the fit (docs/utility.md, "Protocols"): the validation (calibration) users a
//! split keeps apart, the held-out-users protocol of LightGCN files, and each calibration user's
//! history and held-out items.
//!
//! Calibration users are never fitted on and never served or evaluated: a release calibrates its
//! clip bounds on them, `recsel tune` chooses the serving configuration on them, and the utility
//! tables estimate the best fixed item on them. Their held-out items are what a tuner measures a
//! hit against: for LightGCN files with held-out users, each user's `test.txt` row; for the
//! record-based splits (MovieLens, Netflix, synthetic), whose validation users have full rows, a
//! seeded 80/20 split of each row, by the rule of the test users' split.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{row_items, Csr, Dataset};
use crate::{Error, Result};

/// Users of each held-out group at most under [`ValidationUsers::Auto`] on LightGCN files.
pub const AUTO_MAX_USERS: usize = 3_000;

/// How many validation (calibration) users a split holds out of the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationUsers {
    /// The protocol's choice: on record data (MovieLens, Netflix, synthetic, your own files) as
    /// many validation users as test users (synthetic small holds none out unless asked);
    /// LightGCN files a fifth of the users with a test row, at most [`AUTO_MAX_USERS`], and as many
    /// test users, both held out of the fit.
    Auto,
    /// Exactly this many (0: none; for LightGCN files, the paper's protocol).
    Count(usize),
    /// Cross-fitting (LightGCN files): the users with a train and a test item cut into `folds`
    /// folds; fold `index` is the test users, fold `index + 1` (mod `folds`) the validation users.
    Fold {
        /// Number of folds (≥ 3).
        folds: usize,
        /// The test fold, `0..folds`.
        index: usize,
    },
}

impl ValidationUsers {
    /// Parses `auto`, a count, or `fold:F/K` (fold F of K); errors name the text.
    pub fn parse(text: &str) -> Result<Self> {
        let t = text.trim();
        if t == "auto" {
            return Ok(ValidationUsers::Auto);
        }
        if let Some(rest) = t.strip_prefix("fold:") {
            let bad = || Error::Parse {
                context: format!("validation users '{t}'"),
                message: "expected fold:F/K, fold F (from 0) of K folds".into(),
            };
            let (f, k) = rest.split_once('/').ok_or_else(bad)?;
            let index = f.trim().parse::<usize>().map_err(|_| bad())?;
            let folds = k.trim().parse::<usize>().map_err(|_| bad())?;
            return Ok(ValidationUsers::Fold { folds, index });
        }
        t.parse::<usize>()
            .map(ValidationUsers::Count)
            .map_err(|_| Error::Parse {
                context: format!("validation users '{t}'"),
                message: "expected 'auto' or a number of users".into(),
            })
    }
}

impl std::str::FromStr for ValidationUsers {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        ValidationUsers::parse(text)
    }
}

// Validation users as an option's value (`--validation-users`, a table's `validation_users` key).
crate::options::text_option_value!(ValidationUsers, "auto|N");

impl serde::Serialize for ValidationUsers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ValidationUsers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        /// A count may be written as a number or as text in a table.
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Text {
            Count(u64),
            Word(String),
        }
        match Text::deserialize(d)? {
            Text::Count(n) => Ok(ValidationUsers::Count(n as usize)),
            Text::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::fmt::Display for ValidationUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValidationUsers::Auto => write!(f, "auto"),
            ValidationUsers::Count(n) => write!(f, "{n}"),
            ValidationUsers::Fold { folds, index } => write!(f, "fold:{index}/{folds}"),
        }
    }
}

/// Users with a history and held-out items, rows aligned: calibration users (or the test users
/// of a table).
#[derive(Debug, Clone)]
pub struct HeldOutRows {
    /// What the model scores each user from.
    pub history: Csr,
    /// The items a recommendation counts as a hit against (hit@1).
    pub heldout: Csr,
    /// Who they are: `validation` (held-out users) or `test`.
    pub population: &'static str,
    /// How the held-out items were obtained (for the artifacts that record it).
    pub split: String,
}

impl HeldOutRows {
    /// Number of users.
    pub fn rows(&self) -> usize {
        self.history.rows()
    }

    /// The test users of `data`: their input and held-out target rows.
    pub fn test_users(data: &Dataset) -> Self {
        HeldOutRows {
            history: data.test_input.clone(),
            heldout: data.test_target.clone(),
            population: "test",
            split: "the split's test users (input and held-out targets)".into(),
        }
    }
}

/// Share of each validation row held out when the rows are full (the test split's rule).
pub const CALIBRATION_HOLDOUT: f64 = 0.2;

/// The calibration users of `data` with their held-out items, or `None` when the split has no
/// validation users (the paper's LightGCN protocol, synthetic small data): then nobody is both
/// unfitted and unserved. Full validation rows are split 80/20 at random with `seed`, each row
/// keeping at least one item on either side (a row of one item has no held-out item).
pub fn calibration_users(data: &Dataset, seed: u64) -> Option<HeldOutRows> {
    let v = &data.validation;
    if v.rows() == 0 {
        return None;
    }
    if data.validation_target.rows() == v.rows() {
        return Some(HeldOutRows {
            history: v.clone(),
            heldout: data.validation_target.clone(),
            population: "validation",
            split: "the file's own held-out rows (test.txt) of users held out of the fit".into(),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = v.cols();
    let (mut hp, mut hi) = (vec![0usize], Vec::new());
    let (mut tp, mut ti) = (vec![0usize], Vec::new());
    for u in 0..v.rows() {
        let mut items = row_items(v, u).to_vec();
        items.shuffle(&mut rng);
        let n_target = if items.len() >= 2 {
            ((items.len() as f64 * CALIBRATION_HOLDOUT).round() as usize).clamp(1, items.len() - 1)
        } else {
            0
        };
        let (target, input) = items.split_at_mut(n_target);
        target.sort_unstable();
        input.sort_unstable();
        ti.extend_from_slice(target);
        hi.extend_from_slice(input);
        tp.push(ti.len());
        hp.push(hi.len());
    }
    let ones = |k| vec![1.0f32; k];
    let rows = v.rows();
    Some(HeldOutRows {
        history: Csr::new((rows, n), hp, hi.clone(), ones(hi.len())),
        heldout: Csr::new((rows, n), tp, ti.clone(), ones(ti.len())),
        population: "validation",
        split: format!(
            "each validation user's full row split {:.0}/{:.0} at random (seed {seed})",
            100.0 * (1.0 - CALIBRATION_HOLDOUT),
            100.0 * CALIBRATION_HOLDOUT
        ),
    })
}

/// The held-out-users protocol's settings for a LightGCN directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LightGcnHeldOut {
    /// Validation users (a count, or the automatic share).
    pub validation: ValidationUsers,
    /// Test users (default: as many as validation users).
    pub test_users: Option<usize>,
    /// Seed of the draw (the split seed).
    pub seed: u64,
    /// Cross-fitting: `Some((k, f))` cuts the shuffled users into k folds and takes fold f as the
    /// test users and fold f + 1 (mod k) as the validation users, overriding the counts.
    pub fold: Option<(usize, usize)>,
}

/// The held-out-users protocol `opts` asks of a LightGCN directory, if any: `validation_users`
/// set and not 0.
pub fn lightgcn_option(opts: &super::LoadOptions, seed: u64) -> Result<Option<LightGcnHeldOut>> {
    Ok(match opts.validation_users {
        None | Some(ValidationUsers::Count(0)) => None,
        Some(validation) => Some(LightGcnHeldOut {
            validation,
            test_users: opts.test_users,
            seed,
            fold: match validation {
                ValidationUsers::Fold { folds, index } => Some((folds, index)),
                _ => None,
            },
        }),
    })
}

/// The groups of the held-out-users protocol of LightGCN files: users with at least one train and
/// one test item, shuffled with `seed`, give `n_test` test users and then `n_validation`
/// validation users; every other user is fitted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldOutGroups {
    /// Test users (ascending user ids).
    pub test: Vec<usize>,
    /// Validation users (ascending).
    pub validation: Vec<usize>,
    /// Users fitted on (ascending): everyone else.
    pub fit: Vec<usize>,
}

/// Draws the groups of [`HeldOutGroups`] among `n_users` users, `eligible` of whom have a train
/// and a test item. `validation` of `Auto` takes a fifth of the eligible users (at most
/// [`AUTO_MAX_USERS`]) per group; `test_users` overrides the test group's size. Errors when the
/// groups would leave fewer than half of the eligible users to the fit.
pub fn held_out_groups(
    n_users: usize,
    eligible: &[usize],
    validation: ValidationUsers,
    test_users: Option<usize>,
    seed: u64,
    fold: Option<(usize, usize)>,
) -> Result<HeldOutGroups> {
    if let Some((k, f)) = fold {
        if k < 3 || f >= k || eligible.len() < k {
            return Err(Error::Invalid(format!(
                "cross-fitting fold {f} of {k} over {} users: need at least 3 folds, a fold \
                 below their number, and a user per fold",
                eligible.len()
            )));
        }
        let mut order = eligible.to_vec();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        // Folds of nearly equal size, the larger first.
        let bounds: Vec<usize> = (0..=k)
            .map(|i| i * (order.len() / k) + i.min(order.len() % k))
            .collect();
        let part = |i: usize| {
            let mut v = order[bounds[i]..bounds[i + 1]].to_vec();
            v.sort_unstable();
            v
        };
        return Ok(groups(n_users, part(f), part((f + 1) % k)));
    }
    let auto = (eligible.len() / 5).min(AUTO_MAX_USERS);
    let n_val = match validation {
        ValidationUsers::Auto | ValidationUsers::Fold { .. } => auto,
        ValidationUsers::Count(n) => n,
    };
    let n_test = test_users.unwrap_or(if n_val > 0 { n_val } else { auto });
    if n_test == 0 || n_val == 0 || 2 * (n_test + n_val) > eligible.len() {
        return Err(Error::Invalid(format!(
            "held-out users: {n_test} test and {n_val} validation users out of {} users with a \
             train and a test item: each group needs at least one user, and together at most \
             half of them (the rest are fitted on)",
            eligible.len()
        )));
    }
    let mut order = eligible.to_vec();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut test = order[..n_test].to_vec();
    let mut val = order[n_test..n_test + n_val].to_vec();
    test.sort_unstable();
    val.sort_unstable();
    Ok(groups(n_users, test, val))
}

/// The groups with every user outside `test` and `val` fitted on.
fn groups(n_users: usize, test: Vec<usize>, val: Vec<usize>) -> HeldOutGroups {
    let mut out = vec![true; n_users];
    for &u in test.iter().chain(&val) {
        out[u] = false;
    }
    let fit = (0..n_users).filter(|&u| out[u]).collect();
    HeldOutGroups {
        test,
        validation: val,
        fit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_disjoint_cover_everyone_and_follow_the_seed() {
        let eligible: Vec<usize> = (0..100).filter(|u| u % 10 != 0).collect();
        let g = held_out_groups(100, &eligible, ValidationUsers::Auto, None, 3, None).unwrap();
        assert_eq!((g.test.len(), g.validation.len()), (18, 18));
        let mut all: Vec<usize> = g
            .test
            .iter()
            .chain(&g.validation)
            .chain(&g.fit)
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        assert!(g.test.iter().all(|u| eligible.contains(u)));
        let again = held_out_groups(100, &eligible, ValidationUsers::Auto, None, 3, None).unwrap();
        assert_eq!(g, again);
        let other = held_out_groups(100, &eligible, ValidationUsers::Auto, None, 4, None).unwrap();
        assert_ne!(g.test, other.test);
        let e =
            held_out_groups(100, &eligible, ValidationUsers::Count(40), None, 3, None).unwrap_err();
        assert!(e.to_string().contains("at most half"), "{e}");
        assert_eq!(
            ValidationUsers::parse("auto").unwrap(),
            ValidationUsers::Auto
        );
        assert_eq!(
            ValidationUsers::parse(" 7").unwrap(),
            ValidationUsers::Count(7)
        );
        assert!(ValidationUsers::parse("x").is_err());
        // Cross-fitting: every eligible user is a test user exactly once over the folds, and the
        // validation fold is the next one.
        let mut seen = Vec::new();
        for f in 0..5 {
            let g = held_out_groups(100, &eligible, ValidationUsers::Auto, None, 3, Some((5, f)))
                .unwrap();
            let next = held_out_groups(
                100,
                &eligible,
                ValidationUsers::Auto,
                None,
                3,
                Some((5, (f + 1) % 5)),
            )
            .unwrap();
            assert_eq!(g.validation, next.test);
            assert!(g
                .test
                .iter()
                .all(|u| !g.fit.contains(u) && !g.validation.contains(u)));
            seen.extend(g.test);
        }
        seen.sort_unstable();
        assert_eq!(seen, eligible);
    }
}
