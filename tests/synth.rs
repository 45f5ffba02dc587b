//! Synthetic experiments (docs/experiments.md and docs/mechanisms.md): the paper's findings with statistical margins,
//! data generation, determinism across thread counts, outputs, pipelines and the two-candidate
//! closed form.

use std::path::Path;

use crate::util::recsel;
use recsel::experiments::pipeline::Pipeline;
use recsel::experiments::scenarios::{self, Scenario, ScenarioSet};
use recsel::experiments::synthetic::MseRow;
use recsel::experiments::twocand::{self, TwocandConfig, TwocandOptions};
use recsel::experiments::{run_synth, SynthConfig, SynthOptions};
use recsel::numerics::spearman;
use recsel::rng::Streams;

/// Differences must exceed this many standard errors.
const Z: f64 = 4.0;

fn run(scenario: u8, mechs: &str, eps: &[f64], trials: u64, seed: u64) -> Vec<MseRow> {
    let cfg = SynthConfig {
        scenarios: vec![ScenarioSet::One(scenario)],
        mechanisms: mechs.into(),
        epsilons: eps.to_vec(),
        trials,
        polarised_users: trials,
        seed,
        ..SynthOptions::default().config(|| 0)
    };
    run_synth(&cfg, &|_| {}).unwrap().rows
}

fn cell<'a>(rows: &'a [MseRow], mech: &str, eps: f64) -> &'a MseRow {
    rows.iter()
        .find(|r| r.mechanism == mech && r.epsilon == eps)
        .unwrap_or_else(|| panic!("no row for {mech} at {eps}"))
}

/// Asserts MSE(a) < MSE(b) by more than Z standard errors of the difference.
fn assert_below(rows: &[MseRow], a: &str, b: &str, eps: f64) {
    let (x, y) = (cell(rows, a, eps), cell(rows, b, eps));
    let se = (x.se * x.se + y.se * y.se).sqrt();
    assert!(
        y.mse - x.mse > Z * se,
        "scenario {}, eps {eps}: expected {a} ({:.4} ± {:.4}) below {b} ({:.4} ± {:.4}) by > {Z} s.e.",
        x.scenario,
        x.mse,
        x.se,
        y.mse,
        y.se
    );
}

/// Asserts MSE(a) is not larger than MSE(b) by more than Z standard errors.
fn assert_no_worse(rows: &[MseRow], a: &str, b: &str, eps: f64) {
    let (x, y) = (cell(rows, a, eps), cell(rows, b, eps));
    let se = (x.se * x.se + y.se * y.se).sqrt();
    assert!(
        x.mse - y.mse <= Z * se,
        "scenario {}, eps {eps}: {a} ({:.4} ± {:.4}) is worse than {b} ({:.4} ± {:.4}) by > {Z} s.e.",
        x.scenario,
        x.mse,
        x.se,
        y.mse,
        y.se
    );
}

#[test]
fn scenario_1_positive_correlation_favours_mgem_and_rs() {
    // Seed 001 §VI, fig 2a: RS and mGEM best, then RNM, then GEM.
    let rows = run(1, "rnm,gem,mgem,rs,random", &[0.01, 0.1], 20_000, 11);
    assert_below(&rows, "mgem", "rnm", 0.1);
    assert_below(&rows, "rs", "rnm", 0.1);
    assert_below(&rows, "rnm", "gem", 0.1);
    // Seed 001 §VIII: GEM can be worse than random for small ε.
    assert_below(&rows, "random", "gem", 0.01);
}

#[test]
fn scenario_2_negative_correlation_reverses_the_order() {
    // Fig 2b: GEM best, mGEM and RS worst.
    let rows = run(2, "rnm,gem,mgem,rs", &[0.1], 20_000, 12);
    assert_below(&rows, "gem", "rnm", 0.1);
    assert_below(&rows, "rnm", "mgem", 0.1);
    assert_below(&rows, "rnm", "rs", 0.1);
}

#[test]
fn scenario_3_no_correlation_rnm_no_worse_than_gem_and_mgem() {
    // Fig 2c: without correlation the heterogeneous mechanisms do not beat RNM.
    let eps = [0.1, 1.0, 4.0];
    let rows = run(3, "rnm,gem,mgem", &eps, 20_000, 13);
    for e in eps {
        assert_no_worse(&rows, "rnm", "gem", e);
        assert_no_worse(&rows, "rnm", "mgem", e);
    }
}

#[test]
fn scenario_7_combined_gem_beats_gem_and_mgem_on_polarised_users() {
    // Seed 001 fig 12a: with half the users positively and half negatively correlated, choosing
    // between GEM and mGEM privately (c = 0.6) beats either alone.
    let rows = run(7, "gem,mgem,cgem", &[1.0, 4.0], 3_000, 17);
    for e in [1.0, 4.0] {
        assert_below(&rows, "cgem", "gem", e);
        assert_below(&rows, "cgem", "mgem", e);
    }
}

#[test]
fn correlations_have_the_designed_signs() {
    let cfg = SynthConfig {
        scenarios: vec![
            ScenarioSet::One(1),
            ScenarioSet::One(2),
            ScenarioSet::One(3),
            ScenarioSet::One(7),
        ],
        mechanisms: "random".into(),
        epsilons: vec![1.0],
        trials: 200,
        polarised_users: 400,
        seed: 3,
        ..SynthOptions::default().config(|| 0)
    };
    let res = run_synth(&cfg, &|_| {}).unwrap();
    let sp = |s: &str, g: &str| {
        res.correlations
            .iter()
            .find(|c| c.scenario == s && c.group == g)
            .unwrap()
            .spearman
    };
    assert!(sp("1", "all") > 0.9);
    assert!(sp("2", "all") < -0.9);
    assert!(sp("3", "all").abs() < 1e-12);
    // Scenario 7: group 0 negatively, group 1 positively correlated (docs/experiments.md).
    assert!(sp("7", "group 0") < -0.9, "{}", sp("7", "group 0"));
    assert!(sp("7", "group 1") > 0.9, "{}", sp("7", "group 1"));
}

#[test]
fn sensitivities_are_the_percentile_range_and_scores_are_clipped() {
    let data = Streams::new(9).derive(1);
    let n = 1000usize;
    // Linear-interpolated percentile p of n sorted draws x_0 ≤ … ≤ x_{n−1} lies between x_j and
    // x_{j+1}, j = ⌊p/100 · (n − 1)⌋ (strictly inside for continuous draws when p/100 · (n − 1) is
    // not an integer, as for every p here). Clipping to [p_lo, p_hi] therefore sets exactly
    // j_lo + 1 values to the new minimum p_lo and n − 1 − j_hi values to the new maximum p_hi:
    // 100 each for (p10, p90) with n = 1000, 50 each for (p5, p95).
    let clipped = |p: f64, upper: bool| {
        let j = (p / 100.0 * (n - 1) as f64).floor() as usize;
        if upper {
            n - 1 - j
        } else {
            j + 1
        }
    };
    for (scenario, lo_p, hi_p) in [
        (Scenario::Numbered(5), 10.0, 90.0),
        (Scenario::Numbered(8), 5.0, 95.0),
    ] {
        let d = scenarios::generate(scenario, 100, n, &data).unwrap();
        assert_eq!(d.sens.len(), 100);
        let (want_lo, want_hi) = (clipped(lo_p, false), clipped(hi_p, true));
        // Power: the other scenario's percentiles would clip another number of values.
        let other = if lo_p == 10.0 { 5.0 } else { 10.0 };
        assert_ne!(want_lo, clipped(other, false));
        for a in 0..d.k {
            let col: Vec<f64> = (0..d.trials).map(|i| d.row(i)[a]).collect();
            let (min, max) = col
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                    (l.min(v), h.max(v))
                });
            // Clipping to [p_lo, p_hi] makes the range of the clipped column exactly Δ.
            assert!(
                ((max - min) - d.sens[a]).abs() < 1e-9 * d.sens[a].max(1.0),
                "{scenario} candidate {a}: range {} vs Δ {} (p{lo_p}..p{hi_p})",
                max - min,
                d.sens[a]
            );
            // ... and the clip points are the p_lo and p_hi percentiles: exactly the number of
            // values those percentiles cut off sit at each end.
            let at_min = col.iter().filter(|&&v| v == min).count();
            let at_max = col.iter().filter(|&&v| v == max).count();
            assert_eq!(
                (at_min, at_max),
                (want_lo, want_hi),
                "{scenario} candidate {a}: values at the clip points, expected p{lo_p}/p{hi_p}"
            );
        }
    }
    // Scenario 4: σ ascending, so Δ increases with the candidate (Spearman well above 0).
    let d = scenarios::generate(Scenario::Numbered(4), 100, 2000, &data).unwrap();
    let idx: Vec<f64> = (0..100).map(f64::from).collect();
    assert!(spearman(&idx, &d.sens) > 0.9);
}

#[test]
fn tables_are_bit_identical_with_one_and_two_threads() {
    let cfg = SynthConfig {
        scenarios: vec![
            ScenarioSet::One(4),
            ScenarioSet::One(8),
            ScenarioSet::One(1),
        ],
        mechanisms: "rnm,gem,cgem,rs-tnb".into(),
        epsilons: vec![0.05, 1.0],
        trials: 700,
        polarised_users: 600,
        seed: 21,
        ..SynthOptions::default().config(|| 0)
    };
    let with = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| run_synth(&cfg, &|_| {}).unwrap())
    };
    let (a, b) = (with(1), with(2));
    assert_eq!(a.rows.len(), b.rows.len());
    for (x, y) in a.rows.iter().zip(&b.rows) {
        assert_eq!(
            (x.mse.to_bits(), x.se.to_bits(), x.trials),
            (y.mse.to_bits(), y.se.to_bits(), y.trials),
            "{x:?} vs {y:?}"
        );
    }
    assert_eq!(
        format!("{:?}", a.correlations),
        format!("{:?}", b.correlations)
    );
}

#[test]
fn cli_writes_identical_tables_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(format!("t{n}"));
    for n in ["1", "2"] {
        let o = recsel(&[
            "--threads",
            n,
            "synth",
            "--scenario",
            "4,corr",
            "--corr-t",
            "-5,5",
            "--mech",
            "rnm,gem,mgem,rnmh",
            "--eps",
            "0.1,1",
            "--trials",
            "300",
            "--seed",
            "5",
            "--out",
            out(n).to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for f in [
        "synth.csv",
        "synth.parquet",
        "correlations.csv",
        "correlations.parquet",
        "config.json",
        "config.toml",
    ] {
        let a = std::fs::read(out("1").join(f)).unwrap();
        let b = std::fs::read(out("2").join(f)).unwrap();
        assert_eq!(a, b, "{f} differs between 1 and 2 threads");
    }
    for f in ["scenario-4.png", "corr.png"] {
        let png = std::fs::read(out("1").join(f)).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{f}");
    }
    // The Parquet table reads back with the same shape and columns as the CSV.
    let file = std::fs::File::open(out("1").join("synth.parquet")).unwrap();
    let df = {
        use polars::prelude::SerReader;
        polars::prelude::ParquetReader::new(file).finish().unwrap()
    };
    assert_eq!(df.shape(), (3 * 4 * 2, 8));
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "scenario",
            "mechanism",
            "private",
            "guarantee",
            "epsilon",
            "mse",
            "se",
            "trials"
        ]
    );
    let csv = std::fs::read_to_string(out("1").join("synth.csv")).unwrap();
    assert_eq!(
        csv.lines().next().unwrap(),
        "scenario,mechanism,private,guarantee,epsilon,mse,se,trials"
    );
    // 3 scenarios × 4 mechanisms × 2 ε.
    assert_eq!(csv.lines().count(), 1 + 3 * 4 * 2);
    assert!(csv.contains(",rnmh,false,not private,"));
    let cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out("1").join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["config"]["seed"], 5);
    assert_eq!(cfg["config"]["k"], 100);
    assert_eq!(cfg["config"]["gamma"], 0.05);
    assert_eq!(cfg["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn every_pipeline_file_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let p = Pipeline::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        assert_eq!(p.figure, stem, "{}", path.display());
        seen.push(stem);
    }
    seen.sort();
    // Every figure of seed 001: 6 also draws fig 24, 12's data feed 19/20, 14 is the bandit.
    let mut want: Vec<String> = [2, 3, 4, 6, 8, 10, 12, 14, 15, 16, 17, 18, 22]
        .iter()
        .map(|n| format!("fig{n}"))
        .chain(
            [
                "fig13_ml20m",
                "fig13_netflix",
                "fig13_amazon_book",
                "fig13_amazon_book_kgat",
                "fig13_gowalla",
                "fig13_ml1m_implicit",
                "fig13_movielens_small",
                "fig19_20",
            ]
            .map(String::from),
        )
        .collect();
    want.sort();
    assert_eq!(seen, want);
}

#[test]
fn pipelines_reject_unknown_keys_and_bad_values() {
    let base = "figure = \"x\"\nout = \"o\"\n";
    assert!(Pipeline::parse(&format!("{base}[synth]\nscenarios = [\"1\"]\n"), "ok").is_ok());
    for (text, want) in [
        (format!("{base}colour = 1\n[synth]\n"), "unknown field"),
        (
            format!("{base}[synth]\ntrails = 5\n"),
            "unknown key `trails`",
        ),
        (
            format!("{base}[twocand]\nfigure = 3\ngird = 5\n"),
            "unknown field",
        ),
        (
            format!("{base}[synth]\nscenarios = [\"9\"]\n"),
            "unknown scenario '9'",
        ),
        (
            format!("{base}[synth]\nmechanisms = \"foo\"\n"),
            "unknown mechanism 'foo'",
        ),
        (
            format!("{base}[synth]\ngamma = 0\n"),
            "gamma must be in (0, 1], got 0",
        ),
        (
            format!("{base}[twocand]\nfigure = 4\n"),
            "figures are 3, 15, 16 and 17",
        ),
        (base.to_string(), "exactly one of"),
    ] {
        let e = Pipeline::parse(&text, "test.toml").unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
        assert!(e.starts_with("test.toml"), "{e}");
    }
}

/// The two-candidate run of `figure` with `trials` and `seed`, on a grid of `grid` points per
/// axis (default: the table's), as `recsel twocand` resolves its flags.
fn twocand_config(figure: u8, grid: Option<usize>, trials: u64, seed: u64) -> TwocandConfig {
    TwocandOptions {
        figure: Some(figure),
        grid,
        trials: Some(trials),
        seed: Some(seed),
        ..TwocandOptions::default()
    }
    .config(|| unreachable!("the seed is given"))
    .unwrap()
}

#[test]
fn rnmh_head_to_head_matches_its_closed_form() {
    let cfg = twocand_config(3, Some(4), 6000, 4);
    let rows = twocand::run(&cfg, &|_| {}).unwrap();
    assert_eq!(rows.len(), 2 * 16);
    for r in rows.iter().filter(|r| r.mechanism == "rnmh") {
        let z = (r.hg - r.hg_exact).abs() / r.se;
        assert!(z < 5.0, "{r:?}: z = {z}");
    }
    // Seed 001 §V-A: RS_γ follows RNMH's pattern — better than RNM when the better candidate has
    // the larger sensitivity, worse when it has the smaller one.
    let rs = |d1: f64, d2: f64| {
        rows.iter()
            .find(|r| r.mechanism == "rs" && r.delta1 == d1 && r.delta2 == d2)
            .unwrap()
    };
    let (small, large) = (0.1, 5.0);
    let good = rs(small, large);
    let bad = rs(large, small);
    assert!(good.hg > Z * good.se, "{good:?}");
    assert!(bad.hg < -Z * bad.se, "{bad:?}");
}

/// Fig 16's ε = 3, gap 5 panel as `recsel run pipelines/fig16.toml` draws it (seed 16, 10,000
/// trials, the 20 × 20 grid, the pipeline's stream of every cell). The worse candidate wins there
/// with probability below 1e-4 in the cells with small sensitivities, so some cells see no error of
/// either mechanism while the closed form is not 0; with a plug-in standard error those cells
/// were "infinitely many" standard errors from it although the mechanism and the closed form are
/// right. Every cell must lie within 6 standard errors of the closed form (64 cells: a
/// false-failure rate below 1e-6 under the normal approximation), and the same check must reject
/// the closed form at 1.3 ε.
#[test]
fn fig16_cells_without_errors_agree_with_the_closed_form() {
    use rayon::prelude::*;
    let cfg = twocand_config(16, None, 10_000, 16);
    let panels = twocand::panels(16).unwrap();
    let pi = panels
        .iter()
        .position(|p| p.epsilon == 3.0 && p.gap == 5.0)
        .unwrap();
    let panel = &panels[pi];
    let deltas = cfg.deltas();
    let n = deltas.len();
    let streams = Streams::new(cfg.seed);
    // The cells with Δ_1, Δ_2 ≤ 1.9 (the first 8 grid points): every cell where the worse
    // candidate wins with probability below 1e-3, and enough larger ones for the power check.
    let m = 8;
    let rows: Vec<_> = (0..m * m)
        .into_par_iter()
        .map(|i| {
            let (i1, i2) = (i % m, i / m);
            let (d1, d2) = (deltas[i1], deltas[i2]);
            let ci = (pi * n * n + i2 * n + i1) as u32;
            twocand::hg_cell(16, panel, d1, d2, cfg.trials, &streams, ci, pi as u64).unwrap()
        })
        .collect();
    let silent: Vec<_> = rows
        .iter()
        .filter(|r| r.hg == 0.0 && r.hg_exact.abs() > 1e-9)
        .collect();
    assert!(
        silent.len() >= 3,
        "the panel should have cells where neither mechanism erred: {}",
        silent.len()
    );
    for r in &rows {
        assert!(r.se > 0.0, "{r:?}");
        let z = (r.hg - r.hg_exact).abs() / r.se;
        assert!(z < 6.0, "{r:?}: z = {z}");
    }
    // Power: the closed form with ε misstated by 30% is rejected by the same check.
    let worst = rows
        .iter()
        .map(|r| {
            let wrong = twocand::hg_rnmh_exact(1.3 * r.epsilon, r.gap, r.delta1, r.delta2);
            (r.hg - wrong).abs() / r.se
        })
        .fold(0.0, f64::max);
    assert!(worst > 6.0, "no power: largest z {worst}");
}

#[test]
fn twocand_and_run_commands_write_their_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fig3");
    let o = recsel(&[
        "twocand",
        "--figure",
        "3",
        "--grid",
        "3",
        "--trials",
        "500",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2 * 9);
    for f in [
        "fig3.csv",
        "fig3.parquet",
        "fig3.png",
        "config.json",
        "config.toml",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let pipeline = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/fig18.toml");
    let o = recsel(&["run", pipeline.to_str().unwrap(), "--check"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A pipeline with a typo fails and names the key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "figure = \"x\"\nout = \"o\"\n[synth]\nepsilon = [1.0]\n",
    )
    .unwrap();
    let o = recsel(&["run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown key `epsilon`"));
}

/// `--percentiles 5,95` (seed 000's figure 2: Δ_a = p95_a − p5_a, scores clipped to [p5_a, p95_a])
/// changes the percentiles that set Δ and the clipping of scenarios 4–6; the default stays p10/p90.
/// On the same draws every Δ grows, by the normal ratio (z₀.₉₅ − z₀.₀₅)/(z₀.₉ − z₀.₁) = 1.2835 up
/// to sampling error, and exactly 5% of each column sits at each clip point instead of 10%.
#[test]
fn the_percentiles_option_changes_the_sensitivity_percentiles() {
    let (trials, seed) = (2_000u64, 4);
    let cfg = |p: Option<Vec<f64>>| SynthConfig {
        scenarios: vec![ScenarioSet::One(4)],
        mechanisms: "rnm".into(),
        epsilons: vec![1.0],
        trials,
        seed,
        percentiles: p.unwrap_or_else(|| SynthOptions::default().config(|| 0).percentiles),
        ..SynthOptions::default().config(|| 0)
    };
    assert_eq!(
        cfg(None).percentiles,
        vec![10.0, 90.0],
        "the default is p10/p90"
    );
    let default = run_synth(&cfg(None), &|_| {}).unwrap();
    let wide = run_synth(&cfg(Some(vec![5.0, 95.0])), &|_| {}).unwrap();
    let (d10, d5) = (&default.datasets[0], &wide.datasets[0]);
    let ratios: Vec<f64> = d5.sens.iter().zip(&d10.sens).map(|(a, b)| a / b).collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    eprintln!(
        "scenario 4, {trials} trials: mean Δ(p5,p95)/Δ(p10,p90) = {mean:.4} (normal: 1.2835), \
         range {:.3}..{:.3}",
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max)
    );
    assert!(ratios.iter().all(|&r| r > 1.0), "every Δ grows");
    assert!((mean - 1.2835).abs() < 0.02, "mean ratio {mean}");
    // The clip points are p5 and p95: the numpy-linear percentile cuts off
    // floor(0.05·(n−1)) + 1 = 100 values at the bottom and as many at the top.
    let n = trials as usize;
    for (d, cut) in [(d5, 100usize), (d10, 200)] {
        for a in [0, 50, 99] {
            let col: Vec<f64> = (0..n).map(|i| d.row(i)[a]).collect();
            let min = col.iter().copied().fold(f64::INFINITY, f64::min);
            let max = col.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert!(((max - min) - d.sens[a]).abs() < 1e-9);
            let at = |x: f64| col.iter().filter(|&&v| v == x).count();
            assert_eq!((at(min), at(max)), (cut, cut), "candidate {a}");
        }
    }
    // The MSE moves with the data (same selection streams).
    assert_ne!(default.rows[0].mse, wide.rows[0].mse);
    // Bad pairs are refused.
    for bad in [
        vec![95.0, 5.0],
        vec![5.0],
        vec![-1.0, 50.0],
        vec![10.0, 101.0],
    ] {
        assert!(cfg(Some(bad.clone())).validate().is_err(), "{bad:?}");
    }
}
