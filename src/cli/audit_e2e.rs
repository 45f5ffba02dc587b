//! `recsel audit-e2e`: the whole serving path of a release (score → candidates → clip → select)
//! audited on neighbouring histories built from real users (docs/deployment.md, "The end-to-end
//! audit").

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::audit::end_to_end::{audit_end_to_end, EndToEndConfig, EndToEndReport};
use recsel::audit::EndToEndOptions;
use recsel::data::load_dataset_with;
use recsel::mechanisms::{self, NoiseOptions, Registry};
use recsel::recommend::input::{read_users, FileFormat};
use recsel::recommend::options::ServingOptions;
use recsel::recommend::{RecommendOptions, Recommender};

use super::common::{input_seed, progress, Flags};

/// Audit the whole serving path of a release (score, candidates, clip, select) on neighbouring
/// histories of real users: one item added, one removed, the whole history replaced by another
/// user's (--pairs base users), over every item, Bonferroni-corrected. Exit code 1 when a
/// recommender that claims user-level ε-DP is refuted.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  recsel audit-e2e --model models/synth --dataset synthetic --mech mgem,rnm --eps 1 \\
      --samples 20000 --pairs 4 --seed 1")]
pub struct Args {
    #[command(flatten)]
    options: Flags<EndToEndOptions>,
    /// Print one JSON array of reports instead of tables.
    #[arg(long, help_heading = "Output")]
    json: bool,
}

/// The histories to audit: the users file, or the split's test users (their input rows).
fn histories(o: &EndToEndOptions, rec: &Recommender) -> anyhow::Result<Vec<(String, Vec<u32>)>> {
    if let Some(path) = &o.users {
        let format = FileFormat::from_path(path).with_context(|| {
            format!(
                "cannot tell the format of {} from its extension (csv, parquet, jsonl)",
                path.display()
            )
        })?;
        return Ok(read_users(path, format, &|id| rec.item_index(id))?);
    }
    let data = &o.data;
    anyhow::ensure!(
        data.dataset.is_some() || data.path.is_some(),
        "audit-e2e needs the users to audit: --users FILE, or the data the model was fitted \
         on (--dataset NAME, or --format FORMAT --path PATH)"
    );
    eprintln!("[audit] loading data");
    let ds = load_dataset_with(&data.source()?, data.split_seed(), &data.load_options()?)
        .context("loading the data")?;
    let cols: Vec<Option<u32>> = ds.item_ids.iter().map(|id| rec.item_index(id)).collect();
    let m = &ds.test_input;
    (0..m.rows())
        .map(|u| {
            let mut h = m
                .outer_view(u)
                .expect("row in range")
                .indices()
                .iter()
                .map(|&j| {
                    cols[j as usize].with_context(|| {
                        format!(
                            "item '{}' of the data is not one of the model's items: audit the \
                             data the model was fitted on",
                            ds.item_ids[j as usize]
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<u32>>>()?;
            h.sort_unstable();
            Ok((ds.test_user_ids[u].clone(), h))
        })
        .collect()
}

fn print_report(out: &mut impl Write, r: &EndToEndReport, secs: f64) -> std::io::Result<()> {
    writeln!(
        out,
        "== {} at eps = {}, candidates {}, prior {} ({} items; {})",
        r.mechanism, r.epsilon, r.candidates, r.prior, r.n_items, r.guarantee
    )?;
    writeln!(
        out,
        "{:<10} {:<14} {:<22} {:<6} {:>11} {:<12} {:>8} {:>8} {:>8}",
        "kind", "user", "change", "dir", "k", "output", "count", "count'", "eps_LB"
    )?;
    for d in &r.results {
        writeln!(
            out,
            "{:<10} {:<14} {:<22} {:<6} {:>11} {:<12} {:>8} {:>8} {:>8.3}",
            d.kind.name(),
            d.user,
            d.change,
            d.direction,
            format!("{}/{}", d.k.0, d.k.1),
            d.output,
            d.count_first,
            d.count_second,
            d.eps_lb
        )?;
    }
    let kinds: Vec<String> = r
        .max_by_kind
        .iter()
        .map(|(k, e)| format!("{} {e:.3}", k.name()))
        .collect();
    writeln!(
        out,
        "max eps_LB by kind: {}; max {:.3}; verdict: {}; {} selections from {} scored \
         histories in {secs:.1} s\n",
        kinds.join(", "),
        r.max_eps_lb,
        r.verdict(),
        r.samples_drawn,
        r.histories_scored
    )
}

/// Runs `recsel audit-e2e`: the end-to-end audit of each mechanism of `--mech`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let o = &args.options.0;
    let model = o.model.as_ref().context("--model is required")?;
    let epsilon = o.epsilon.context("--eps is required")?;
    // The base users are drawn from the seed, also on the secure path (then from OS entropy).
    let seed = input_seed(&o.noise)?;
    let (samples, alpha) = (o.sampling.samples(), o.sampling.alpha());
    let config = EndToEndConfig::new(samples, alpha, seed, o.pairs())?;
    let registry = Registry::builtin();
    // `tuned`: the row of the model's tuning.json for ε, with the candidates it chose.
    let mech = o.mechanisms();
    let tuned = mech.trim() == recsel::recommend::tuned::TUNED;
    anyhow::ensure!(
        !(tuned && o.candidates.is_some()),
        "--mech tuned audits the candidates the tuning chose: leave out --candidates"
    );
    let names: Vec<&str> = match tuned {
        true => vec![recsel::recommend::tuned::TUNED],
        false => mechanisms::parse_list(&mech)?
            .iter()
            .map(|s| s.name)
            .collect(),
    };
    let mut recs = Vec::new();
    for name in names {
        let options = RecommendOptions {
            serving: ServingOptions {
                model: Some(model.clone()),
                mechanism: Some(name.into()),
                epsilon: Some(epsilon),
                candidates: (!tuned).then(|| o.candidates()),
                prior: Some(o.prior()),
                clip_range: None,
                allow_non_private: Some(o.allow_non_private()),
            },
            noise: NoiseOptions {
                secure: Some(o.noise.secure()),
                ..NoiseOptions::default()
            },
            params: o.params.clone(),
            ..RecommendOptions::default()
        };
        let cfg = options
            .config(&registry)
            .context("--candidates, --prior, --mech or a parameter")?;
        match Recommender::load(model, &cfg) {
            Ok(r) => recs.push(r),
            Err(e) if mech.trim() == "all" => {
                eprintln!("recsel audit-e2e: leaving out {name}: {e}");
            }
            Err(e) => {
                return Err(e).with_context(|| format!("loading {} for {name}", model.display()))
            }
        }
    }
    anyhow::ensure!(!recs.is_empty(), "no mechanism left to audit");
    if o.noise.secure() {
        super::common::announce_secure_mode();
    }
    let users = histories(o, &recs[0])?;
    eprintln!("{}", recs[0].privacy_statement());
    let mut reports = Vec::new();
    for rec in &recs {
        let per = config.pairs as u64 * 4 * (config.samples + config.select_samples);
        let bar = progress(per, rec.mechanism().name());
        let t = Instant::now();
        let r = audit_end_to_end(rec, &users, &config, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "recsel audit-e2e: {} ({}): {} selections in {secs:.1} s",
            r.mechanism, r.candidates, r.samples_drawn
        );
        reports.push((r, secs));
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<_> = reports
            .iter()
            .map(|(r, secs)| {
                let mut v = serde_json::to_value(r).expect("reports serialise");
                v["verdict"] = r.verdict().into();
                v["seconds"] = (*secs).into();
                v
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        for (r, secs) in &reports {
            print_report(&mut out, r, *secs)?;
        }
        writeln!(
            out,
            "{:<8} {:<16} {:>10} {:>10} {:>10} {:>10}  {:<22} {:>9} {:>7}",
            "mech",
            "candidates",
            "add-one",
            "remove-one",
            "replace",
            "max",
            "verdict",
            "samples",
            "seconds"
        )?;
        for (r, secs) in &reports {
            let k = |i: usize| r.max_by_kind[i].1;
            writeln!(
                out,
                "{:<8} {:<16} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {:<22} {:>9} {:>7.1}",
                r.mechanism,
                r.candidates,
                k(0),
                k(1),
                k(2),
                r.max_eps_lb,
                r.verdict(),
                r.config.samples,
                secs
            )?;
        }
    }
    let violated = reports.iter().any(|(r, _)| r.violation);
    if violated {
        eprintln!(
            "recsel audit-e2e: VIOLATION — a recommender spends more privacy than its user-level claim"
        );
    }
    Ok(if violated {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
