//! Preprocessing as in SANSA's experiments (docs/protocol.md, step 2): keep ratings ≥ 4 and binarise (MovieLens,
//! Netflix), count duplicate (user, item) pairs once, keep users with ≥ 5 interactions, and drop the
//! items no kept interaction mentions.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use super::{csr_from_pairs, Csr, RawInteractions};
use crate::{Error, Result};

/// Preprocessing settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessConfig {
    /// Keep records with rating ≥ this (when the data has ratings).
    pub min_rating: Option<f32>,
    /// Keep users with at least this many distinct items.
    pub min_user_interactions: usize,
}

impl PreprocessConfig {
    /// MovieLens and Netflix: rating ≥ 4, users with ≥ 5 interactions.
    pub fn movielens() -> Self {
        PreprocessConfig {
            min_rating: Some(4.0),
            min_user_interactions: 5,
        }
    }
    /// Implicit data without ratings: users with ≥ 5 interactions.
    pub fn min_user_only() -> Self {
        PreprocessConfig {
            min_rating: None,
            min_user_interactions: 5,
        }
    }
    /// No filtering (synthetic data is generated already clean).
    pub fn none() -> Self {
        PreprocessConfig {
            min_rating: None,
            min_user_interactions: 0,
        }
    }
}

/// The preprocessed binary user × item matrix with the original ids of rows and columns.
#[derive(Debug, Clone)]
pub struct Interactions {
    /// Binary matrix, one row per kept user.
    pub matrix: Csr,
    /// Original id of each row.
    pub user_ids: Vec<String>,
    /// Original id of each column.
    pub item_ids: Vec<String>,
}

/// Applies [`PreprocessConfig`] to raw records.
pub fn preprocess(raw: &RawInteractions, cfg: &PreprocessConfig) -> Result<Interactions> {
    let keep = |k: usize| match (&raw.ratings, cfg.min_rating) {
        (Some(r), Some(min)) => r[k] >= min,
        _ => true,
    };
    let mut pairs: Vec<(u32, u32)> = (0..raw.len())
        .filter(|&k| keep(k))
        .map(|k| (raw.users[k], raw.items[k]))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    // Users with enough distinct items.
    let n_users = raw.user_ids.len();
    let mut count = vec![0usize; n_users];
    for &(u, _) in &pairs {
        count[u as usize] += 1;
    }
    let mut user_map = vec![u32::MAX; n_users];
    let mut user_ids = Vec::new();
    for u in 0..n_users {
        if count[u] > 0 && count[u] >= cfg.min_user_interactions {
            user_map[u] = user_ids.len() as u32;
            user_ids.push(raw.user_ids[u].clone());
        }
    }
    pairs.retain(|&(u, _)| user_map[u as usize] != u32::MAX);
    // Items still present.
    let n_items = raw.item_ids.len();
    let mut item_map = vec![u32::MAX; n_items];
    for &(_, i) in &pairs {
        item_map[i as usize] = 0;
    }
    let mut item_ids = Vec::new();
    for i in 0..n_items {
        if item_map[i] == 0 {
            item_map[i] = item_ids.len() as u32;
            item_ids.push(raw.item_ids[i].clone());
        }
    }
    if pairs.is_empty() {
        let cut = match cfg.min_rating {
            Some(r) => format!("ratings >= {r}"),
            None => "every rating".to_string(),
        };
        let hint = if cfg.min_rating.is_some() {
            "; for implicit data (clicks, no ratings) pass --min-rating none"
        } else {
            ""
        };
        return Err(Error::Invalid(format!(
            "no interaction left after preprocessing ({} records read; kept {cut}, users with >= {} \
             items){hint}",
            raw.len(),
            cfg.min_user_interactions
        )));
    }
    for p in pairs.iter_mut() {
        *p = (user_map[p.0 as usize], item_map[p.1 as usize]);
    }
    let matrix = csr_from_pairs(user_ids.len(), item_ids.len(), &mut pairs);
    Ok(Interactions {
        matrix,
        user_ids,
        item_ids,
    })
}
