//! `recsel select --dump-problems` (docs/protocol.md): the exported problems are the ones the mechanisms
//! ran on. A short Python script (pyarrow only) re-scores them: it recomputes every user's
//! candidate count and best score exactly, and the exact expected MSE of `random` and `krr` from
//! their closed forms, which recsel's Monte-Carlo MSE must match within its Monte-Carlo error.

use std::process::Command;

use crate::util::python_with;

/// Reads the dump and recsel's tables; prints one JSON object.
///
/// Per user u with losses L_a = (q_a − q_max)² over k candidates, the selected loss L has
/// `random`: E[L] = Σ L_a / k, E[L²] = Σ L_a² / k;
/// `krr` (true argmax with p = 1/(1 + (k−1)e^−ε), else uniform over the other k − 1):
/// E[L] = (1 − p)/(k − 1)·Σ L_a, E[L²] likewise with L_a² (a tied maximum has L_a = 0).
/// recsel reports the mean over users of each user's mean over T trials, whose Monte-Carlo
/// standard error is sqrt(Σ_u Var_u / T) / n.
const SCRIPT: &str = r#"
import csv, json, math, sys
import pyarrow.parquet as pq
dump, run = sys.argv[1], sys.argv[2]
t = pq.read_table(dump).to_pydict()
users = {}
for u, r, q in zip(t["user"], t["rank"], t["score"]):
    users.setdefault(u, []).append((r, q))
rows = {r["user"]: r for r in csv.DictReader(open(run + "/users.csv"))}
exact_ok = sorted(users) == sorted(rows) and all(
    len(c) == int(rows[u]["candidates"])
    and max(q for _, q in c) == float(rows[u]["max_score"])
    and sorted(r for r, _ in c) == list(range(len(c)))
    for u, c in users.items())
mse = list(csv.DictReader(open(run + "/mse.csv")))
trials = int(mse[0]["trials"])
out = {"exact_ok": exact_ok, "users": len(users), "cells": []}
for row in mse:
    m, eps = row["mechanism"], float(row["epsilon"])
    for variant, e in (("right", eps), ("half_eps", eps / 2)):
        mean = var = 0.0
        for c in users.values():
            qs = [q for _, q in c]
            k, qmax = len(qs), max(qs)
            loss = [(q - qmax) ** 2 for q in qs]
            if m == "random":
                w = 1.0 / k
            else:
                p = 1.0 / (1.0 + (k - 1) * math.exp(-e)) if k > 1 else 1.0
                w = (1.0 - p) / (k - 1) if k > 1 else 0.0
            e1 = w * sum(loss)
            e2 = w * sum(l * l for l in loss)
            mean += e1
            var += e2 - e1 * e1
        n = len(users)
        out["cells"].append({"mechanism": m, "epsilon": eps, "variant": variant,
            "recsel": float(row["mse"]), "exact": mean / n,
            "mc_se": math.sqrt(var / trials) / n})
print(json.dumps(out))
"#;

#[test]
fn dumped_problems_rescored_in_python_give_recsels_mse() {
    let Some(py) = python_with("dumped_problems_rescored_in_python", &["pyarrow"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, dump) = (
        dir.path().join("run"),
        dir.path().join("p/problems.parquet"),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(["select", "--dataset", "synthetic", "--mech", "random,krr"])
        .args([
            "--eps", "1,4", "--trials", "40", "--top", "50", "--seed", "5", "--clip",
        ])
        .arg("--out")
        .arg(&run)
        .arg("--dump-problems")
        .arg(&dump)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dump.with_extension("csv").exists());
    let o = Command::new(py)
        .args(["-c", SCRIPT])
        .arg(&dump)
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["exact_ok"], true,
        "candidate counts or best scores differ: {v}"
    );
    assert!(v["users"].as_u64().unwrap() > 500, "{v}");
    for c in v["cells"].as_array().unwrap() {
        let z = (c["recsel"].as_f64().unwrap() - c["exact"].as_f64().unwrap()).abs()
            / c["mc_se"].as_f64().unwrap();
        let wrong_is_distinguishable = c["mechanism"] == "krr" && c["epsilon"] == 4.0;
        match c["variant"].as_str().unwrap() {
            // 5 Monte-Carlo standard errors: a false failure has probability below 10^-6.
            "right" => assert!(
                z < 5.0,
                "recsel's MSE is {z:.1} s.e. from the exact one: {c}"
            ),
            // Power: krr computed with ε/2 is rejected at the same threshold.
            _ if wrong_is_distinguishable => assert!(z > 5.0, "ε/2 not rejected: {c}"),
            _ => {}
        }
    }
}

#[test]
fn dump_problems_needs_a_parquet_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args([
            "select",
            "--dataset",
            "synthetic",
            "--mech",
            "random",
            "--eps",
            "1",
        ])
        .args(["--trials", "2", "--top", "10", "--seed", "1", "--out"])
        .arg(dir.path().join("run"))
        .arg("--dump-problems")
        .arg(dir.path().join("problems.txt"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("problems.txt") && err.contains(".parquet"));
}
