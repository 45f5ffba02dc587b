//! `recsel statistic` (docs/statistics.md): the release, its guarantee, the true value only
//! behind the flag that says it is not private, errors that name the bad value, and a real column
//! (gowalla's interactions per user).

use crate::util::{recsel, shared_data};

fn stdout(args: &[&str]) -> String {
    let o = recsel(args);
    assert!(
        o.status.success(),
        "recsel {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn statistic_releases_with_its_guarantee_and_hides_the_true_value() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("v.csv");
    std::fs::write(&csv, "id,x\n1,3\n2,5\n3,5\n4,8\n5,40\n").unwrap();
    let csv = csv.to_str().unwrap();
    let base = [
        "statistic",
        "--values",
        csv,
        "--column",
        "x",
        "--lo",
        "0",
        "--hi",
        "100",
        "--seed",
        "3",
    ];
    let text = stdout(&base);
    assert!(text.contains("median of"), "{text}");
    assert!(text.contains("guarantee: 1-DP"), "{text}");
    assert!(!text.contains("true value"), "{text}");
    let shown = stdout(&[&base[..], &["--print-true-value-not-private"]].concat());
    assert!(
        shown.contains("true value (NOT private, do not release): 5"),
        "{shown}"
    );
    // Same seed, same release.
    assert_eq!(text.lines().next(), shown.lines().next());
    let json: serde_json::Value = serde_json::from_str(&stdout(
        &[
            &base[..],
            &["--method", "smooth-laplace", "--delta", "1e-5", "--json"],
        ]
        .concat(),
    ))
    .unwrap();
    assert_eq!(json["guarantee"]["kind"], "approx");
    assert_eq!(json["guarantee"]["delta"], 1e-5);
    assert!(json.get("true_value_not_private").is_none());
    for (stat, extra) in [
        ("count", "--at-least"),
        ("mean", "--q"),
        ("quantile", "--q"),
    ] {
        let out = stdout(&[&base[..], &["--statistic", stat, extra, "0.5", "--json"]].concat());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(v["value"].as_f64().unwrap() >= 0.0, "{out}");
    }
    let bad = recsel(&[&base[..], &["--eps", "-2"]].concat());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("-2"));
    let bad = recsel(&["statistic", "--values", csv, "--column", "x"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--lo, --hi"));
    let bad = recsel(&[
        "statistic",
        "--values",
        csv,
        "--column",
        "y",
        "--lo",
        "0",
        "--hi",
        "9",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no column 'y'"));
}

/// The private median of gowalla's interactions per user, by every method, lands near the true
/// one at ε = 1 (Duff exactly, with high probability: the counts are integers and tied).
#[test]
fn statistic_on_a_real_column() {
    let Some(root) = shared_data("statistic_on_a_real_column", "gowalla") else {
        return;
    };
    let path = root.join("gowalla");
    let path = path.to_str().unwrap();
    let run = |method: &str| -> serde_json::Value {
        let out = stdout(&[
            "statistic",
            "--format",
            "lightgcn",
            "--path",
            path,
            "--lo",
            "0",
            "--hi",
            "1000",
            "--eps",
            "1",
            "--method",
            method,
            "--seed",
            "5",
            "--json",
            "--print-true-value-not-private",
        ]);
        serde_json::from_str(&out).unwrap()
    };
    let duff = run("duff");
    let truth = duff["true_value_not_private"].as_f64().unwrap();
    assert_eq!(duff["records"], 29858);
    assert_eq!(duff["value"].as_f64().unwrap(), truth, "{duff}");
    for m in ["em", "smooth-cauchy", "smooth-laplace", "laplace"] {
        let v = run(m);
        let err = (v["value"].as_f64().unwrap() - truth).abs();
        eprintln!("{m}: {} (true {truth})", v["value"]);
        // Laplace's scale is (hi − lo)/ε = 1000: only the others are close.
        if m != "laplace" {
            assert!(err < 5.0, "{m}: {v}");
        }
    }
}
