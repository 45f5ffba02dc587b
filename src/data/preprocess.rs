//! Preprocessing as in SANSA's experiments (docs/protocol.md, step 2): keep ratings ≥ 4 and binarise (MovieLens,
//! Netflix), count duplicate (user, item) pairs once, keep users with ≥ 5 interactions, and drop the
//! items no kept interaction mentions.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

use super::{split_at_bounds_mut, Csr, RawInteractions};
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

/// Applies [`PreprocessConfig`] to raw records (a copy of them: [`preprocess_owned`] needs less
/// memory).
pub fn preprocess(raw: &RawInteractions, cfg: &PreprocessConfig) -> Result<Interactions> {
    preprocess_owned(raw.clone(), cfg)
}

/// [`preprocess`], consuming the records so that their memory is released as soon as the matrix
/// no longer needs them (docs/real-data.md, "Memory"). The matrix is built by a counting
/// sort into rows — the records' item codes bucketed by user (or taken as they are when the
/// records come in user order), then each row sorted and deduplicated in place — so at most the
/// records and one `u32` per record are held at once, never a (user, item) pair per record
/// beside the records and the matrix.
pub fn preprocess_owned(raw: RawInteractions, cfg: &PreprocessConfig) -> Result<Interactions> {
    let RawInteractions {
        users,
        items,
        ratings,
        user_ids: raw_user_ids,
        item_ids: raw_item_ids,
    } = raw;
    let records = users.len();
    let keep = |k: usize| match (&ratings, cfg.min_rating) {
        (Some(r), Some(min)) => r[k] >= min,
        _ => true,
    };
    // Rows by counting sort: kept records per user, then each record's item into its row.
    let n_users = raw_user_ids.len();
    let mut start = vec![0usize; n_users + 1];
    for k in 0..records {
        if keep(k) {
            start[users[k] as usize + 1] += 1;
        }
    }
    for u in 0..n_users {
        start[u + 1] += start[u];
    }
    // Records already in user order, all kept (generated data): the item codes are the rows.
    let in_place = start[n_users] == records && users.windows(2).all(|w| w[0] <= w[1]);
    let mut indices = if in_place {
        items
    } else {
        let mut indices = vec![0u32; start[n_users]];
        let mut next = start.clone();
        for k in 0..records {
            if keep(k) {
                let u = users[k] as usize;
                indices[next[u]] = items[k];
                next[u] += 1;
            }
        }
        indices
    };
    drop((users, ratings));
    // Each row sorted with duplicates once; users with too few distinct items dropped; rows
    // compacted in place towards the front.
    let mut indptr = Vec::with_capacity(n_users + 1);
    indptr.push(0usize);
    let mut user_ids = Vec::new();
    let mut write = 0usize;
    // Rows are sorted and deduplicated in parallel (each in place at its start), then compacted.
    let distinct: Vec<usize> = split_at_bounds_mut(&mut indices, &start)
        .into_par_iter()
        .with_min_len(1024)
        .map(|row| {
            row.sort_unstable();
            let mut len = 0usize;
            for i in 0..row.len() {
                if i == 0 || row[i] != row[len - 1] {
                    row[len] = row[i];
                    len += 1;
                }
            }
            len
        })
        .collect();
    for u in 0..n_users {
        let (a, len) = (start[u], distinct[u]);
        if len > 0 && len >= cfg.min_user_interactions {
            indices.copy_within(a..a + len, write);
            write += len;
            indptr.push(write);
            user_ids.push(raw_user_ids[u].clone());
        }
    }
    drop(start);
    indices.truncate(write);
    indices.shrink_to_fit();
    // Items still present, renumbered in code order (an increasing map keeps rows sorted).
    let n_items = raw_item_ids.len();
    let mut item_map = vec![u32::MAX; n_items];
    for &i in &indices {
        item_map[i as usize] = 0;
    }
    let mut item_ids = Vec::new();
    for i in 0..n_items {
        if item_map[i] == 0 {
            item_map[i] = item_ids.len() as u32;
            item_ids.push(raw_item_ids[i].clone());
        }
    }
    if indices.is_empty() {
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
            "no interaction left after preprocessing ({records} records read; kept {cut}, users with >= {} \
             items){hint}",
            cfg.min_user_interactions
        )));
    }
    for i in indices.iter_mut() {
        *i = item_map[*i as usize];
    }
    let data = vec![1.0f32; indices.len()];
    let matrix = Csr::new((user_ids.len(), item_ids.len()), indptr, indices, data);
    Ok(Interactions {
        matrix,
        user_ids,
        item_ids,
    })
}
