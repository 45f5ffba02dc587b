//! `recsel export`: load, preprocess and split a data set exactly as `fit` does (docs/protocol.md,
//! steps 1–3), then write the split as LightGCN `train.txt` / `test.txt`, so another tool (the
//! Python SANSA reference of `benches/sansa_compare.sh`) fits and evaluates on the same
//! interactions as `recsel fit --format lightgcn --path DIR`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::{load_dataset_with, write_lightgcn};

use recsel::data::DataOptions;

use super::common::Flags;

/// Write a data set's train/test split as LightGCN text (train.txt, test.txt).
///
/// The training users' rows, then each test user's input row, go to train.txt (users numbered
/// from 0 in that order); the test users' held-out targets go to test.txt; validation users are
/// left out. Item ids are recsel's item columns. Read back with `--format lightgcn`, the model is
/// fitted on every train.txt row (LightGCN's protocol) and evaluated on the same test users,
/// inputs and targets.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel export --dataset synthetic --shape netflix --out /tmp/synthetic-netflix
  recsel fit --format lightgcn --path /tmp/synthetic-netflix --method exact --l2 1200 --density 0.005
  recsel export --format movielens --path data/ml20m --out /tmp/ml20m-lightgcn --json")]
pub struct Args {
    #[command(flatten)]
    data: Flags<DataOptions>,
    #[command(flatten)]
    renamed: super::common::RenamedSeed,
    /// Directory to write train.txt and test.txt into (created if missing; files in it are
    /// replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print one JSON object (the counts written) instead of a sentence.
    #[arg(long)]
    json: bool,
}

/// Runs `recsel export`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.renamed.check()?;
    let split_seed = args.data.0.split_seed();
    let src = args.data.0.source()?;
    let opts = args.data.0.load_options()?;
    let t = Instant::now();
    eprintln!("[export] loading data …");
    let data = load_dataset_with(&src, split_seed, &opts).context("loading the data")?;
    eprintln!("[export] writing {} …", args.out.display());
    let n = write_lightgcn(&data, &args.out)
        .with_context(|| format!("writing LightGCN files to {}", args.out.display()))?;
    let seconds = t.elapsed().as_secs_f64();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let obj = serde_json::json!({
            "dataset": data.name(),
            "split_seed": split_seed,
            "dir": args.out.display().to_string(),
            "users": n.users,
            "test_users": n.test_users,
            "items": n.items,
            "train_interactions": n.train_interactions,
            "test_interactions": n.test_interactions,
            "validation_users_left_out": data.validation.rows(),
            "seconds": seconds,
        });
        writeln!(out, "{obj}")?;
    } else {
        writeln!(
            out,
            "{}: {} users ({} of them test users), {} items, {} train.txt and {} test.txt \
             interactions written to {} in {seconds:.1} s ({} validation users left out)",
            data.name(),
            n.users,
            n.test_users,
            n.items,
            n.train_interactions,
            n.test_interactions,
            args.out.display(),
            data.validation.rows()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
