//! The whole-release neighbour audit (docs/privacy-report.md, "The whole-release audit") and the
//! item universe (docs/training-privacy.md, "The item universe"): a DP release fitted and tuned
//! privately on a data set D and on neighbours D′ — one user added, one removed, one whose only
//! item is unique, one with a very long row, one user's row replaced — with the same seeds and
//! noise streams, compared field by field; the declared catalogue drops and keeps items; and the
//! audit's power on a release without DP and on a planted data-derived field.

use std::path::{Path, PathBuf};

use recsel::audit::release::{compare_releases, undeclared, Difference};

use crate::util::recsel;

/// The audit's noise seed for every fit of these tests.
const NOISE_SEED: &str = "11";

/// 600 users: each has 8 of 30 popular items (`p0`…`p29`) and, one in four, one of 30 rare
/// items (`r0`…`r29`, about five users each). Popular items' counts are far above the
/// partition selection's threshold at ε = 8 and rare ones far below, so a neighbour moves no item
/// across it.
fn base() -> Vec<(String, Vec<String>)> {
    (0..600u32)
        .map(|u| {
            let mut items: Vec<String> = (0..8)
                .map(|k| format!("p{}", (u * 7 + k * 3) % 30))
                .collect();
            if u % 4 == 0 {
                items.push(format!("r{}", (u / 4) % 30));
            }
            items.sort();
            items.dedup();
            (format!("u{u}"), items)
        })
        .collect()
}

fn write_csv(path: &Path, rows: &[(String, Vec<String>)]) {
    let mut s = String::from("user,item\n");
    for (u, items) in rows {
        for i in items {
            s.push_str(&format!("{u},{i}\n"));
        }
    }
    std::fs::write(path, s).unwrap();
}

/// A data set: each user's id and items.
type Rows = Vec<(String, Vec<String>)>;

/// The neighbours of [`base`], by name.
fn neighbours() -> Vec<(&'static str, Rows)> {
    let d = base();
    let typical = |u: &str| {
        (
            u.to_string(),
            (0..8).map(|k| format!("p{}", k * 2)).collect(),
        )
    };
    let mut added = d.clone();
    added.push(typical("new"));
    let mut removed = d.clone();
    removed.remove(17);
    let mut unique = d.clone();
    unique.push(("lonely".into(), vec!["only-mine".into()]));
    let mut long = d.clone();
    let mut row: Vec<String> = (0..30).map(|j| format!("p{j}")).collect();
    row.extend((0..400).map(|j| format!("x{j}")));
    long.push(("heavy".into(), row));
    let mut replaced = d.clone();
    replaced[5].1 = (0..30)
        .map(|j| format!("p{j}"))
        .chain(["r3".into()])
        .collect();
    vec![
        ("one user added", added),
        ("one user removed", removed),
        ("a user whose only item is unique", unique),
        ("a user with a very long row", long),
        ("one user's row replaced", replaced),
    ]
}

fn run(args: &[&str]) {
    run_seeded(args, NOISE_SEED)
}

fn run_seeded(args: &[&str], seed: &str) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(args)
        .env(recsel::rng::AUDIT_NOISE_SEED, seed)
        .output()
        .expect("run recsel");
    assert!(
        o.status.success(),
        "recsel {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `recsel fit` (EASE, min 1 item per user, validation users) of `csv` into `out`, then `recsel
/// tune --private` when `tune`.
fn release(csv: &Path, out: &Path, extra: &[&str], tune: bool) {
    release_seeded(csv, out, extra, tune, NOISE_SEED, "5")
}

/// [`release`] with the audit's noise seed `seed` and the private tuning's seed `tune_seed`.
fn release_seeded(csv: &Path, out: &Path, extra: &[&str], tune: bool, seed: &str, tune_seed: &str) {
    let data = [
        "--format",
        "csv",
        "--path",
        csv.to_str().unwrap(),
        "--user-col",
        "user",
        "--item-col",
        "item",
        "--min-user-items",
        "1",
        "--validation-users",
        "auto",
    ];
    let mut a = vec!["fit"];
    a.extend_from_slice(&data);
    a.extend_from_slice(&[
        "--method",
        "ease",
        "--l2",
        "50",
        "--out",
        out.to_str().unwrap(),
    ]);
    a.extend_from_slice(extra);
    run_seeded(&a, seed);
    if tune {
        let mut t = vec!["tune", "--model", out.to_str().unwrap()];
        t.extend_from_slice(&data);
        t.extend_from_slice(&[
            "--private",
            "--private-epsilon",
            "1",
            "--private-seed",
            tune_seed,
            "--eps",
            "1",
            "--mech",
            "mgem",
        ]);
        run_seeded(&t, seed);
    }
}

/// Fields of the fit and the release that depend on the item universe or on λ: with the same
/// noise they must not differ between neighbours.
fn universe_field(d: &Difference) -> bool {
    let f = d.field.as_str();
    d.file != "tuning.json"
        && (f.contains("item_ids")
            || f == "n_items"
            || f.contains("mechanism")
            || f.contains("note")
            || f.contains("l2"))
}

fn releases(tmp: &Path, extra: &[&str], tune: bool) -> (PathBuf, Vec<(&'static str, PathBuf)>) {
    // Every data set is a `data.csv` in a folder of its own: a CSV data set is named after its
    // file, which must not differ.
    let csv_in = |dir: &str| {
        std::fs::create_dir_all(tmp.join(dir)).unwrap();
        tmp.join(dir).join("data.csv")
    };
    let d = csv_in("d");
    write_csv(&d, &base());
    let a = tmp.join("rel-d");
    release(&d, &a, extra, tune);
    let mut out = Vec::new();
    for (k, (name, rows)) in neighbours().into_iter().enumerate() {
        let csv = csv_in(&format!("n{k}"));
        write_csv(&csv, &rows);
        let dir = tmp.join(format!("rel-n{k}"));
        release(&csv, &dir, extra, tune);
        out.push((name, dir));
    }
    (a, out)
}

/// A DP fit without a catalogue, with and without `--dp-items`, tuned privately: against every
/// neighbour, nothing undeclared differs — no exact count of any population, no data-derived
/// field — and no field of the item universe or of λ differs at all (the universe is the
/// partition selection's, the same on D and D′ with the same noise); the unique item, the long
/// row's own items and the rare items never enter it. D fitted and tuned again with other noise
/// seeds moves the universe and every noisy output, and still nothing undeclared.
#[test]
fn a_dp_release_on_neighbours_differs_only_in_declared_noisy_outputs() {
    for extra in [
        &["--dp-epsilon", "8"][..],
        &["--dp-epsilon", "8", "--dp-items", "20"][..],
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (a, ns) = releases(tmp.path(), extra, true);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(a.join("model.json")).unwrap()).unwrap();
        let ids: Vec<&str> = meta["item_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            ids.len() == 30 && ids.iter().all(|i| i.starts_with('p')),
            "{extra:?}: {ids:?}"
        );
        let mut tuning_moved = false;
        for (name, b) in &ns {
            let diffs = compare_releases(&a, b).unwrap();
            let flagged: Vec<String> = undeclared(&diffs).iter().map(|d| d.to_string()).collect();
            assert!(flagged.is_empty(), "{extra:?} {name}: {flagged:#?}");
            // The universe is a declared DP output, but with the same noise it must not move
            // here: no field of it differs, declared or not.
            let bad: Vec<String> = diffs
                .iter()
                .filter(|d| universe_field(d))
                .map(|d| d.to_string())
                .collect();
            assert!(bad.is_empty(), "{extra:?} {name}: {bad:#?}");
            tuning_moved |= diffs.iter().any(|d| d.file == "tuning.json");
        }
        // Some neighbour changed a calibration user (the long row's owner or another), so the
        // comparison did read the private tuning's outputs.
        assert!(tuning_moved, "{extra:?}: no neighbour moved the tuning");
        // Other noise: the universe moves (a declared DP output) and nothing undeclared does.
        let d = tmp.path().join("d").join("data.csv");
        let c = tmp.path().join("rel-d-noise");
        release_seeded(&d, &c, extra, true, "12", "6");
        let diffs = compare_releases(&a, &c).unwrap();
        let flagged: Vec<String> = undeclared(&diffs).iter().map(|d| d.to_string()).collect();
        assert!(flagged.is_empty(), "{extra:?} other noise: {flagged:#?}");
        assert!(
            diffs.iter().any(|d| d.field == "release_id"),
            "{extra:?}: {diffs:#?}"
        );
    }
}

/// Power, on the same neighbours: a release without DP keeps the data's items, so the user whose
/// only item is unique (and the long row's own items) change `item_ids` and `n_items`, and the
/// audit flags them; and a data-derived field planted into a DP release (a count of training
/// users) is flagged.
#[test]
fn the_audit_flags_a_data_derived_universe_and_a_planted_field() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, ns) = releases(tmp.path(), &[], false);
    for (name, b) in &ns[2..4] {
        let diffs = compare_releases(&a, b).unwrap();
        let flagged: Vec<String> = undeclared(&diffs).iter().map(|d| d.to_string()).collect();
        assert!(
            flagged
                .iter()
                .any(|f| f.starts_with("UNDECLARED model.json: n_items"))
                && flagged
                    .iter()
                    .any(|f| f.starts_with("UNDECLARED release.json: item_ids")),
            "{name}: {flagged:#?}"
        );
    }
    let report = std::fs::read_to_string(a.join("privacy.json")).unwrap();
    assert!(
        report.contains("item universe derived from the data"),
        "{report}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d.csv");
    write_csv(&d, &base());
    let (x, y) = (tmp.path().join("x"), tmp.path().join("y"));
    release(&d, &x, &["--dp-epsilon", "8"], false);
    release(&d, &y, &["--dp-epsilon", "8"], false);
    assert!(undeclared(&compare_releases(&x, &y).unwrap()).is_empty());
    let plant = |dir: &Path, users: u64| {
        let p = dir.join("release.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["training_users"] = users.into();
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    };
    plant(&x, 600);
    plant(&y, 601);
    let flagged: Vec<String> = undeclared(&compare_releases(&x, &y).unwrap())
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        flagged,
        vec!["UNDECLARED release.json: training_users: 600 ≠ 601"]
    );
    // An exact count of calibration users planted into two private tunings (what the tuner
    // published before): flagged, though every row of a private tuning is otherwise declared.
    for (dir, users) in [(&x, 120u64), (&y, 121)] {
        let data = d.to_str().unwrap();
        run(&[
            "tune",
            "--model",
            dir.to_str().unwrap(),
            "--format",
            "csv",
            "--path",
            data,
            "--user-col",
            "user",
            "--item-col",
            "item",
            "--min-user-items",
            "1",
            "--validation-users",
            "auto",
            "--private",
            "--private-seed",
            "5",
            "--eps",
            "1",
        ]);
        let p = dir.join("tuning.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert!(v["calibration"]["users"].is_null(), "{}", v["calibration"]);
        v["calibration"]["users"] = users.into();
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
    let flagged: Vec<String> = undeclared(&compare_releases(&x, &y).unwrap())
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        flagged,
        vec![
            "UNDECLARED release.json: training_users: 600 ≠ 601",
            "UNDECLARED tuning.json: calibration.users: 120 ≠ 121"
        ]
    );
    let o = recsel(&["audit-release", x.to_str().unwrap(), y.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("UNDECLARED release.json: training_users"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A declared catalogue: the release's items are the catalogue's, in its order — an item of the
/// data outside it dropped, a catalogue item without interactions kept — with or without DP,
/// and the report lists it as a public input; a neighbour whose only item is outside the
/// catalogue leaves the universe unchanged.
#[test]
fn a_catalogue_is_the_release_universe() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d.csv");
    write_csv(&d, &base());
    let cat = tmp.path().join("catalogue.txt");
    let mut ids: Vec<String> = (0..30).rev().map(|j| format!("p{j}")).collect();
    ids.push("never-seen".into());
    std::fs::write(&cat, ids.join("\n") + "\n").unwrap();
    for extra in [&[][..], &["--dp-epsilon", "8"][..]] {
        let mut e = vec!["--catalogue", cat.to_str().unwrap()];
        e.extend_from_slice(extra);
        let a = tmp.path().join(format!("cat-{}", extra.len()));
        release(&d, &a, &e, false);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(a.join("model.json")).unwrap()).unwrap();
        let got: Vec<String> = meta["item_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, ids, "{extra:?}");
        let report = std::fs::read_to_string(a.join("privacy.json")).unwrap();
        assert!(
            report.contains("public input: the declared catalogue of 31 items"),
            "{report}"
        );
        // Listed among the public inputs; and no count of calibration users is published (the
        // release's statistics are private by default).
        let r: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert!(
            r["public_inputs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "the item universe: the declared catalogue of 31 items (--catalogue)"),
            "{report}"
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(a.join("release.json")).unwrap()).unwrap();
        assert!(
            manifest["calibration"]["users"].is_null(),
            "{}",
            manifest["calibration"]
        );
        let mut rows = base();
        rows.push(("lonely".into(), vec!["only-mine".into()]));
        let n = tmp.path().join("n.csv");
        write_csv(&n, &rows);
        let b = tmp.path().join(format!("cat-n-{}", extra.len()));
        release(&n, &b, &e, false);
        let flagged: Vec<String> = undeclared(&compare_releases(&a, &b).unwrap())
            .iter()
            .filter(|d| universe_field(d))
            .map(|d| d.to_string())
            .collect();
        assert!(flagged.is_empty(), "{extra:?}: {flagged:#?}");
    }
}

/// A DP fit whose shift is chosen privately on the calibration users (`--dp-shift-grid`): on
/// every neighbour — among them users of the calibration split, whose Recall@20 enters the
/// choice — the release differs only in declared DP outputs (the weights, the chosen shift);
/// the release records the grid and the chosen shift, never the per-shift scores, and its
/// report's ε_T is the fit's plus the choice's. Power: the exact per-shift calibration scores
/// planted into `model.json` (a publication the choice must not make) are flagged.
#[test]
fn a_private_shift_choice_differs_between_neighbours_only_in_dp_outputs() {
    let extra = [
        "--dp-epsilon",
        "8",
        "--dp-shift-grid",
        "1,3,10",
        "--dp-select-epsilon",
        "1",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let (a, ns) = releases(tmp.path(), &extra, false);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("model.json")).unwrap()).unwrap();
    let choice = &meta["shift_choice"];
    assert_eq!(
        choice["grid"],
        serde_json::json!([1.0, 3.0, 10.0]),
        "{meta:#}"
    );
    assert!([1.0, 3.0, 10.0].contains(&choice["chosen"].as_f64().unwrap()));
    let keys: Vec<&String> = choice.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["chosen", "grid", "privacy"], "{choice:#}");
    for (name, b) in &ns {
        let diffs = compare_releases(&a, b).unwrap();
        let flagged: Vec<String> = undeclared(&diffs).iter().map(|d| d.to_string()).collect();
        assert!(flagged.is_empty(), "{name}: {flagged:#?}");
    }
    // Other noise (the Gram matrix's and the choice's): only declared outputs move.
    let d = tmp.path().join("d").join("data.csv");
    let mut chosen = std::collections::BTreeSet::new();
    for seed in ["12", "13", "14", "15"] {
        let c = tmp.path().join(format!("rel-d-{seed}"));
        release_seeded(&d, &c, &extra, false, seed, "5");
        let diffs = compare_releases(&a, &c).unwrap();
        let flagged: Vec<String> = undeclared(&diffs).iter().map(|d| d.to_string()).collect();
        assert!(flagged.is_empty(), "seed {seed}: {flagged:#?}");
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(c.join("model.json")).unwrap()).unwrap();
        chosen.insert(m["shift_choice"]["chosen"].to_string());
    }
    println!("chosen shifts over the noise seeds: {chosen:?}");
    let report: recsel::privacy::report::PrivacyReport =
        serde_json::from_slice(&std::fs::read(a.join("privacy.json")).unwrap()).unwrap();
    let (e, _) = report.fit_total().unwrap();
    assert!((e - 9.0).abs() < 1e-6, "{e}");
    // Power: the exact scores of each shift on each release's calibration users, published.
    let (x, y) = (&a, &ns[4].1);
    for (dir, scores) in [(x, [31.25, 40.5, 38.0]), (y, [31.0, 40.5, 38.5])] {
        let p = dir.join("model.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["shift_choice"]["scores"] = serde_json::json!(scores);
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
    let flagged: Vec<String> = undeclared(&compare_releases(x, y).unwrap())
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        flagged,
        vec!["UNDECLARED model.json: shift_choice.scores: [31.25,40.5,38.0] ≠ [31.0,40.5,38.5]"],
        "{flagged:#?}"
    );
}
