//! The `[select]` table of a pipeline file: the options of `recsel select` (seed 001 fig 13, 21).
//!
//! Every key is optional except the data source; unknown keys are errors. The table is turned into
//! the equivalent `recsel select` command line, so a pipeline runs exactly what the command would.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Options of `recsel select` in a pipeline file (names as the flags, with underscores).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectPipeline {
    /// Named dataset (`ml20m`, `netflix`, `amazon-book`, `synthetic`).
    pub dataset: Option<String>,
    /// Shape of the synthetic dataset.
    pub shape: Option<String>,
    /// Directory of the named datasets (a `recsel run --data-dir` overrides it).
    pub data_dir: Option<PathBuf>,
    /// Format of `path` (`movielens`, `netflix`, `lightgcn`, `csv`, `parquet`).
    pub format: Option<String>,
    /// File or directory to read with `format`.
    pub path: Option<PathBuf>,
    /// User column of a csv/parquet `path`.
    pub user_col: Option<String>,
    /// Item column of a csv/parquet `path`.
    pub item_col: Option<String>,
    /// Rating column of a csv/parquet `path`.
    pub rating_col: Option<String>,
    /// Field separator of a csv `path` (one character, or `\t`).
    pub delimiter: Option<String>,
    /// Keep ratings ≥ this, or `"none"` for implicit data.
    pub min_rating: Option<RatingCut>,
    /// Keep users with at least this many items.
    pub min_user_items: Option<usize>,
    /// Number of test users.
    pub test_users: Option<usize>,
    /// Directory of the saved model to use or create.
    pub model_dir: Option<PathBuf>,
    /// Seed of the split and of synthetic data.
    pub data_seed: Option<u64>,
    /// Model: exact, icf, ease, popular.
    pub method: Option<String>,
    /// L2 regularisation λ.
    pub l2: Option<f64>,
    /// SANSA weight density.
    pub density: Option<f64>,
    /// `all` or a comma-separated list of mechanisms.
    pub mechanisms: Option<String>,
    /// ε grid.
    pub epsilons: Option<Vec<f64>>,
    /// Trials per (user, mechanism, ε).
    pub trials: Option<u32>,
    /// Candidates per user.
    pub top: Option<usize>,
    /// Candidate policy (`all`, `popular:N`, `pool:FILE`, `history-top:N`); replaces `top`.
    /// Written only when set, so the paper's runs keep their resolved configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<String>,
    /// Clip scores to each item's [p1, p99] (default false, the paper's text; only a clipped run
    /// is a DP release).
    pub clip: Option<bool>,
    /// Whose scores the percentiles are taken over: `all` (default, the paper's text) or
    /// `without-item`.
    pub percentile_users: Option<String>,
    /// γ of rs, rs-tnb.
    pub gamma: Option<f64>,
    /// β of gem, mgem, cgem.
    pub beta: Option<f64>,
    /// η of rs-tnb.
    pub eta: Option<f64>,
    /// cgem's share of ε for the correlation bit.
    pub c: Option<f64>,
    /// cgem's correlation.
    pub chooser: Option<String>,
    /// Seed of the selection streams.
    pub seed: Option<u64>,
    /// ε of the per-user scatter plot.
    pub scatter_eps: Option<f64>,
}

/// A rating cut-off in a pipeline file: a number, or the word `"none"` (keep every record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RatingCut {
    /// Keep ratings ≥ this.
    Value(f64),
    /// `"none"`.
    Word(String),
}

impl SelectPipeline {
    /// A data source is named: `dataset`, or `format` with `path`.
    pub fn validate(&self) -> Result<()> {
        match (&self.dataset, &self.format, &self.path) {
            (Some(_), None, None) | (None, Some(_), Some(_)) => Ok(()),
            _ => Err(Error::Invalid(
                "[select] needs `dataset`, or `format` together with `path`".into(),
            )),
        }
    }

    /// The `recsel select` arguments (without the program name and subcommand) that run this
    /// table, writing into `out`; `data_dir` replaces the table's own.
    pub fn to_args(&self, out: &Path, data_dir: Option<&Path>) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |flag: &str, v: String| {
            a.push(format!("--{flag}"));
            a.push(v);
        };
        let d = |p: &PathBuf| p.display().to_string();
        if let Some(v) = &self.dataset {
            push("dataset", v.clone());
        }
        if let Some(v) = &self.shape {
            push("shape", v.clone());
        }
        if let Some(v) = data_dir.map(Path::to_path_buf).or(self.data_dir.clone()) {
            push("data-dir", d(&v));
        }
        if let Some(v) = &self.format {
            push("format", v.clone());
        }
        if let Some(v) = &self.path {
            push("path", d(v));
        }
        for (flag, v) in [
            ("user-col", &self.user_col),
            ("item-col", &self.item_col),
            ("rating-col", &self.rating_col),
            ("delimiter", &self.delimiter),
        ] {
            if let Some(v) = v {
                push(flag, v.clone());
            }
        }
        match &self.min_rating {
            Some(RatingCut::Value(r)) => push("min-rating", format!("{r}")),
            Some(RatingCut::Word(w)) => push("min-rating", w.clone()),
            None => {}
        }
        if let Some(v) = self.min_user_items {
            push("min-user-items", v.to_string());
        }
        if let Some(v) = self.test_users {
            push("test-users", v.to_string());
        }
        if let Some(v) = &self.model_dir {
            push("model-dir", d(v));
        }
        let num = |x: f64| format!("{x}");
        if let Some(v) = self.data_seed {
            push("data-seed", v.to_string());
        }
        if let Some(v) = &self.method {
            push("method", v.clone());
        }
        if let Some(v) = self.l2 {
            push("l2", num(v));
        }
        if let Some(v) = self.density {
            push("density", num(v));
        }
        if let Some(v) = &self.mechanisms {
            push("mech", v.clone());
        }
        if let Some(v) = &self.epsilons {
            push(
                "eps",
                v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(","),
            );
        }
        if let Some(v) = self.trials {
            push("trials", v.to_string());
        }
        match (&self.candidates, self.top) {
            (Some(c), _) => push("candidates", c.clone()),
            (None, Some(v)) => push("top", v.to_string()),
            (None, None) => {}
        }
        for (flag, v) in [
            ("gamma", self.gamma),
            ("beta", self.beta),
            ("eta", self.eta),
            ("c", self.c),
            ("scatter-eps", self.scatter_eps),
        ] {
            if let Some(v) = v {
                push(flag, num(v));
            }
        }
        if let Some(v) = &self.chooser {
            push("chooser", v.clone());
        }
        if let Some(v) = self.seed {
            push("seed", v.to_string());
        }
        if let Some(v) = &self.percentile_users {
            push("percentile-users", v.clone());
        }
        push("out", out.display().to_string());
        match self.clip {
            Some(true) => a.push("--clip".into()),
            Some(false) => a.push("--no-clip".into()),
            None => {}
        }
        a
    }
}
