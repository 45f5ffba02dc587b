//! `recsel select --add-mech` (docs/protocol.md): adding mechanisms to a finished run gives exactly the
//! tables of a run with all of them from the start, and reports paired per-user differences.

use std::path::Path;
use std::process::{Command, Output};

use crate::util::{stdout, succeeded};

const COMMON: [&str; 12] = [
    "select",
    "--dataset",
    "synthetic",
    "--eps",
    "0.5,4",
    "--trials",
    "4",
    "--top",
    "50",
    "--seed",
    "8",
    "--clip",
];

fn select(extra: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(COMMON)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn added_mechanisms_equal_a_full_run_and_paired_differences_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (a, full, other) = (
        dir.path().join("a"),
        dir.path().join("full"),
        dir.path().join("o"),
    );
    succeeded(select(&["--mech", "rnm,random"], &a));
    let printed = stdout(&succeeded(select(
        &["--mech", "rnm,random", "--add-mech", "krr,mgem"],
        &a,
    )));
    succeeded(select(&["--mech", "rnm,random,krr,mgem"], &full));
    for f in ["mse.csv", "users.csv", "items.csv", "chunks/manifest.json"] {
        assert_eq!(read(&a.join(f)), read(&full.join(f)), "{f} differs");
    }
    // Power: the same mechanisms in another order give another per-user table.
    succeeded(select(&["--mech", "rnm,random,mgem,krr"], &other));
    assert_ne!(read(&a.join("users.csv")), read(&other.join("users.csv")));

    // Paired differences: recomputed here from the per-user table.
    let users = read(&a.join("users.csv"));
    let mut lines = users.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (ck, cr) = (col("mse_krr_eps4"), col("mse_rnm_eps4"));
    let d: Vec<f64> = lines
        .map(|l| {
            let f: Vec<f64> = l
                .split(',')
                .map(|x| x.parse().unwrap_or(f64::NAN))
                .collect();
            f[ck] - f[cr]
        })
        .collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let paired = read(&a.join("paired.csv"));
    let row = paired
        .lines()
        .find(|l| l.starts_with("krr,rnm,4.0,"))
        .unwrap_or_else(|| panic!("{paired}"));
    let got: f64 = row.split(',').nth(3).unwrap().parse().unwrap();
    assert!(
        (got - mean).abs() <= 1e-12 * mean.abs().max(1.0),
        "{got} vs {mean}"
    );
    assert_eq!(paired.lines().count(), 1 + 2 * 2 * 2, "{paired}");
    assert!(
        printed.contains("paired per-user MSE differences"),
        "{printed}"
    );
}

#[test]
fn add_mech_refuses_what_it_cannot_add_to() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    succeeded(select(&["--mech", "rnm,random"], &a));
    let err = |o: Output| {
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(select(
        &["--mech", "rnm,random", "--add-mech", "random"],
        &a,
    ));
    assert!(e.contains("random is already in the run"), "{e}");
    let e = err(select(
        &["--mech", "rnm,random", "--add-mech", "krr"],
        &dir.path().join("none"),
    ));
    assert!(e.contains("holds no select run"), "{e}");
    // Other options than the stored run's: another configuration, refused.
    let e = err(select(&["--mech", "rnm", "--add-mech", "krr"], &a));
    assert!(e.contains("different configuration"), "{e}");
    // The refused attempts left the run intact.
    assert_eq!(read(&a.join("mse.csv")).lines().count(), 1 + 2 * 2);
}
