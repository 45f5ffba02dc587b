//! Recall and nDCG in both conventions (docs/protocol.md, "Steps", 4) on hand-made rankings, values
//! worked out by hand, through the public path: a LightGCN directory written here, loaded, and
//! scored by a most-popular model whose scores fix the ranking.

use recsel::data::{load_dataset, DataSource, Format};
use recsel::eval::evaluate;
use recsel::model::Model;

/// Items 0..120; a higher score for a lower index, so every user's ranking is the item indices in
/// increasing order with the user's training items left out.
const ITEMS: usize = 120;

/// Writes `train.txt` / `test.txt` and evaluates the ranking model on them.
fn metrics(train: &str, test: &str) -> recsel::eval::Metrics {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.txt"), train).unwrap();
    std::fs::write(dir.path().join("test.txt"), test).unwrap();
    let ds = load_dataset(
        &DataSource::Path {
            format: Format::LightGcn,
            path: dir.path().to_path_buf(),
            columns: None,
        },
        42,
    )
    .unwrap();
    assert_eq!(ds.n_items(), ITEMS);
    let model = Model::Popular((0..ITEMS).map(|i| (ITEMS - i) as f64).collect());
    evaluate(&model, &ds)
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
        "{what}: got {got}, worked out by hand {want}"
    );
}

/// Two test users; user 2 only trains (its item 119 fixes the item count at 120).
///
/// User A (row 0): trains on {0, 1}, so the ranking is 2, 3, 4, …, 101 (top 100). Targets
/// T = {2, 5, 30}, |T| = 3, at 0-based positions 0, 3 and 28.
/// * hits@20 = 2 (items 2, 5), hits@50 = 3.
/// * Recall@20 (LightGCN) = 2/|T| = 2/3; Recall@20 (SANSA) = 2/min(20, 3) = 2/3;
///   Recall@50 = 3/min(50, 3) = 1.
/// * DCG@20 = 1/log2(2) + 1/log2(5) = 1 + 0.430676558073393 = 1.430676558073393;
///   IDCG over min(3, 20) = 3 positions = 1 + 1/log2(3) + 1/log2(4) = 1 + 0.630929753571458 + 0.5
///   = 2.130929753571458; nDCG@20 = 0.671386072523304.
/// * DCG@100 adds 1/log2(30) = 0.203795047090506: 1.634471605163899; IDCG over min(3, 100) = 3
///   positions is the same 2.130929753571458; nDCG@100 = 0.767022752591684.
///
/// User B (row 1): trains on {0}, ranking 1, 2, …, 100. Targets T = {1, 3} ∪ {40, …, 62}, |T| = 25;
/// item j sits at position j − 1.
/// * hits@20 = 2 (items 1, 3); hits@50 = 2 + 11 (items 40..=50) = 13.
/// * Recall@20 (LightGCN) = 2/25 = 0.08; Recall@20 (SANSA) = 2/min(20, 25) = 0.1 — the two
///   conventions differ here; Recall@50 = 13/min(50, 25) = 0.52.
/// * DCG@20 = 1/log2(2) + 1/log2(4) = 1.5; IDCG over min(25, 20) = 20 positions
///   = Σ_{r=2}^{21} 1/log2(r) = 7.040268381923512; nDCG@20 = 0.213060059450486.
/// * DCG@100 = 1.5 + Σ_{j=41}^{63} 1/log2(j) = 1.5 + 4.047587743773476 = 5.547587743773476;
///   IDCG over min(25, 100) = 25 positions = Σ_{r=2}^{26} 1/log2(r) = 8.131765560174182;
///   nDCG@100 = 0.682211962792327.
///
/// `evaluate` reports the mean over the two users and its standard error; for two values a, b
/// that is (a + b)/2 and |a − b|/2 (sample sd |a − b|/√2, divided by √2), which together pin down
/// both per-user values.
#[test]
fn recall_and_ndcg_in_both_conventions_on_hand_made_rankings() {
    let b_targets: Vec<String> = [1u32, 3]
        .into_iter()
        .chain(40..=62)
        .map(|i| i.to_string())
        .collect();
    let m = metrics(
        "0 0 1\n1 0\n2 119\n",
        &format!("0 2 5 30\n1 {}\n", b_targets.join(" ")),
    );
    assert_eq!(m.users, 2);
    let pair = |a: f64, b: f64| ((a + b) / 2.0, (a - b).abs() / 2.0);
    let check = |est: recsel::eval::Estimate, (mean, se): (f64, f64), what: &str| {
        close(est.mean, mean, &format!("{what} mean"));
        close(est.se, se, &format!("{what} s.e."));
    };
    let (a_ndcg20, b_ndcg20) = (0.671_386_072_523_304, 0.213_060_059_450_486);
    let (a_ndcg100, b_ndcg100) = (0.767_022_752_591_684, 0.682_211_962_792_327);
    check(
        m.recall20_lightgcn,
        pair(2.0 / 3.0, 0.08),
        "Recall@20 (LightGCN)",
    );
    check(m.recall20, pair(2.0 / 3.0, 0.1), "Recall@20 (SANSA)");
    check(m.recall50, pair(1.0, 0.52), "Recall@50");
    // nDCG values to the 15 digits written above.
    let loose = |est: recsel::eval::Estimate, (mean, se): (f64, f64), what: &str| {
        assert!(
            (est.mean - mean).abs() < 1e-14 && (est.se - se).abs() < 1e-14,
            "{what}: got {est:?}, worked out by hand {mean} ± {se}"
        );
    };
    loose(m.ndcg20, pair(a_ndcg20, b_ndcg20), "nDCG@20");
    loose(m.ndcg100, pair(a_ndcg100, b_ndcg100), "nDCG@100");

    // The wrong conventions give other numbers on these rankings: Recall@20 = hits/min(20, |T|)
    // for the LightGCN column (0.1 for B), hits/|T| for the SANSA one (0.08), Recall@50 = hits/50
    // (0.26), and an IDCG over all |T| = 25 positions for B's nDCG@20 (1.5 / 8.13 = 0.1845).
    let wrong = [
        (m.recall20_lightgcn.mean, pair(2.0 / 3.0, 0.1).0),
        (m.recall20.mean, pair(2.0 / 3.0, 0.08).0),
        (m.recall50.mean, pair(1.0, 13.0 / 50.0).0),
        (m.ndcg20.mean, pair(a_ndcg20, 1.5 / 8.131_765_560_174_182).0),
    ];
    for (got, w) in wrong {
        assert!(
            (got - w).abs() > 1e-3,
            "{got} also matches a wrong convention {w}"
        );
    }
}

/// A user whose targets are all outside the top 100 scores 0 everywhere; a target the user
/// already has is excluded from the ranking and counts as a miss, while |T| still counts it.
#[test]
fn misses_and_seen_targets() {
    // User 0 trains on {0}: ranking 1..=100; targets {105, 110} are beyond the top 100.
    // User 1 trains on {0, 4}: ranking 1, 2, 3, 5, 6, …; targets {4, 1}: 4 is excluded (a miss),
    // 1 is at position 0. Recall@20 (LightGCN) = 1/2; SANSA = 1/min(20, 2) = 1/2;
    // nDCG@20 = (1/log2 2) / (1 + 1/log2 3) = 1 / 1.630929753571458 = 0.613147192765458.
    let m = metrics("0 0\n1 0 4\n2 119\n", "0 105 110\n1 4 1\n");
    assert_eq!(m.users, 2);
    let ndcg = 1.0 / (1.0 + 1.0 / 3f64.log2());
    assert!((ndcg - 0.613_147_192_765_458).abs() < 1e-14);
    for (est, b) in [
        (m.recall20_lightgcn, 0.5),
        (m.recall20, 0.5),
        (m.recall50, 0.5),
        (m.ndcg20, ndcg),
        (m.ndcg100, ndcg),
    ] {
        close(est.mean, b / 2.0, "mean");
        close(est.se, b / 2.0, "s.e.");
    }
}
