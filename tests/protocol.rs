//! The real-data protocol options (docs/protocol.md, step 6; docs/real-data.md): whose scores the per-item percentiles
//! are taken over (`all` test users or those `without-item`) and whether candidate scores are
//! clipped — each checked against a brute-force computation —, the per-run diagnostics, and the
//! random scatter sample.

use recsel::experiments::select::{self, SelectConfig};
use recsel::mechanisms::MechParams;
use recsel::numerics::{percentile_linear, spearman};
use recsel::rng::{Draws, NoiseMode, Streams};
use recsel::scoring::{
    item_sensitivities, top_candidates, PercentileUsers, SensitivityConfig, UserScorer,
};

/// A small score table: every user has a few items, and the scores of an item differ between the
/// users who have it (high) and the others, so the two populations give different percentiles.
struct Table {
    scores: Vec<Vec<f64>>,
    excluded: Vec<Vec<u32>>,
}

impl Table {
    fn new(users: usize, items: usize) -> Self {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1_000_000) as f64 / 1_000_000.0
        };
        let excluded: Vec<Vec<u32>> = (0..users)
            .map(|u| {
                let mut e: Vec<u32> = (0..6).map(|i| ((u * 5 + i * 11) % items) as u32).collect();
                e.sort_unstable();
                e.dedup();
                e
            })
            .collect();
        let scores = (0..users)
            .map(|u| {
                (0..items)
                    .map(|j| {
                        let base = next() + 0.01 * j as f64;
                        // Users who have the item score it much higher (as a model would).
                        if excluded[u].contains(&(j as u32)) {
                            base + 3.0
                        } else {
                            base
                        }
                    })
                    .collect()
            })
            .collect();
        Table { scores, excluded }
    }
}

impl UserScorer for Table {
    type Scratch = ();
    fn n_users(&self) -> usize {
        self.scores.len()
    }
    fn n_items(&self) -> usize {
        self.scores[0].len()
    }
    fn scratch(&self) {}
    fn excluded(&self, user: usize) -> &[u32] {
        &self.excluded[user]
    }
    fn score(&self, user: usize, out: &mut [f64], _: &mut ()) {
        out.copy_from_slice(&self.scores[user]);
    }
}

fn config(clip: bool, population: PercentileUsers) -> SelectConfig {
    SelectConfig {
        mechanisms: vec!["rnm".into(), "random".into()],
        params: MechParams::default(),
        epsilons: vec![1.0],
        trials: 3,
        top: 15,
        candidates: None,
        prior: None,
        clip,
        percentile_users: population,
        seed: 4,
        source_fingerprint: "protocol".into(),
        noise: NoiseMode::Fast,
        registry: Default::default(),
    }
}

/// Brute force: item j's (p1, p99) over the chosen users, numpy's linear interpolation.
fn brute(t: &Table, j: usize, population: PercentileUsers) -> (f64, f64, u64) {
    let mut col: Vec<f64> = (0..t.scores.len())
        .filter(|&u| population == PercentileUsers::All || !t.excluded[u].contains(&(j as u32)))
        .map(|u| t.scores[u][j])
        .collect();
    col.sort_by(f64::total_cmp);
    (
        percentile_linear(&col, 1.0),
        percentile_linear(&col, 99.0),
        col.len() as u64,
    )
}

#[test]
fn percentile_population_and_clipping_match_brute_force() {
    let t = Table::new(700, 60);
    let mut differ = 0;
    for population in [PercentileUsers::All, PercentileUsers::WithoutItem] {
        let s = item_sensitivities(
            &t,
            &SensitivityConfig::default().with_population(population),
            &|_| {},
        );
        for j in 0..60 {
            let (lo, hi, n) = brute(&t, j, population);
            assert_eq!(s.counts[j], n, "item {j} {population:?}");
            assert_eq!(s.lower[j], lo, "item {j} {population:?}");
            assert_eq!(s.upper[j], hi, "item {j} {population:?}");
            assert_eq!(s.delta[j], hi - lo);
            if population == PercentileUsers::All {
                // The owners' high scores move the 99th percentile up.
                let (_, hi_w, _) = brute(&t, j, PercentileUsers::WithoutItem);
                if hi != hi_w {
                    differ += 1;
                }
            }
        }
        // Each user's selection problem, clipped and not, against the brute-force one.
        for clip in [true, false] {
            let cfg = config(clip, population);
            let mechs = cfg.build().unwrap();
            let mut buf = vec![0.0; 60];
            let mut draws = Draws::Seeded(Streams::new(cfg.seed));
            for u in [0, 17, 333, 699] {
                let row = select::run_user(&t, &s, &cfg, &mechs, u, &mut buf, &mut (), &mut draws)
                    .unwrap()
                    .expect("the user has candidates");
                let items = top_candidates(&t.scores[u], &t.excluded[u], cfg.top);
                let q: Vec<f64> = items
                    .iter()
                    .map(|&j| {
                        let (lo, hi, _) = brute(&t, j as usize, population);
                        let v = t.scores[u][j as usize];
                        if clip {
                            v.clamp(lo, hi)
                        } else {
                            v
                        }
                    })
                    .collect();
                let d: Vec<f64> = items
                    .iter()
                    .map(|&j| {
                        let (lo, hi, _) = brute(&t, j as usize, population);
                        hi - lo
                    })
                    .collect();
                let qmax = q.iter().cloned().fold(f64::MIN, f64::max);
                assert_eq!(row.max_score, qmax, "user {u} clip {clip} {population:?}");
                assert_eq!(row.spearman, spearman(&q, &d), "user {u} clip {clip}");
            }
        }
    }
    assert!(
        differ > 30,
        "the populations should differ on most items, got {differ}"
    );
}

#[test]
fn diagnostics_count_what_lies_outside_the_percentiles() {
    let t = Table::new(500, 40);
    let population = PercentileUsers::WithoutItem;
    let s = item_sensitivities(
        &t,
        &SensitivityConfig::default().with_population(population),
        &|_| {},
    );
    let cfg = config(false, population);
    let sample = select::random_sample(t.scores.len(), 100, cfg.seed);
    let (counts, cands) = select::candidate_pass(&t, &s, &cfg, &sample);
    // Brute force over every user's candidates.
    let (mut total, mut outside) = (0u64, 0u64);
    let mut per_item = vec![(0u64, 0u64); 40];
    for u in 0..t.scores.len() {
        for j in top_candidates(&t.scores[u], &t.excluded[u], cfg.top) {
            let (lo, hi, _) = brute(&t, j as usize, population);
            let v = t.scores[u][j as usize];
            total += 1;
            per_item[j as usize].0 += 1;
            if v < lo || v > hi {
                outside += 1;
                per_item[j as usize].1 += 1;
            }
        }
    }
    for (j, want) in per_item.iter().enumerate() {
        assert_eq!(
            (counts.appearances[j], counts.outside[j]),
            *want,
            "item {j}"
        );
    }
    assert_eq!(cands.users, 100);
    assert_eq!(cands.scores.len(), 100 * cfg.top);
    let store_dir = tempfile::tempdir().unwrap();
    let store = select::ChunkStore::open(store_dir.path(), &cfg, false).unwrap();
    let (rows, _) = select::run_all(&t, &s, &cfg, &store, &|_| {}, None).unwrap();
    let d = select::diagnostics(&cfg, &s, 1e-6, &counts, cands, &rows);
    assert_eq!(d.candidate_scores, total);
    assert_eq!(d.share_clipped, outside as f64 / total as f64);
    assert!(d.share_clipped > 0.0 && d.share_clipped < 1.0);
    assert_eq!(
        d.users_negative_spearman,
        rows.iter().filter(|r| r.spearman < 0.0).count() as u64
    );
    assert_eq!(d.score_quantiles.len(), select::DIAGNOSTIC_LEVELS.len());
    assert!(!d.clip);
    assert_eq!(d.percentile_users, "without-item");
    // The bound rule's bits, recomputed by brute force for a few users.
    for u in [0usize, 99, 499] {
        let items = top_candidates(&t.scores[u], &t.excluded[u], cfg.top);
        let q: Vec<f64> = items.iter().map(|&j| t.scores[u][j as usize]).collect();
        let dd: Vec<f64> = items.iter().map(|&j| s.delta[j as usize]).collect();
        let b = recsel::numerics::utility_bounds(
            &q,
            &dd,
            cfg.epsilons[0],
            cfg.params.number(&recsel::mechanisms::BETA),
            recsel::numerics::GemBoundReading::Full,
        )
        .unwrap();
        assert_eq!(counts.bound_mgem[u] & 1 == 1, b.mgem >= b.gem, "user {u}");
    }
}

#[test]
fn scatter_sample_is_random_distinct_and_reproducible() {
    let a = select::random_sample(70_000, 10_000, 1);
    assert_eq!(a.len(), 10_000);
    assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
    assert_eq!(a, select::random_sample(70_000, 10_000, 1));
    assert_ne!(a, select::random_sample(70_000, 10_000, 2));
    // Not a stride: the gaps vary, and the sample covers the whole range.
    let gaps: std::collections::BTreeSet<usize> = a.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() > 20);
    assert!(a[0] < 100 && *a.last().unwrap() > 69_900);
    // Each tenth of the users holds about a tenth of the sample (binomial s.d. 30; 8 s.d.).
    for d in 0..10 {
        let n = a.iter().filter(|&&i| i / 7_000 == d).count();
        assert!((n as i64 - 1000).abs() < 240, "decile {d}: {n}");
    }
    assert_eq!(
        select::random_sample(50, 10_000, 1),
        (0..50).collect::<Vec<_>>()
    );
}

/// `recsel select --json` carries the run's kind and diagnostics, and the items table is written
/// (docs/real-data.md); the default run is the paper's text (all users, no clipping).
#[test]
fn select_json_has_the_diagnostics_and_the_items_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sel");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "select",
            "--dataset",
            "synthetic",
            "--mech",
            "rnm,gem,mgem,random",
            "--eps",
            "1",
            "--trials",
            "2",
            "--top",
            "30",
            "--seed",
            "5",
            "--json",
            "--force",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
            .args(&args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = run(&[]);
    assert_eq!(v["clip"], false);
    assert_eq!(v["dp_release"], false);
    assert_eq!(v["percentile_users"], "all");
    let d = &v["diagnostics"];
    for key in [
        "share_clipped",
        "share_items_at_floor",
        "users_negative_spearman",
        "score_quantiles",
        "candidate_sensitivity_quantiles",
        "item_sensitivity_quantiles",
    ] {
        assert!(!d[key].is_null(), "diagnostics.{key} missing: {d}");
    }
    assert_eq!(d["score_quantiles"].as_array().unwrap().len(), 7);
    let share = d["share_clipped"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{share}");
    assert!(v["scatter"]["users_drawn"].as_u64().unwrap() > 0);
    let items = std::fs::read_to_string(out.join("items.csv")).unwrap();
    assert!(items.starts_with("item,p1,p99,sensitivity,users,candidates,clipped_share"));
    assert!(out.join("diagnostics.json").exists() && out.join("rules.csv").exists());
    let cfg = std::fs::read_to_string(out.join("config.json")).unwrap();
    assert!(cfg.contains("\"percentile_users\": \"all\"") && cfg.contains("\"clip\": false"));
    // A clipped run says so.
    let c = run(&["--clip", "--percentile-users", "without-item"]);
    assert_eq!(c["dp_release"], true);
    assert_eq!(c["diagnostics"]["percentile_users"], "without-item");
}
