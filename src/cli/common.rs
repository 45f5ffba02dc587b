//! Pieces shared by several subcommands: mechanism parameters, number lists, progress bars, seeds.

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use recsel::mechanisms::MechParams;
use recsel::rng::Streams;
use recsel::stats::Chooser;

/// Hyperparameters of the mechanisms that have them (ε is given separately).
#[derive(Debug, Clone, clap::Args)]
pub struct MechOpts {
    /// Stopping probability γ of rs, rs-tnb, rs-exp (and rs-exp-m1), in (0, 1].
    #[arg(long, value_name = "G")]
    pub gamma: Option<f64>,
    /// Failure probability β of gem, mgem and cgem, in (0, 1).
    #[arg(long, value_name = "B")]
    pub beta: Option<f64>,
    /// Shape η > -1 of rs-tnb's truncated negative binomial.
    #[arg(long, value_name = "H")]
    pub eta: Option<f64>,
    /// Share of ε that cgem spends on the correlation bit, in (0, 1).
    #[arg(long, value_name = "C")]
    pub c: Option<f64>,
    /// Correlation cgem uses to choose between gem and mgem.
    #[arg(long, value_parser = ["spearman", "pearson", "weighted"])]
    pub chooser: Option<String>,
    /// Number of draws T of the audit reference bot-exp, >= 1.
    #[arg(long, value_name = "T")]
    pub draws: Option<u64>,
}

impl MechOpts {
    /// `base` with every option given on the command line applied.
    pub fn apply(&self, mut base: MechParams) -> anyhow::Result<MechParams> {
        if let Some(g) = self.gamma {
            base.gamma = g;
        }
        if let Some(b) = self.beta {
            base.beta = b;
        }
        if let Some(h) = self.eta {
            base.eta = h;
        }
        if let Some(c) = self.c {
            base.c = c;
        }
        if let Some(ch) = &self.chooser {
            base.chooser = Chooser::from_name(ch)?;
        }
        if let Some(t) = self.draws {
            base.draws = t;
        }
        Ok(base)
    }
}

/// Parses a comma-separated list of numbers; errors name the position and the text.
pub fn parse_f64_list(what: &str, text: &str) -> anyhow::Result<Vec<f64>> {
    text.split(',')
        .enumerate()
        .map(|(i, t)| {
            let t = t.trim();
            t.parse::<f64>()
                .with_context(|| format!("{what}: item {} is '{t}', not a number", i + 1))
        })
        .collect()
}

/// The seed from `--seed`, or one drawn from OS entropy (below 2^63, so TOML can record it) and
/// reported on stderr so the run can be repeated.
pub fn seed_or_entropy(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        let s = Streams::from_entropy().seed();
        eprintln!("recsel: no --seed given; using seed {s} (from OS entropy)");
        s
    })
}

/// Says on stderr what `--secure` means for this run: no seed, OS entropy, and the exact ε.
pub fn announce_secure(effective_epsilon: f64) {
    eprintln!(
        "recsel: --secure: exact discrete noise from an OS-seeded ChaCha20 generator (no seed; \
         the run cannot be repeated); effective eps = {effective_epsilon} (eps rounded down \
         onto the 2^-32 grid)"
    );
}

/// Says on stderr once what `--secure` means for a run of several mechanisms.
pub fn announce_secure_mode() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "recsel: --secure: exact discrete noise from OS-seeded ChaCha20 generators (no seed; \
             the run cannot be repeated); every eps is rounded down onto the 2^-32 grid"
        )
    });
}

/// Like [`announce_secure`], one line per mechanism.
pub fn announce_secure_for(name: &str, effective_epsilon: f64) {
    announce_secure_mode();
    eprintln!("recsel: --secure: {name}: effective eps = {effective_epsilon}");
}

/// Streams from `--seed`, or from OS entropy (see [`seed_or_entropy`]).
pub fn streams(seed: Option<u64>) -> Streams {
    Streams::new(seed_or_entropy(seed))
}

/// A progress bar on stderr (drawn only when stderr is a terminal) with rate and time left.
pub fn progress(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({per_sec}, {eta} left)")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// Checks a positive count.
pub fn positive(name: &str, n: u64) -> anyhow::Result<u64> {
    if n == 0 {
        bail!("{name} must be at least 1, got 0");
    }
    Ok(n)
}

/// Where the interactions come from (shared by `fit` and `select`).
#[derive(Debug, Clone, clap::Args)]
pub struct DataArgs {
    /// Named dataset: ml20m, netflix, amazon-book (read from <data-dir>/<name>/) or synthetic.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["format", "path"])]
    pub dataset: Option<String>,
    /// Shape of --dataset synthetic: small, ml20m or netflix.
    #[arg(long, default_value = "small", value_name = "SHAPE")]
    pub shape: String,
    /// Directory holding the named datasets.
    #[arg(long, default_value = "data", value_name = "DIR")]
    pub data_dir: std::path::PathBuf,
    /// Format of --path: movielens, netflix, lightgcn, csv or parquet.
    #[arg(long, value_name = "FORMAT", requires = "path")]
    pub format: Option<String>,
    /// File (or directory for movielens, netflix, lightgcn) to read.
    #[arg(long, value_name = "PATH", requires = "format")]
    pub path: Option<std::path::PathBuf>,
    /// User column of a csv/parquet file.
    #[arg(long, value_name = "NAME")]
    pub user_col: Option<String>,
    /// Item column of a csv/parquet file.
    #[arg(long, value_name = "NAME")]
    pub item_col: Option<String>,
    /// Rating column of a csv/parquet file (then ratings >= 4 are kept).
    #[arg(long, value_name = "NAME")]
    pub rating_col: Option<String>,
}

impl DataArgs {
    /// The data source these options name.
    pub fn source(&self) -> anyhow::Result<recsel::data::DataSource> {
        use recsel::data::load::Columns;
        use recsel::data::synthetic::SyntheticShape;
        use recsel::data::{DataSource, Format, NamedDataset};
        if let Some(name) = &self.dataset {
            let shape = SyntheticShape::parse(&self.shape)?;
            return Ok(DataSource::Named {
                dataset: NamedDataset::parse(name, shape)?,
                data_dir: self.data_dir.clone(),
            });
        }
        match (&self.format, &self.path) {
            (Some(f), Some(p)) => {
                let format = Format::parse(f)?;
                let columns = match (&self.user_col, &self.item_col) {
                    (Some(u), Some(i)) => Some(Columns {
                        user: u.clone(),
                        item: i.clone(),
                        rating: self.rating_col.clone(),
                    }),
                    _ if matches!(format, Format::Csv | Format::Parquet) => {
                        bail!("--format {f} needs --user-col and --item-col")
                    }
                    _ => None,
                };
                Ok(DataSource::Path {
                    format,
                    path: p.clone(),
                    columns,
                })
            }
            _ => bail!("give --dataset NAME, or --format FORMAT --path PATH"),
        }
    }
}

/// Model hyperparameters (shared by `fit` and `select`).
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model: exact (SANSA, sparse Cholesky), icf (SANSA, incomplete Cholesky), ease (dense), popular.
    #[arg(long, default_value = "exact", value_name = "METHOD")]
    pub method: String,
    /// L2 regularisation λ (SANSA paper: 600 MovieLens, 1200 Netflix, 20 Amazon-Book with icf).
    #[arg(long, default_value_t = 200.0, value_name = "λ")]
    pub l2: f64,
    /// Target density of each SANSA weight factor, in (0, 1].
    #[arg(long, default_value_t = 0.01, value_name = "D")]
    pub density: f64,
}

impl ModelArgs {
    /// Validated model parameters.
    pub fn params(&self) -> anyhow::Result<recsel::model::ModelParams> {
        let method = recsel::model::Method::parse(&self.method)?;
        Ok(recsel::model::ModelParams::new(
            method,
            self.l2,
            self.density,
        )?)
    }
}
