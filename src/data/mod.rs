//! Interaction data: loaders (docs/protocol.md, step 1), preprocessing (§5.2), splits (§5.3) and synthetic
//! interactions generated to the shape of the paper's datasets.
//!
//! A record travels `load` → [`RawInteractions`] (one row per rating line, ids compacted to codes) →
//! [`preprocess()`] (rating filter, binarise, duplicate pairs once, minimum user activity) →
//! [`split()`] → [`Dataset`] (the CSR matrices a model is fitted and evaluated on); [`write_lightgcn`] writes a split
//! `Dataset` back out as LightGCN text, for tools that read that format.

pub mod descriptor;
pub mod export;
pub mod heldout;
pub mod load;
pub mod options;
pub mod preprocess;
mod readers;
mod source;
pub mod split;
pub mod synthetic;
pub mod universe;

pub use descriptor::{Descriptor, PaperModel, Protocol};
pub use export::{write_lightgcn, LightGcnExport};
pub use heldout::{calibration_users, HeldOutRows, ValidationUsers};
pub use load::{load_dataset, load_dataset_with, DataSource, Format, LoadOptions, NamedDataset};
pub use options::{DataOptions, RatingCut};
pub use preprocess::{preprocess, preprocess_owned, PreprocessConfig};
pub use split::{split, split_owned, SplitConfig, SplitRule};
pub use universe::read_catalogue;

use crate::{Error, Result};

/// Sparse binary matrix in compressed-row form: `f32` values (always 1), `u32` column indices.
pub type Csr = sprs::CsMatI<f32, u32, usize>;

/// The column indices of row `u` of `m` (a user's items), as a slice of `m`.
pub fn row_items(m: &Csr, u: usize) -> &[u32] {
    &m.indices()[m.indptr().outer_inds_sz(u)]
}

/// `s` cut into the pieces `s[bounds[i]..bounds[i + 1]]` (`bounds` increasing from 0, like a
/// matrix's `indptr`), each mutable on its own: rows or columns of a flat array handed to
/// parallel workers.
pub fn split_at_bounds_mut<'a, T>(s: &'a mut [T], bounds: &[usize]) -> Vec<&'a mut [T]> {
    let mut pieces = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut rest = s;
    for w in bounds.windows(2) {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// Interactions as read from a file, before preprocessing. Users and items are dense codes
/// `0..user_ids.len()` / `0..item_ids.len()`; the `*_ids` vectors give the original identifiers.
#[derive(Debug, Clone, Default)]
pub struct RawInteractions {
    /// User code of each record.
    pub users: Vec<u32>,
    /// Item code of each record.
    pub items: Vec<u32>,
    /// Rating of each record, when the format has one.
    pub ratings: Option<Vec<f32>>,
    /// Original user identifier of each code.
    pub user_ids: Vec<String>,
    /// Original item identifier of each code.
    pub item_ids: Vec<String>,
}

impl RawInteractions {
    /// Number of records (rating lines), duplicates included.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when there is no record.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Builds the compacted form from raw integer identifiers: codes are assigned in increasing
    /// identifier order, so the result does not depend on the order of the lines.
    pub fn from_raw_ids(users: &[i64], items: &[i64], ratings: Option<Vec<f32>>) -> Self {
        let (user_codes, user_ids) = compact_ids(users);
        let (item_codes, item_ids) = compact_ids(items);
        RawInteractions {
            users: user_codes,
            items: item_codes,
            ratings,
            user_ids: user_ids.iter().map(|v| v.to_string()).collect(),
            item_ids: item_ids.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// The rows `rows` of a CSR matrix, in that order.
pub fn select_rows(m: &Csr, rows: &[usize]) -> Csr {
    let mut indptr = Vec::with_capacity(rows.len() + 1);
    indptr.push(0usize);
    let mut indices = Vec::new();
    for &r in rows {
        if let Some(row) = m.outer_view(r) {
            indices.extend_from_slice(row.indices());
        }
        indptr.push(indices.len());
    }
    let data = vec![1.0f32; indices.len()];
    Csr::new((rows.len(), m.cols()), indptr, indices, data)
}

/// Maps arbitrary integer ids to dense codes `0..k` in increasing id order.
pub(crate) fn compact_ids(ids: &[i64]) -> (Vec<u32>, Vec<i64>) {
    let mut uniq: Vec<i64> = ids.to_vec();
    uniq.sort_unstable();
    uniq.dedup();
    // Dense lookup when the id range is small (the usual case), binary search otherwise.
    let codes = match (uniq.first(), uniq.last()) {
        (Some(&lo), Some(&hi)) if hi - lo < 50_000_000 && lo >= i64::MIN / 2 => {
            let mut table = vec![u32::MAX; (hi - lo + 1) as usize];
            for (c, &v) in uniq.iter().enumerate() {
                table[(v - lo) as usize] = c as u32;
            }
            ids.iter().map(|&v| table[(v - lo) as usize]).collect()
        }
        _ => ids
            .iter()
            .map(|v| uniq.binary_search(v).expect("id present") as u32)
            .collect(),
    };
    (codes, uniq)
}

/// A binary CSR matrix whose row `u` holds the items of `rows[u]`, over `cols` items (duplicate
/// items in a row count once).
pub fn csr_from_rows(rows: &[Vec<u32>], cols: usize) -> Csr {
    let mut pairs: Vec<(u32, u32)> = (0u32..)
        .zip(rows)
        .flat_map(|(u, r)| r.iter().map(move |&j| (u, j)))
        .collect();
    csr_from_pairs(rows.len(), cols, &mut pairs)
}

/// Builds a CSR matrix with ones at the given (row, column) pairs; duplicate pairs count once.
pub fn csr_from_pairs(rows: usize, cols: usize, pairs: &mut [(u32, u32)]) -> Csr {
    pairs.sort_unstable();
    let mut indptr = Vec::with_capacity(rows + 1);
    let mut indices: Vec<u32> = Vec::with_capacity(pairs.len());
    indptr.push(0usize);
    let mut row = 0u32;
    let mut last: Option<(u32, u32)> = None;
    for &(r, c) in pairs.iter() {
        if last == Some((r, c)) {
            continue;
        }
        last = Some((r, c));
        while row < r {
            indptr.push(indices.len());
            row += 1;
        }
        indices.push(c);
    }
    while indptr.len() < rows + 1 {
        indptr.push(indices.len());
    }
    let data = vec![1.0f32; indices.len()];
    Csr::new((rows, cols), indptr, indices, data)
}

/// The matrices one fit-and-evaluate run works on (docs/protocol.md, steps 3–5).
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Name, source format and protocol (whose defaults apply to this data).
    pub descriptor: Descriptor,
    /// Rows the model is fitted on (training users), items as columns.
    pub train: Csr,
    /// Input rows of the test users (what the model scores from).
    pub test_input: Csr,
    /// Held-out target rows of the test users (same row order as `test_input`).
    pub test_target: Csr,
    /// Full rows of the validation users: neither fitted on nor served, so a release calibrates
    /// its per-item clip bounds and sensitivities on them (docs/deployment.md, "Calibration").
    /// Empty when the split has none (small data, LightGCN files in the paper's protocol). With
    /// [`Dataset::validation_target`] filled, these are the users' histories instead.
    pub validation: Csr,
    /// Held-out rows of the validation users when the protocol gives them (LightGCN files with
    /// held-out users: their `test.txt` rows); empty (0 rows) when `validation` holds full rows.
    pub validation_target: Csr,
    /// Per item column, how many users fitted on hold the item out in the file's own split
    /// (their `test.txt` rows; LightGCN files with held-out users): public training data, the
    /// ranking of the `heldout:N` candidate policy. `None` when the training rows have no
    /// held-out part.
    pub heldout_popularity: Option<Vec<u64>>,
    /// The held-out rows of the users fitted on (one row per fitted user, in no particular
    /// order), from which [`Dataset::heldout_popularity`] is counted: a release that counts them
    /// privately caps each user's contribution. `None` when the training rows have no held-out
    /// part.
    pub heldout_rows: Option<Csr>,
    /// Original identifier of each item column.
    pub item_ids: Vec<String>,
    /// Original identifier of each test user row.
    pub test_user_ids: Vec<String>,
    /// Original identifier of each validation user row (aligned with [`Dataset::validation`]):
    /// what a calibration user's part of a tuning is keyed on (`tuning::estimate`).
    pub validation_user_ids: Vec<String>,
    /// How the users were put in their groups: the split's public inputs and rule.
    pub split_rule: split::SplitRule,
}

impl Dataset {
    /// Name for reports (`ml20m`, `ml-1m-implicit`, `synthetic-small`, …).
    pub fn name(&self) -> &str {
        &self.descriptor.name
    }

    /// A data set of training rows alone — no test, validation or held-out users — named `name`:
    /// the data of a front end that fits a model on its own rows and publishes it (Python's
    /// `Model.save_release`), whose release then calibrates on the training users.
    pub fn from_training_rows(name: &str, train: Csr, item_ids: Vec<String>) -> Result<Dataset> {
        let n = train.cols();
        let ds = Dataset {
            descriptor: Descriptor::new(name, None, Protocol::Table),
            train,
            test_input: Csr::zero((0, n)),
            test_target: Csr::zero((0, n)),
            validation: Csr::zero((0, n)),
            validation_target: Csr::zero((0, n)),
            heldout_popularity: None,
            heldout_rows: None,
            item_ids,
            test_user_ids: Vec::new(),
            validation_user_ids: Vec::new(),
            split_rule: split::SplitRule {
                seed: None,
                test_share: None,
                validation_share: None,
                rule: "the caller's own rows: every row is fitted on; no test or validation users"
                    .into(),
            },
        };
        ds.validate()?;
        Ok(ds)
    }

    /// Number of item columns.
    pub fn n_items(&self) -> usize {
        self.train.cols()
    }

    /// A 64-bit fingerprint of the training matrix and item ids (FNV-1a), for checks on the
    /// user's own side (the experiment runner's model cache and resume keys). Never written into
    /// a model or a release: anyone holding the data could test a person's presence with it.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Fnv64::new();
        h.write(&(self.train.rows() as u64).to_le_bytes());
        h.write(&(self.train.cols() as u64).to_le_bytes());
        for &p in self.train.indptr().raw_storage() {
            h.write(&(p as u64).to_le_bytes());
        }
        for &i in self.train.indices() {
            h.write(&i.to_le_bytes());
        }
        for id in &self.item_ids {
            h.write(id.as_bytes());
            h.write(&[0]);
        }
        h.finish()
    }

    /// Frees the training and validation rows, keeping the test users' rows, the ids and the
    /// descriptor: `select` needs nothing else once its model and fingerprints exist
    /// (docs/real-data.md, "Memory and time"). [`Dataset::fingerprint`] describes the data only
    /// before this.
    pub fn release_training_rows(&mut self) {
        let n = self.train.cols();
        self.train = Csr::zero((0, n));
        self.validation = Csr::zero((0, n));
        self.validation_target = Csr::zero((0, n));
        self.validation_user_ids.clear();
    }

    /// Checks the three matrices agree in shape.
    pub fn validate(&self) -> Result<()> {
        let n = self.train.cols();
        if self.test_input.cols() != n
            || self.test_target.cols() != n
            || self.item_ids.len() != n
            || self.test_input.rows() != self.test_target.rows()
            || self.validation.cols() != n
            || self.validation_user_ids.len() != self.validation.rows()
            || self.validation_target.cols() != n
            || (self.validation_target.rows() != 0
                && self.validation_target.rows() != self.validation.rows())
            || self
                .heldout_popularity
                .as_ref()
                .is_some_and(|c| c.len() != n)
        {
            return Err(Error::Invalid(format!(
                "dataset '{}' is inconsistent: train {}x{}, test input {}x{}, test target {}x{}, {} item ids",
                self.name(),
                self.train.rows(),
                n,
                self.test_input.rows(),
                self.test_input.cols(),
                self.test_target.rows(),
                self.test_target.cols(),
                self.item_ids.len()
            )));
        }
        Ok(())
    }
}

/// FNV-1a, 64 bit: a small stable hash for fingerprints (not cryptographic).
#[derive(Debug, Clone, Copy)]
pub struct Fnv64(u64);

impl Fnv64 {
    /// A fresh hasher.
    pub fn new() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// The hash value.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv64 {
    fn default() -> Self {
        Self::new()
    }
}
