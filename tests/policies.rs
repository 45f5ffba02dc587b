//! Candidate policies in `recsel select` (docs/deployment.md, "Candidate policies"): the paper's
//! `history-top:N` stays the default; `all`, `popular:N` and `pool:FILE` keep the user's own
//! items, and the tables then report how often the pick was already the user's.

use crate::util::{recsel, succeeded};
use std::path::Path;

/// Column `name` of a CSV file, as text.
fn column(path: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header
        .iter()
        .position(|h| *h == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", path.display()));
    lines
        .map(|l| l.split(',').nth(i).unwrap().to_string())
        .collect()
}

/// `select --candidates all` runs every item as a candidate (k = 1,500), reports the share of
/// picks already in the history (positive: the history is among the candidates), records the
/// policy in config.toml, which reruns to the same tables; `popular:40` gives every user the
/// same 40 candidates; the paper's run has no in-history column (its candidates exclude the
/// history); `--top` and `--candidates` together are refused.
#[test]
fn select_runs_each_candidate_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let base = [
        "select",
        "--dataset",
        "synthetic",
        "--mech",
        "mgem,rnm",
        "--eps",
        "1,8",
        "--trials",
        "4",
        "--clip",
        "--seed",
        "5",
    ];
    let run = |extra: &[&str], dir: &str| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--out", dir]);
        succeeded(recsel(&a))
    };
    let all = out("all");
    let o = run(&["--candidates", "all"], &all);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("candidates: all (1500 items"), "{text}");
    assert!(text.contains("in history"), "{text}");
    let mse = Path::new(&all).join("mse.csv");
    let own: Vec<f64> = column(&mse, "in_history")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(own.len(), 4);
    assert!(own.iter().all(|&v| v > 0.0), "{own:?}");
    let k = column(&Path::new(&all).join("users.csv"), "candidates");
    assert!(k.iter().all(|c| c == "1500"));
    let toml = std::fs::read_to_string(Path::new(&all).join("config.toml")).unwrap();
    assert!(toml.contains("candidates = \"all\""), "{toml}");
    let again = out("again");
    succeeded(recsel(&[
        "run",
        Path::new(&all).join("config.toml").to_str().unwrap(),
        "--out",
        &again,
    ]));
    assert_eq!(
        std::fs::read(&mse).unwrap(),
        std::fs::read(Path::new(&again).join("mse.csv")).unwrap(),
        "config.toml reruns the policy's run"
    );
    let popular = out("popular");
    run(&["--candidates", "popular:40"], &popular);
    let k = column(&Path::new(&popular).join("users.csv"), "candidates");
    assert!(k.iter().all(|c| c == "40"));
    let paper = out("paper");
    run(&["--candidates", "history-top:40"], &paper);
    let header = std::fs::read_to_string(Path::new(&paper).join("mse.csv")).unwrap();
    assert!(!header.lines().next().unwrap().contains("in_history"));
    let o = recsel(&[
        "select",
        "--dataset",
        "synthetic",
        "--top",
        "10",
        "--candidates",
        "all",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}
