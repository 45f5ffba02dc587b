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
    /// What cgem's bit reads to choose between gem and mgem: a correlation, or `bound` (mgem when
    /// its utility bound is at least gem's; see `recsel bounds`).
    #[arg(long, value_parser = ["spearman", "pearson", "weighted", "bound"])]
    pub chooser: Option<String>,
    /// Number of draws T of the audit reference bot-exp, >= 1.
    #[arg(long, value_name = "T")]
    pub draws: Option<u64>,
    /// A parameter a mechanism declares (`recsel mechanisms` lists them), e.g. `--param
    /// threshold=0.8 --param max_runs=100` for rs-threshold; repeatable.
    #[arg(long = "param", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub param: Vec<String>,
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
        for p in &self.param {
            let (name, value) = p
                .split_once('=')
                .with_context(|| format!("--param '{p}': expected NAME=VALUE"))?;
            let v: f64 = value
                .trim()
                .parse()
                .with_context(|| format!("--param '{p}': '{value}' is not a number"))?;
            base.extra.insert(name.trim().to_string(), v);
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
    /// Rating column of a csv/parquet file (then ratings >= 4 are kept, see --min-rating).
    #[arg(long, value_name = "NAME")]
    pub rating_col: Option<String>,
    /// Field separator of a csv file: one character, or `\t` / `tab` for tab-separated files.
    #[arg(long, value_name = "C", default_value = ",")]
    pub delimiter: String,
    /// Keep ratings >= R, or `none` to keep every record (implicit data such as clicks).
    /// Default: 4 when the data has ratings (the paper's preprocessing).
    #[arg(long, value_name = "R|none")]
    pub min_rating: Option<String>,
    /// Keep users with at least N distinct items (default 5; 0 keeps everyone).
    #[arg(long, value_name = "N")]
    pub min_user_items: Option<usize>,
    /// Number of test users (default: 10,000, or 40,000 for Netflix; a tenth of the users on
    /// small data).
    #[arg(long, value_name = "N")]
    pub test_users: Option<usize>,
    /// Validation (calibration) users held out of the fit and never served: `auto` or N
    /// (default: the protocol's — as many as test users for MovieLens and Netflix, none for
    /// synthetic small data and LightGCN files). On LightGCN files it holds N validation and N
    /// test users (or --test-users) out of the fit; `auto` takes a fifth of the users, at most
    /// 3,000 per group (docs/utility.md, "Protocols").
    #[arg(long, value_name = "auto|N")]
    pub validation_users: Option<String>,
}

impl DataArgs {
    /// The preprocessing and split options given on the command line.
    pub fn load_options(&self) -> anyhow::Result<recsel::data::LoadOptions> {
        let delimiter = match self.delimiter.as_str() {
            "\\t" | "\t" | "tab" => b'\t',
            d if d.len() == 1 && d.is_ascii() => d.as_bytes()[0],
            d => bail!("--delimiter must be one ASCII character, \\t or tab, got '{d}'"),
        };
        let min_rating = match self.min_rating.as_deref() {
            None => None,
            Some("none") => Some(None),
            Some(r) => {
                let v: f32 = r.trim().parse().with_context(|| {
                    format!("--min-rating must be a number or 'none', got '{r}'")
                })?;
                if !v.is_finite() {
                    bail!("--min-rating must be finite, got '{r}'");
                }
                Some(Some(v))
            }
        };
        Ok(recsel::data::LoadOptions {
            delimiter,
            min_rating,
            min_user_items: self.min_user_items,
            test_users: self.test_users,
            validation_users: self
                .validation_users
                .as_deref()
                .map(recsel::data::ValidationUsers::parse)
                .transpose()?,
        })
    }

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

/// Model hyperparameters (shared by `fit` and `select`). A named data set of the paper defaults to
/// the paper's settings for it; other data to exact, λ = 200, density 0.01.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model: exact (SANSA, sparse Cholesky), icf (SANSA, incomplete Cholesky), ease (dense),
    /// popular [default: the paper's for a named data set, else exact].
    #[arg(long, value_name = "METHOD")]
    pub method: Option<String>,
    /// L2 regularisation λ [default: the paper's for a named data set (600 MovieLens 20M,
    /// 1200 Netflix, 20 Amazon-Book), else 200].
    #[arg(long, value_name = "λ")]
    pub l2: Option<f64>,
    /// Target density of each SANSA weight factor, in (0, 1] [default: the paper's for a named
    /// data set (0.005 MovieLens 20M and Netflix, 5e-5 Amazon-Book), else 0.01].
    #[arg(long, value_name = "D")]
    pub density: Option<f64>,
    /// Precision of SANSA's dense factorisation (`exact` on a nearly dense Gram matrix, such as
    /// MovieLens or Netflix): f32 (half the memory and time) or f64 (docs/sansa.md, "Precision").
    #[arg(long, value_name = "P", default_value = recsel::model::Precision::DEFAULT.name())]
    pub precision: String,
}

impl ModelArgs {
    /// Validated model parameters: the options given, the rest from the data set's paper
    /// settings (when it has them) or the generic defaults. Says on stderr which settings were
    /// used and where each default came from.
    pub fn params(
        &self,
        data: &recsel::data::Descriptor,
    ) -> anyhow::Result<recsel::model::ModelParams> {
        let paper = data.paper_model;
        let method = self
            .method
            .clone()
            .unwrap_or_else(|| paper.map_or("exact", |p| p.method).to_string());
        let l2 = self.l2.unwrap_or(paper.map_or(200.0, |p| p.l2));
        let density = self.density.unwrap_or(paper.map_or(0.01, |p| p.density));
        let origin = match paper {
            Some(p) if self.method.is_none() || self.l2.is_none() || self.density.is_none() => {
                format!(
                    "defaults not given on the command line are the paper's ({})",
                    p.source
                )
            }
            Some(p) => format!(
                "all given on the command line; the paper used {} λ={} density={} ({})",
                p.method, p.l2, p.density, p.source
            ),
            None => "defaults: exact, λ=200, density=0.01".to_string(),
        };
        eprintln!(
            "recsel: model for {}: {method}, λ={l2}, density={density} ({origin})",
            data.name
        );
        let method = recsel::model::Method::parse(&method)?;
        let precision = recsel::model::Precision::parse(&self.precision)?;
        Ok(recsel::model::ModelParams::new(method, l2, density)?.with_precision(precision))
    }
}
