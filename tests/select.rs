//! The real-data runner on a small deterministic score table: thread-count independence,
//! resumption, configuration guard, and `random`'s MSE against its exact expectation.

use recsel::experiments::select::{self, ChunkStore, SelectConfig, CHUNK_USERS};
use recsel::mechanisms::MechParams;
use recsel::rng::{Draws, NoiseMode, Streams};
use recsel::scoring::{
    item_sensitivities, item_sensitivities_with_candidates, top_candidates, SensitivityConfig,
    UserScorer,
};

/// Scores from a fixed hash, with latent structure so correlations are not all zero.
pub(crate) struct Hashed {
    users: usize,
    items: usize,
    excluded: Vec<Vec<u32>>,
}

fn h(mut x: u64) -> f64 {
    x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    (x % 1_000_000) as f64 / 1_000_000.0
}

impl Hashed {
    pub(crate) fn new(users: usize, items: usize) -> Self {
        let excluded = (0..users)
            .map(|u| {
                let mut e: Vec<u32> = (0..5).map(|i| ((u * 7 + i * 13) % items) as u32).collect();
                e.sort_unstable();
                e.dedup();
                e
            })
            .collect();
        Hashed {
            users,
            items,
            excluded,
        }
    }
}

impl UserScorer for Hashed {
    type Scratch = ();
    fn n_users(&self) -> usize {
        self.users
    }
    fn n_items(&self) -> usize {
        self.items
    }
    fn scratch(&self) {}
    fn excluded(&self, user: usize) -> &[u32] {
        &self.excluded[user]
    }
    fn score(&self, user: usize, out: &mut [f64], _: &mut ()) {
        for (j, o) in out.iter_mut().enumerate() {
            let pop = 1.0 / (1.0 + j as f64 / 50.0);
            *o = pop * (1.0 + h((user * 100_003 + j) as u64)) + 0.3 * h(j as u64 + 7);
        }
    }
}

pub(crate) fn config(trials: u32) -> SelectConfig {
    SelectConfig {
        mechanisms: ["rnm", "gem", "mgem", "rs", "random"]
            .map(String::from)
            .to_vec(),
        params: MechParams::default().with_param("gamma", 0.05),
        epsilons: vec![0.1, 1.0, 8.0],
        trials,
        top: 40,
        candidates: None,
        prior: None,
        clip: true,
        percentile_users: recsel::scoring::PercentileUsers::All,
        seed: 9,
        source_fingerprint: "test".into(),
        noise: NoiseMode::Fast,
        registry: Default::default(),
    }
}

#[test]
fn thread_count_does_not_change_results_and_resume_matches() {
    let scorer = Hashed::new(2 * CHUNK_USERS + 37, 300);
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|_| {});
    let cfg = config(10);
    let dir = tempfile::tempdir().unwrap();
    let run = |threads: usize, sub: &str, stop: Option<usize>| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let store = ChunkStore::open(&dir.path().join(sub), &cfg, false).unwrap();
        pool.install(|| select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, stop))
    };
    let (one, skipped) = run(1, "one", None).unwrap();
    assert_eq!(skipped, 0);
    assert_eq!(one.len(), scorer.users);
    let (two, _) = run(2, "two", None).unwrap();
    assert_eq!(one, two, "1 thread vs 2 threads");
    // Interrupted after one chunk, then resumed: the same rows.
    assert!(run(2, "resumed", Some(1)).is_err());
    let chunks = std::fs::read_dir(dir.path().join("resumed/chunks"))
        .unwrap()
        .count();
    assert_eq!(chunks, 2, "manifest + one chunk");
    let (resumed, _) = run(1, "resumed", None).unwrap();
    assert_eq!(one, resumed, "interrupted + resumed vs uninterrupted");
    assert_eq!(select::mse_table(&cfg, &one).len(), 15);
    // A different configuration in the same place is refused, unless forced.
    let mut other = cfg.clone();
    other.trials = 11;
    let e = ChunkStore::open(&dir.path().join("one"), &other, false).unwrap_err();
    assert!(e.to_string().contains("different configuration"), "{e}");
    assert!(ChunkStore::open(&dir.path().join("one"), &other, true).is_ok());
}

/// `random`'s MSE equals its exact expectation, the mean over users of (1/k)·Σ_a (q_a − q_max)².
#[test]
fn random_mse_matches_its_expectation() {
    let scorer = Hashed::new(400, 200);
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|_| {});
    let mut cfg = config(50);
    cfg.mechanisms = vec!["random".into()];
    cfg.epsilons = vec![1.0];
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(dir.path(), &cfg, false).unwrap();
    let (rows, _) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None).unwrap();
    let mut exact = 0.0;
    let mut buf = vec![0.0; scorer.items];
    for u in 0..scorer.users {
        scorer.score(u, &mut buf, &mut ());
        let items = top_candidates(&buf, scorer.excluded(u), cfg.top);
        let q: Vec<f64> = items
            .iter()
            .map(|&j| sens.clip(j as usize, buf[j as usize]))
            .collect();
        let qmax = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        exact += q.iter().map(|x| (x - qmax) * (x - qmax)).sum::<f64>() / q.len() as f64;
    }
    exact /= scorer.users as f64;
    let t = &select::mse_table(&cfg, &rows)[0];
    assert!(
        (t.mse - exact).abs() < 4.0 * t.se,
        "random MSE {} ± {} vs exact {exact}",
        t.mse,
        t.se
    );
}

#[test]
fn clipping_can_be_disabled() {
    let scorer = Hashed::new(50, 100);
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|_| {});
    let mut cfg = config(2);
    cfg.mechanisms = vec!["random".into()];
    let mechs = cfg.build().unwrap();
    let mut buf = vec![0.0; 100];
    let mut draws = Draws::Seeded(Streams::new(cfg.seed));
    let clipped = select::run_user(
        &scorer,
        &sens,
        &cfg,
        &mechs,
        3,
        &mut buf,
        &mut (),
        &mut draws,
    )
    .unwrap()
    .unwrap();
    cfg.clip = false;
    let raw = select::run_user(
        &scorer,
        &sens,
        &cfg,
        &mechs,
        3,
        &mut buf,
        &mut (),
        &mut draws,
    )
    .unwrap()
    .unwrap();
    let top = top_candidates(&buf, scorer.excluded(3), cfg.top)[0] as usize;
    assert_eq!(raw.max_score, buf[top]);
    assert_eq!(clipped.max_score, sens.clip(top, buf[top]));
    assert!(clipped.max_score <= raw.max_score);
}

/// A scorer whose users' held-out item is their own best candidate, so hit@1 is the probability
/// of picking the argmax.
struct BestIsTarget {
    inner: Hashed,
    targets: Vec<Vec<u32>>,
}

impl UserScorer for BestIsTarget {
    type Scratch = ();
    fn n_users(&self) -> usize {
        self.inner.users
    }
    fn n_items(&self) -> usize {
        self.inner.items
    }
    fn scratch(&self) {}
    fn excluded(&self, user: usize) -> &[u32] {
        self.inner.excluded(user)
    }
    fn score(&self, user: usize, out: &mut [f64], s: &mut ()) {
        self.inner.score(user, out, s)
    }
    fn targets(&self, user: usize) -> &[u32] {
        &self.targets[user]
    }
}

/// The utility columns a product owner reads (`hit1`, `relative_mse`): hit@1 equals the exact probability of
/// picking the held-out item (krr picks the argmax with probability e^ε/(e^ε + k − 1), random with
/// 1/k — each rejects the other's value), random's MSE relative to random is 1, and the guarantee
/// column states what `rnmh-laplace` really is at k = top ((k − 1)ε, so not ε-DP) while `rnm` is
/// ε-DP; the advice names the Spearman rule's pick and warns about the non-private mechanism.
#[test]
fn hit_rate_relative_mse_and_guarantee_columns() {
    let inner = Hashed::new(300, 200);
    let mut buf = vec![0.0; inner.items];
    let sens = item_sensitivities(&inner, &SensitivityConfig::default(), &|_| {});
    let mut cfg = config(40);
    cfg.mechanisms = ["krr", "random", "rnm", "rnmh-laplace"]
        .map(String::from)
        .to_vec();
    cfg.epsilons = vec![1.0, 6.0];
    // Clipping can create ties at the top; the argmax of the clipped scores is the target.
    let targets = (0..inner.users)
        .map(|u| {
            inner.score(u, &mut buf, &mut ());
            let c = recsel::scoring::Candidates::new(&buf, inner.excluded(u), &sens, cfg.top, true);
            let best = (0..c.items.len())
                .max_by(|&a, &b| c.scores[a].total_cmp(&c.scores[b]).then(b.cmp(&a)))
                .unwrap();
            vec![c.items[best]]
        })
        .collect();
    let scorer = BestIsTarget { inner, targets };
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(dir.path(), &cfg, false).unwrap();
    let (rows, _) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None).unwrap();
    let table = select::mse_table(&cfg, &rows);
    let row = |m: &str, e: f64| {
        table
            .iter()
            .find(|r| r.mechanism == m && r.epsilon == e)
            .unwrap()
    };
    let k = cfg.top as f64;
    // Ties at the clipped top would make krr's argmax ambiguous; the hashed scores have none.
    for e in [1.0f64, 6.0] {
        let p_krr = e.exp() / (e.exp() + k - 1.0);
        let (krr, random) = (row("krr", e), row("random", e));
        assert!(
            (krr.hit1 - p_krr).abs() < 4.0 * krr.hit1_se + 1e-9,
            "krr hit@1 {} vs {p_krr}",
            krr.hit1
        );
        assert!(
            (random.hit1 - 1.0 / k).abs() < 4.0 * random.hit1_se,
            "random hit@1 {}",
            random.hit1
        );
        assert!(
            (krr.hit1 - 1.0 / k).abs() > 4.0 * krr.hit1_se,
            "hit@1 has no power at eps {e}"
        );
        assert!(
            (random.relative_mse - 1.0).abs() < 4.0 * random.se / random.mse,
            "{}",
            random.relative_mse
        );
        assert!(row("rnm", e).private && row("rnm", e).guarantee == format!("{e}-DP"));
        let h = row("rnmh-laplace", e);
        assert!(!h.private);
        assert_eq!(h.guarantee_epsilon, (k - 1.0) * e);
        assert_eq!(h.guarantee, format!("{}-DP", (k - 1.0) * e));
    }
    let advice = select::advice(&cfg, &select::spearman_summary(&rows), &table);
    assert!(advice[0].contains("-> "), "{advice:?}");
    assert!(
        advice.iter().any(|l| l.contains("measured, lowest MSE")),
        "{advice:?}"
    );
}

/// The candidate pass the selection makes as it goes (per-item counts, bound-rule bits, the
/// scatter sample's candidates) equals a separate scoring pass ([`select::candidate_pass`]), also
/// when some chunks are read back from disk by a resumed run, and when the candidates come from
/// the sensitivity pass's cache instead of scoring.
#[test]
fn the_selections_candidate_pass_equals_a_separate_pass_also_when_resumed_or_cached() {
    let scorer = Hashed::new(select::SCATTER_USERS + 3 * CHUNK_USERS / 2, 60);
    let scfg = SensitivityConfig::default();
    let sens = item_sensitivities(&scorer, &scfg, &|_| {});
    let mut cfg = config(1);
    cfg.mechanisms = vec!["rnm".into(), "mgem".into()];
    cfg.top = 10;
    let sample = select::random_sample(scorer.n_users(), select::SCATTER_USERS, cfg.seed);
    // Power: a strict subset of the users, with scores outside [p1, p99] and bound bits set.
    assert!(sample.len() < scorer.n_users());
    let (counts, cands) = select::candidate_pass(&scorer, &sens, &cfg, &sample);
    assert!(counts.outside.iter().sum::<u64>() > 0);
    assert!(counts.bound_mgem.iter().any(|&m| m != 0));
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str, stop, cache| {
        let store = ChunkStore::open(&dir.path().join(sub), &cfg, false).unwrap();
        select::run_all_pass(&scorer, &sens, &cfg, &store, &|_| {}, stop, cache)
    };
    let whole = run("whole", None, None).unwrap();
    assert_eq!(whole.counts, counts);
    assert_eq!(whole.sample, cands);
    assert!(run("resumed", Some(3), None).is_err());
    let resumed = run("resumed", None, None).unwrap();
    assert_eq!(
        resumed.counts, counts,
        "3 chunks read back, the rest computed"
    );
    assert_eq!(resumed.sample, cands);
    assert_eq!(resumed.rows, whole.rows);
    // The sensitivity pass's cache: the same sensitivities, every user's candidates and raw scores.
    let (cached_sens, cache) = item_sensitivities_with_candidates(&scorer, &scfg, cfg.top, &|_| {});
    assert_eq!(cached_sens.delta, sens.delta);
    let mut buf = vec![0.0; scorer.items];
    for u in [0, 1, scorer.users - 1] {
        scorer.score(u, &mut buf, &mut ());
        let items = top_candidates(&buf, scorer.excluded(u), cfg.top);
        let raw: Vec<f64> = items.iter().map(|&j| buf[j as usize]).collect();
        assert_eq!(cache.get(u), Some((&items[..], &raw[..])), "user {u}");
    }
    assert_eq!(cache.get(scorer.users), None);
    let cached = run("cached", None, Some(&cache)).unwrap();
    assert_eq!(cached.rows, whole.rows);
    assert_eq!(cached.counts, counts);
    assert_eq!(cached.sample, cands);
}

/// ⊥ in `select` (docs/private-candidates.md, "⊥ is an output"): with `rs-threshold` in the run
/// every row reports the share of selections that were ⊥ — all of them at an unreachable
/// threshold, none for `rnm` — the chunk files carry it through a resume, and counting it does not
/// change what is measured: `rnm`'s and `rs-threshold`'s MSE equal a run's without the ⊥
/// columns (`rs-threshold` alone is the same mechanism on the same streams). With a threshold the
/// runs reach, the share is strictly between 0 and 1.
#[test]
fn select_reports_how_often_a_threshold_selection_gave_up() {
    let scorer = Hashed::new(CHUNK_USERS + 20, 120);
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|_| {});
    let mut cfg = config(20);
    cfg.mechanisms = vec!["rnm".into(), "rs-threshold".into()];
    cfg.epsilons = vec![1.0];
    cfg.params = MechParams::default()
        .with_param("gamma", 0.2)
        .with_param("threshold", 1e6);
    assert!(cfg.reports_bottom());
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(&dir.path().join("a"), &cfg, false).unwrap();
    // Stopped after the first chunk, then resumed from the chunk file.
    assert!(select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, Some(1)).is_err());
    let (rows, _) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None).unwrap();
    assert!(rows.iter().all(|r| r.bottom == vec![0.0, 1.0]));
    let t = select::mse_table(&cfg, &rows);
    assert_eq!(t[0].bottom, Some((0.0, 0.0)));
    assert_eq!(t[1].bottom, Some((1.0, 0.0)));
    assert!(select::user_header(&cfg).ends_with(",bottom_rnm_eps1,bottom_rs-threshold_eps1"));
    // The same mechanisms one at a time (no ⊥ columns for rnm alone): the same MSE.
    for (m, name) in ["rnm", "rs-threshold"].into_iter().enumerate() {
        let mut one = cfg.clone();
        one.mechanisms = vec![name.into()];
        assert_eq!(one.reports_bottom(), name != "rnm");
        let store = ChunkStore::open(&dir.path().join(name), &one, false).unwrap();
        let (r1, _) = select::run_all(&scorer, &sens, &one, &store, &|_| {}, None).unwrap();
        assert_eq!(select::mse_table(&one, &r1)[0].mse, t[m].mse, "{name}");
    }
    // A threshold the noisy scores reach now and then: ⊥ sometimes.
    cfg.params = cfg.params.with_param("threshold", 1.5);
    let store = ChunkStore::open(&dir.path().join("b"), &cfg, false).unwrap();
    let (rows, _) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None).unwrap();
    let (share, _) = select::mse_table(&cfg, &rows)[1].bottom.unwrap();
    eprintln!("rs-threshold at tau 1.5: bottom share {share:.4}");
    assert!(share > 0.0 && share < 1.0, "{share}");
}
