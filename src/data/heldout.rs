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
//!
//! Every group here is drawn user by user ([`super::split::user_group`]): a user's group, and
//! which of a calibration user's items are held out, depend on the public seed and that user
//! alone, so one user's presence or row moves nobody else (docs/privacy-report.md,
//! "Populations").

use super::split::{check_shares, holdout_split, user_uniform, DEFAULT_SHARE};
use super::{row_items, Csr, Dataset};
use crate::{Error, Result};

/// Share of the users with a train and a test item in each held-out group under
/// [`ValidationUsers::Auto`] on LightGCN files.
pub const AUTO_SHARE: f64 = DEFAULT_SHARE;

/// Which share of the users a split holds out of the fit as validation (calibration) users. Each
/// user is one with this probability, by a keyed hash of their own id
/// ([`super::split::user_group`]): the share is public, the number of users it gives varies with
/// the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValidationUsers {
    /// The protocol's choice: on record data (MovieLens, Netflix, synthetic, your own files) the
    /// test users' share (synthetic small holds none out unless asked); on LightGCN files
    /// [`AUTO_SHARE`] of the users with a test row, and as many test users, both held out of the
    /// fit.
    Auto,
    /// This share of the users, in [0, 1) (0: none; for LightGCN files, the paper's protocol).
    Share(f64),
    /// Cross-fitting (LightGCN files): each user with a train and a test item in one of `folds`
    /// folds by the same keyed hash; fold `index` is the test users, fold `index + 1` (mod
    /// `folds`) the validation users.
    Fold {
        /// Number of folds (≥ 3).
        folds: usize,
        /// The test fold, `0..folds`.
        index: usize,
    },
}

impl ValidationUsers {
    /// Parses `auto`, a share in [0, 1), or `fold:F/K` (fold F of K); errors name the text.
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
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..1.0).contains(&x) => Ok(ValidationUsers::Share(x)),
            _ => Err(Error::Parse {
                context: format!("validation users '{t}'"),
                message: "expected 'auto', a share of the users in [0, 1) (each user is drawn \
                          by a keyed hash of their id, so a count cannot be promised), or \
                          fold:F/K"
                    .into(),
            }),
        }
    }
}

impl std::str::FromStr for ValidationUsers {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        ValidationUsers::parse(text)
    }
}

// Validation users as an option's value (`--validation-users`, a table's `validation_users` key).
crate::options::text_option_value!(ValidationUsers, "auto|SHARE");

impl serde::Serialize for ValidationUsers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ValidationUsers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        /// A share may be written as a number or as text in a table.
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(f64),
            Word(String),
        }
        match Text::deserialize(d)? {
            Text::Number(x) => x.to_string().parse().map_err(serde::de::Error::custom),
            Text::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::fmt::Display for ValidationUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValidationUsers::Auto => write!(f, "auto"),
            ValidationUsers::Share(x) => write!(f, "{x}"),
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
    /// Each row's user id (the data's own identifier): public like the group the split drew by
    /// it, and kept when one user's data is replaced by another's.
    pub ids: Vec<String>,
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
            ids: data.test_user_ids.clone(),
            population: "test",
            split: "the split's test users (input and held-out targets)".into(),
        }
    }
}

/// Share of each validation row held out when the rows are full (the test split's rule).
pub const CALIBRATION_HOLDOUT: f64 = 0.2;

/// The calibration users of `data` with their held-out items, or `None` when the split has no
/// validation users (the paper's LightGCN protocol, synthetic small data): then nobody is both
/// unfitted and unserved. Full validation rows are split 80/20 at random, each row by a generator
/// seeded from `seed` and that row alone ([`holdout_split`]), each row keeping at least one item
/// on either side (a row of one item has no held-out item): no user's split depends on another
/// user's row.
pub fn calibration_users(data: &Dataset, seed: u64) -> Option<HeldOutRows> {
    let v = &data.validation;
    if v.rows() == 0 {
        return None;
    }
    if data.validation_target.rows() == v.rows() {
        return Some(HeldOutRows {
            history: v.clone(),
            heldout: data.validation_target.clone(),
            ids: data.validation_user_ids.clone(),
            population: "validation",
            split: "the file's own held-out rows (test.txt) of users held out of the fit".into(),
        });
    }
    let n = v.cols();
    let (mut hp, mut hi) = (vec![0usize], Vec::new());
    let (mut tp, mut ti) = (vec![0usize], Vec::new());
    for u in 0..v.rows() {
        let (input, target) = calibration_row_split(row_items(v, u), seed);
        ti.extend_from_slice(&target);
        hi.extend_from_slice(&input);
        tp.push(ti.len());
        hp.push(hi.len());
    }
    let ones = |k| vec![1.0f32; k];
    let rows = v.rows();
    Some(HeldOutRows {
        history: Csr::new((rows, n), hp, hi.clone(), ones(hi.len())),
        heldout: Csr::new((rows, n), tp, ti.clone(), ones(ti.len())),
        ids: data.validation_user_ids.clone(),
        population: "validation",
        split: format!(
            "each validation user's full row split {:.0}/{:.0} at random, seeded by the split \
             seed {seed} and the row itself",
            100.0 * (1.0 - CALIBRATION_HOLDOUT),
            100.0 * CALIBRATION_HOLDOUT
        ),
    })
}

/// One calibration user's row (ascending item columns) split into (history, held-out items) by
/// [`holdout_split`] keyed by the public `seed` and the row's own bytes.
pub fn calibration_row_split(items: &[u32], seed: u64) -> (Vec<u32>, Vec<u32>) {
    let own: Vec<u8> = items.iter().flat_map(|i| i.to_le_bytes()).collect();
    holdout_split(items, CALIBRATION_HOLDOUT, seed, &own)
}

/// The held-out-users protocol's settings for a LightGCN directory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LightGcnHeldOut {
    /// Validation users (a count, or the automatic share).
    pub validation: ValidationUsers,
    /// Share of the test users (default: the validation users' share).
    pub test_users: Option<f64>,
    /// Seed of the draw (the split seed).
    pub seed: u64,
    /// Cross-fitting: `Some((k, f))` puts each user in one of k folds by the keyed hash and
    /// takes fold f as the test users and fold f + 1 (mod k) as the validation users, overriding
    /// the shares.
    pub fold: Option<(usize, usize)>,
}

/// The held-out-users protocol `opts` asks of a LightGCN directory, if any: `validation_users`
/// set and not 0.
pub fn lightgcn_option(opts: &super::LoadOptions, seed: u64) -> Result<Option<LightGcnHeldOut>> {
    Ok(match opts.validation_users {
        None => None,
        Some(ValidationUsers::Share(0.0)) => None,
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

/// The groups of the held-out-users protocol of LightGCN files: each user with at least one
/// train and one test item is a test user, a validation user or fitted on by a keyed hash of the
/// user's id (the file's user number) and `seed` ([`super::split::user_group`]); every other
/// user is fitted on.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOutGroups {
    /// Test users (ascending user ids).
    pub test: Vec<usize>,
    /// Validation users (ascending).
    pub validation: Vec<usize>,
    /// Users fitted on (ascending): everyone else.
    pub fit: Vec<usize>,
    /// The rule that drew them (public inputs only).
    pub rule: super::split::SplitRule,
}

/// Draws the groups of [`HeldOutGroups`] among `n_users` users, `eligible` of whom have a train
/// and a test item. `validation` of `Auto` holds out [`AUTO_SHARE`] of the eligible users per
/// group; `test_users` overrides the test group's share. Errors when the shares exceed a half
/// together, or when a group drew nobody.
pub fn held_out_groups(
    n_users: usize,
    eligible: &[usize],
    validation: ValidationUsers,
    test_users: Option<f64>,
    seed: u64,
    fold: Option<(usize, usize)>,
) -> Result<HeldOutGroups> {
    let draw = |u: usize| user_uniform(seed, &u.to_string());
    if let Some((k, f)) = fold {
        if k < 3 || f >= k {
            return Err(Error::Invalid(format!(
                "cross-fitting fold {f} of {k}: need at least 3 folds and a fold below their \
                 number"
            )));
        }
        // Fold of a user: ⌊k·U⌋ of the user's own uniform draw.
        let fold_of = |u: usize| ((draw(u) * k as f64) as usize).min(k - 1);
        let part = |i: usize| -> Vec<usize> {
            eligible
                .iter()
                .copied()
                .filter(|&u| fold_of(u) == i)
                .collect()
        };
        let (test, val) = (part(f), part((f + 1) % k));
        if test.is_empty() || val.is_empty() {
            return Err(Error::Invalid(format!(
                "cross-fitting fold {f} of {k} over {} users: a fold drew nobody",
                eligible.len()
            )));
        }
        let mut rule = super::split::SplitRule::keyed(
            seed,
            1.0 / k as f64,
            1.0 / k as f64,
            "user with a train and a test item",
        );
        rule.rule = format!(
            "cross-fitting: each user with a train and a test item in one of {k} folds by a \
             keyed hash of the user's own id and the split seed {seed}; fold {f} is the test \
             users, fold {} the validation users; everyone else is fitted on",
            (f + 1) % k
        );
        return Ok(groups(n_users, test, val, rule));
    }
    let val_share = match validation {
        ValidationUsers::Auto | ValidationUsers::Fold { .. } => AUTO_SHARE,
        ValidationUsers::Share(x) => x,
    };
    let test_share = test_users.unwrap_or(if val_share > 0.0 {
        val_share
    } else {
        AUTO_SHARE
    });
    check_shares(test_share, val_share)?;
    let (mut test, mut val) = (Vec::new(), Vec::new());
    for &u in eligible {
        let x = draw(u);
        if x < test_share {
            test.push(u);
        } else if x < test_share + val_share {
            val.push(u);
        }
    }
    if test.is_empty() || val.is_empty() {
        return Err(Error::Invalid(format!(
            "held-out users: {} test and {} validation users drawn (shares {test_share} and \
             {val_share}) out of {} users with a train and a test item: each group needs at \
             least one user; give larger shares or more users",
            test.len(),
            val.len(),
            eligible.len()
        )));
    }
    let rule = super::split::SplitRule::keyed(
        seed,
        test_share,
        val_share,
        "user with a train and a test item",
    );
    Ok(groups(n_users, test, val, rule))
}

/// The groups with every user outside `test` and `val` fitted on.
fn groups(
    n_users: usize,
    test: Vec<usize>,
    val: Vec<usize>,
    rule: super::split::SplitRule,
) -> HeldOutGroups {
    let mut out = vec![true; n_users];
    for &u in test.iter().chain(&val) {
        out[u] = false;
    }
    let fit = (0..n_users).filter(|&u| out[u]).collect();
    HeldOutGroups {
        test,
        validation: val,
        fit,
        rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_disjoint_cover_everyone_and_follow_the_seed() {
        let eligible: Vec<usize> = (0..100).filter(|u| u % 10 != 0).collect();
        let g = held_out_groups(100, &eligible, ValidationUsers::Auto, None, 3, None).unwrap();
        // Each of the 90 eligible users is a test (validation) user with probability 0.1.
        assert!(
            (3..=18).contains(&g.test.len()) && (3..=18).contains(&g.validation.len()),
            "{g:?}"
        );
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
        let e = held_out_groups(100, &eligible, ValidationUsers::Share(0.4), None, 3, None)
            .unwrap_err();
        assert!(e.to_string().contains("at most 0.5"), "{e}");
        assert_eq!(
            ValidationUsers::parse("auto").unwrap(),
            ValidationUsers::Auto
        );
        assert_eq!(
            ValidationUsers::parse(" 0.07").unwrap(),
            ValidationUsers::Share(0.07)
        );
        assert!(ValidationUsers::parse("x").is_err());
        assert!(ValidationUsers::parse("7").is_err());
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
