//! `recsel fit`: load a dataset, fit EASE or SANSA on the training users, evaluate on the test users
//! (docs/protocol.md, steps 1–4, §6) and optionally save the model.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::load_dataset_with;
use recsel::eval::{evaluate, Metrics};
use recsel::model::{self, Method, ModelParams};

use recsel::data::DataOptions;
use recsel::model::options::TrainingPrivacyOptions;
use recsel::model::ModelOptions;
use recsel::recommend::publish::{
    hold_out_calibration_users, write_release, Fitted, ReleaseOptions,
};

use super::common::Flags;

/// Fit a recommender (SANSA exact/icf, dense EASE, or most-popular) and report its accuracy.
///
/// Progress goes to stderr; the result (or one JSON object with --json) to stdout.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --method exact --l2 200 --density 0.01
  recsel fit --format lightgcn --path ../shared/data/ml-1m-implicit --method ease --l2 200 --json
  recsel fit --dataset ml20m --data-dir data --method exact --l2 600 --density 0.005 --out models/ml20m
  recsel fit --format csv --path my.csv --user-col user --item-col item --method icf --l2 20 --density 0.0005
  RECSEL_RELEASE_KEY_FILE=release.key recsel fit --dataset synthetic --out models/synth   # signed

With RECSEL_RELEASE_KEY_FILE naming a key file, --out also writes release.sig, the HMAC-SHA256
of every release file's SHA-256; readers given the same variable refuse a release that does
not match. Without it the release's CRC-32s detect accidents, not edits (docs/deployment.md).")]
pub struct Args {
    #[command(flatten)]
    data: Flags<DataOptions>,
    #[command(flatten)]
    model: Flags<ModelOptions>,
    #[command(flatten)]
    dp: Flags<TrainingPrivacyOptions>,
    #[command(flatten)]
    renamed: super::common::RenamedSeed,
    /// Save the model into this directory (model.json, w.npz, w_r.npz) with its release artifact
    /// (release.json, calibration.npz: per-item p1, p99 and Δ on calibration users;
    /// docs/deployment.md).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    release: Flags<ReleaseOptions>,
    /// Also evaluate the most-popular baseline.
    #[arg(long)]
    baseline: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn metrics_json(m: &Metrics) -> serde_json::Value {
    serde_json::json!({
        "users": m.users,
        "recall20_lightgcn": m.recall20_lightgcn.mean, "recall20_lightgcn_se": m.recall20_lightgcn.se,
        "ndcg20": m.ndcg20.mean, "ndcg20_se": m.ndcg20.se,
        "recall20": m.recall20.mean, "recall20_se": m.recall20.se,
        "recall50": m.recall50.mean, "recall50_se": m.recall50.se,
        "ndcg100": m.ndcg100.mean, "ndcg100_se": m.ndcg100.se,
        "hit1": m.hit1.mean, "hit1_se": m.hit1.se,
    })
}

/// The training users' privacy entry for people: the one text of `recsel fit`'s table and of its
/// progress line on stderr.
fn privacy_text(p: &recsel::privacy::PopulationPrivacy) -> String {
    format!(
        "{}, {}: ε = {:.4}, δ = {:e}; {}; {}",
        p.population,
        p.unit,
        p.epsilon.unwrap_or(f64::NAN),
        p.delta,
        p.mechanism,
        p.note
    )
}

fn print_metrics(out: &mut impl Write, label: &str, m: &Metrics) -> std::io::Result<()> {
    writeln!(out, "{label} ({} test users)", m.users)?;
    for (name, e) in [
        ("Recall@20 (LightGCN, hits/|T|)", m.recall20_lightgcn),
        ("nDCG@20   (LightGCN)", m.ndcg20),
        ("Recall@20 (SANSA, hits/min(20,|T|))", m.recall20),
        ("Recall@50 (SANSA)", m.recall50),
        ("nDCG@100  (SANSA)", m.ndcg100),
        ("hit@1     (non-private top-1)", m.hit1),
    ] {
        writeln!(out, "  {name:<38} {:.4} ± {:.4}", e.mean, e.se)?;
    }
    Ok(())
}

/// Runs `recsel fit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.renamed.check()?;
    let split_seed = args.data.0.split_seed();
    let src = args.data.0.source()?;
    let mut load_opts = args.data.0.load_options()?;
    let plan = args.release.0.plan()?;
    let grid = args.dp.0.dp_shift_grid.is_some();
    if (args.out.is_some() || grid) && hold_out_calibration_users(&src, &mut load_opts)? {
        eprintln!(
            "[fit] {} on LightGCN files: validation and test users held out of the fit \
             (--validation-users auto), so the {} calibrates on users it neither fits nor \
             serves (docs/utility.md, \"Protocols\")",
            if grid { "--dp-shift-grid" } else { "--out" },
            if grid { "shift choice" } else { "release" }
        );
    }
    let quiet = args.json;
    let progress = |stage: &str| eprintln!("[fit] {stage} …");

    let t = Instant::now();
    progress("loading data");
    let data = load_dataset_with(&src, split_seed, &load_opts).context("loading the data")?;
    let catalogue = load_opts.catalogue.is_some();
    let (params, line) = args.model.0.params(&data.descriptor)?;
    eprintln!("recsel: {line}");
    let method = params.method;
    let load_s = t.elapsed().as_secs_f64();
    // SANSA's item filter for ML-20M and Netflix (glami/sansa, datasets/movielens20.py and
    // netflix.py): no minimum count — an item survives iff some interaction kept by the rating >= 4
    // and users >= 5 filters mentions it, which the preprocessing here does too. Items that then
    // appear only in test users' rows have an empty training column: every model scores them 0.
    if catalogue {
        eprintln!(
            "[fit] item universe: the declared catalogue's {} items (a public input)",
            data.n_items()
        );
    } else {
        eprintln!(
            "[fit] item filter (as SANSA): items without a kept interaction dropped; {} items \
             kept",
            data.n_items()
        );
    }
    eprintln!(
        "[fit] {}: {} training users, {} items, {} training interactions, {} test users ({load_s:.2} s)",
        data.name(),
        data.train.rows(),
        data.n_items(),
        data.train.nnz(),
        data.test_input.rows()
    );

    let (trained, universe) = recsel::evaluate::shift::fit_dataset(
        &args.dp.0, &data, &params, split_seed, catalogue, &progress,
    )
    .context("fitting the model")?;
    if let Some(c) = &trained.shift_choice {
        eprintln!(
            "[fit] shift chosen privately: K = {} of the grid {:?} (λ used {:.1}); {} ε = {}",
            c.chosen,
            c.grid,
            trained.l2_used,
            c.privacy.population,
            c.privacy.epsilon.unwrap_or(f64::NAN)
        );
    }
    // The fit's ε_T with its choice, as the privacy report sums it.
    let fit_total = match (&trained.training_privacy, &trained.shift_choice) {
        (Some(t), Some(c)) => recsel::privacy::report::PrivacyReport::new(Vec::new())
            .with(recsel::privacy::report::MODEL_WEIGHTS, t.clone())
            .with(recsel::privacy::report::SHIFT_CHOICE, c.privacy.clone())
            .fit_total(),
        _ => None,
    };
    // Evaluation only (test users, never part of the release): each shift of the grid.
    let grid_test: Vec<(f64, f64, Metrics)> = trained
        .shift_candidates
        .iter()
        .map(|c| -> anyhow::Result<_> {
            let m = match &universe {
                Some(u) => model::dp_items::embed(c.model.clone(), u, data.n_items())?,
                None => c.model.clone(),
            };
            Ok((c.shift, c.l2_used, evaluate(&m, &data)))
        })
        .collect::<anyhow::Result<_>>()?;
    let (model, report, training_privacy) =
        (&trained.model, &trained.report, &trained.training_privacy);
    if let Some(u) = &trained.item_universe {
        eprintln!(
            "[fit] item universe: {} items; {}",
            model.n_items(),
            u.mechanism
        );
    }
    if let Some(p) = training_privacy {
        eprintln!("[fit] training privacy: {}", privacy_text(p));
    }
    let fit_s = report.total_seconds();
    eprintln!("[fit] fitted in {fit_s:.2} s");
    progress("evaluating");
    let t = Instant::now();
    // Evaluated on the data's own items: a test item outside the released universe is a miss
    // (the model, embedded into the data's columns, scores it 0).
    let metrics = match &universe {
        Some(u) => evaluate(
            &model::dp_items::embed(model.clone(), u, data.n_items())?,
            &data,
        ),
        None => evaluate(model, &data),
    };
    let eval_s = t.elapsed().as_secs_f64();
    let baseline = if args.baseline {
        let (pop, _) = model::fit(
            &data.train,
            &ModelParams::new(Method::Popular, 0.0, 1.0)?,
            &|_| {},
        )?;
        Some(evaluate(&pop, &data))
    } else {
        None
    };
    // The release's data: the released universe's columns.
    let data = match &universe {
        Some(u) => data.keep_columns(u),
        None => data,
    };
    let untrained = items_without_training(&data.train);
    if let Some(dir) = &args.out {
        let release = write_release(dir, Fitted::of(&trained, &params), &data, &plan, &progress)
            .with_context(|| format!("writing the model and its release to {}", dir.display()))?;
        eprintln!("[fit] {}", release.summary());
        if let Some(report) = &release.privacy {
            eprintln!("{report}");
        }
    }
    let peak = recsel::io::peak_rss_mb().unwrap_or(f64::NAN);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if quiet {
        let mut obj = metrics_json(&metrics);
        let map = obj.as_object_mut().expect("object");
        map.insert("dataset".into(), data.name().to_string().into());
        map.insert("method".into(), method.name().into());
        map.insert("l2".into(), params.l2.into());
        map.insert("l2_used".into(), trained.l2_used.into());
        map.insert(
            "training_privacy".into(),
            serde_json::to_value(training_privacy)?,
        );
        if let Some(c) = &trained.shift_choice {
            map.insert("dp_shift_grid".into(), c.grid.clone().into());
            map.insert("dp_shift_chosen".into(), c.chosen.into());
            map.insert(
                "shift_choice_privacy".into(),
                serde_json::to_value(&c.privacy)?,
            );
        }
        if let Some((e, d)) = fit_total {
            map.insert("fit_total_epsilon".into(), e.into());
            map.insert("fit_total_delta".into(), d.into());
        }
        if !grid_test.is_empty() {
            map.insert(
                "grid_test_evaluation".into(),
                grid_test
                    .iter()
                    .map(|(k, l2, m)| {
                        serde_json::json!({"shift": k, "l2_used": l2,
                            "recall20": m.recall20.mean, "recall20_se": m.recall20.se,
                            "recall20_lightgcn": m.recall20_lightgcn.mean,
                            "ndcg20": m.ndcg20.mean})
                    })
                    .collect::<Vec<_>>()
                    .into(),
            );
        }
        map.insert("density".into(), params.density.into());
        map.insert("split_seed".into(), split_seed.into());
        map.insert("items".into(), data.n_items().into());
        map.insert("items_without_training".into(), untrained.into());
        map.insert("train_users".into(), data.train.rows().into());
        map.insert("train_interactions".into(), data.train.nnz().into());
        map.insert("load_seconds".into(), load_s.into());
        map.insert("fit_seconds".into(), fit_s.into());
        // (stage, seconds) pairs as one JSON object.
        let stages = |s: &[(String, f64)]| {
            serde_json::Value::Object(s.iter().map(|(k, v)| (k.clone(), (*v).into())).collect())
        };
        map.insert("fit_stage_seconds".into(), stages(&report.stages));
        map.insert("fit_stage_cpu_seconds".into(), stages(&report.cpu_stages));
        map.insert(
            "fit_cpu_seconds".into(),
            report.cpu_stages.iter().map(|s| s.1).sum::<f64>().into(),
        );
        map.insert("eval_seconds".into(), eval_s.into());
        map.insert("peak_rss_mb".into(), peak.into());
        map.insert("weights_nnz".into(), model.weights_nnz().into());
        map.insert("weights_density".into(), model.weights_density().into());
        map.insert("factor_nnz".into(), report.factor_nnz.into());
        if let Some(b) = &baseline {
            map.insert("popular".into(), metrics_json(b));
        }
        writeln!(out, "{obj}")?;
    } else {
        writeln!(
            out,
            "{} on {}: λ = {}, density = {}, {} items ({untrained} never in a training row; \
             SANSA's item filter: items without a kept interaction dropped, no minimum count)",
            method.name(),
            data.name(),
            params.l2,
            params.density,
            data.n_items()
        )?;
        match training_privacy {
            Some(p) => writeln!(out, "training privacy: {}", privacy_text(p))?,
            None => writeln!(
                out,
                "training privacy: none (training data treated as public)"
            )?,
        }
        if let Some(c) = &trained.shift_choice {
            writeln!(
                out,
                "shift choice: K = {} of {:?}, chosen privately on the calibration users; {}: \
                 ε = {}",
                c.chosen,
                c.grid,
                c.privacy.population,
                c.privacy.epsilon.unwrap_or(f64::NAN)
            )?;
        }
        if let Some((e, d)) = fit_total {
            writeln!(
                out,
                "eps_T of the fit with its shift choice (training + calibration users): {e} \
                 (delta {d:e})"
            )?;
        }
        print_metrics(&mut out, "model", &metrics)?;
        for (k, l2, m) in &grid_test {
            writeln!(
                out,
                "  evaluation only (test users): K = {k} (λ {l2:.1}) Recall@20 {:.4} ± {:.4}",
                m.recall20.mean, m.recall20.se
            )?;
        }
        if let Some(b) = &baseline {
            print_metrics(&mut out, "most-popular baseline", b)?;
        }
        writeln!(out, "fit time {fit_s:.2} s:")?;
        for (stage, s) in &report.stages {
            writeln!(out, "  {stage:<14} {s:8.2} s")?;
        }
        writeln!(
            out,
            "weights: {} stored entries (density {:.3e}); evaluation {eval_s:.2} s; peak memory {peak:.0} MB",
            model.weights_nnz(),
            model.weights_density()
        )?;
        if let Some(dir) = &args.out {
            writeln!(out, "model and release artifact saved to {}", dir.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Items whose training column is empty.
fn items_without_training(train: &recsel::data::Csr) -> usize {
    let mut seen = vec![false; train.cols()];
    for &j in train.indices() {
        seen[j as usize] = true;
    }
    seen.iter().filter(|&&s| !s).count()
}
