//! The `select` experiment split over partitions of the users (docs/python.md, "Ray"): the
//! per-partition percentile sketches merge into exactly the single-machine sensitivities, and the
//! merged partition results give exactly the single-machine rows and analysis, for 1, 3 and 7
//! partitions.

use recsel::experiments::select::partition::{self, PartitionResult};
use recsel::experiments::select::{self, ChunkStore};
use recsel::scoring::{
    item_sensitivities, percentile_counts, sketch_users, PercentileSketch, PercentileUsers,
    SensitivityConfig, UserScorer,
};

use crate::select::{config, Hashed};

fn sketched(
    scorer: &Hashed,
    cfg: &SensitivityConfig,
    parts: usize,
) -> recsel::scoring::Sensitivities {
    let counts = percentile_counts(scorer, cfg.population);
    let ranges = partition::split_users(scorer.n_users(), parts).unwrap();
    let sketches: Vec<PercentileSketch> = ranges
        .into_iter()
        .rev() // merge order does not matter
        .map(|r| {
            let s = sketch_users(scorer, cfg, &counts, r, &|_| {});
            PercentileSketch::from_bytes(&s.to_bytes()).unwrap() // as shipped between processes
        })
        .collect();
    let mut it = sketches.into_iter();
    let first = it.next().unwrap();
    let merged = it.try_fold(first, |a, b| a.merge(&b)).unwrap();
    assert!(merged.is_complete());
    merged.sensitivities(cfg)
}

#[test]
fn partition_sketches_merge_into_the_exact_sensitivities() {
    let scorer = Hashed::new(611, 120);
    for population in [PercentileUsers::All, PercentileUsers::WithoutItem] {
        let cfg = SensitivityConfig::default().with_population(population);
        let whole = item_sensitivities(&scorer, &cfg, &|_| {});
        for parts in [1, 3, 7] {
            let s = sketched(&scorer, &cfg, parts);
            assert_eq!(s.lower, whole.lower, "{parts} partitions, {population:?}");
            assert_eq!(s.upper, whole.upper, "{parts} partitions, {population:?}");
            assert_eq!(s.delta, whole.delta, "{parts} partitions, {population:?}");
            assert_eq!(s.counts, whole.counts);
        }
    }
    // Power: the tails of one partition alone give other percentiles.
    let cfg = SensitivityConfig::default();
    let counts = percentile_counts(&scorer, cfg.population);
    let whole = item_sensitivities(&scorer, &cfg, &|_| {});
    let alone = sketch_users(&scorer, &cfg, &counts, 0..300, &|_| {}).sensitivities(&cfg);
    assert_ne!(alone.lower, whole.lower);
    // Sketches of different percentiles do not merge.
    let other = SensitivityConfig::new(5.0, 95.0, 1e-6).unwrap();
    let a = sketch_users(&scorer, &cfg, &counts, 0..300, &|_| {});
    let b = sketch_users(&scorer, &other, &counts, 300..611, &|_| {});
    let e = a.merge(&b).unwrap_err().to_string();
    assert!(e.contains("different runs"), "{e}");
    // A truncated encoding names what it was decoding.
    let bytes = b.to_bytes();
    let e = PercentileSketch::from_bytes(&bytes[..bytes.len() - 3]).unwrap_err();
    assert!(e.to_string().contains("percentile sketch"), "{e}");
}

#[test]
fn merged_partitions_equal_the_single_machine_run() {
    let scorer = Hashed::new(2 * select::CHUNK_USERS + 99, 200);
    let scfg = recsel::scoring::SensitivityConfig::default();
    let sens = item_sensitivities(&scorer, &scfg, &|_| {});
    let cfg = config(4);
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(dir.path(), &cfg, false).unwrap();
    let (rows, skipped) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None).unwrap();
    let whole = select::analyse(&scorer, &sens, scfg.floor, &cfg, &rows);
    let json = |a: &select::Analysis| {
        serde_json::to_string(&(&a.mse, &a.spearman, &a.diagnostics, &a.rules)).unwrap()
    };
    for parts in [1, 3, 7] {
        let results: Vec<PartitionResult> = partition::split_users(scorer.n_users(), parts)
            .unwrap()
            .into_iter()
            .map(|r| {
                let p = partition::run_partition(&scorer, &sens, &cfg, r).unwrap();
                let back = PartitionResult::from_bytes(&p.to_bytes()).unwrap();
                assert_eq!(back, p, "byte round trip");
                back
            })
            .rev()
            .collect();
        let m = partition::merge(results, scorer.n_users()).unwrap();
        assert_eq!(m.rows, rows, "{parts} partitions: rows");
        assert_eq!(m.skipped, skipped);
        let a = select::analysis_from(&cfg, &sens, scfg.floor, m.counts.clone(), m.sample, &m.rows);
        assert_eq!(a.counts, whole.counts, "{parts} partitions: counts");
        assert_eq!(json(&a), json(&whole), "{parts} partitions: analysis");
    }
    // Power: another seed changes the rows, and a missing partition is refused.
    let mut other = cfg.clone();
    other.seed += 1;
    let p = partition::run_partition(&scorer, &sens, &other, 0..50).unwrap();
    assert_ne!(p.rows[..], rows[..p.rows.len()]);
    let ranges = partition::split_users(scorer.n_users(), 3).unwrap();
    let parts: Vec<PartitionResult> = [0, 2]
        .iter()
        .map(|&i| partition::run_partition(&scorer, &sens, &cfg, ranges[i].clone()).unwrap())
        .collect();
    let e = partition::merge(parts, scorer.n_users())
        .unwrap_err()
        .to_string();
    assert!(e.contains("exactly once"), "{e}");
    assert!(partition::split_users(10, 0).is_err());
    assert!(partition::run_partition(&scorer, &sens, &cfg, 0..scorer.n_users() + 1).is_err());
}
