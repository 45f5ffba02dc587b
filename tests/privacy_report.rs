//! The release's privacy report (docs/privacy-report.md) and its private statistics: one report
//! per release, written by `fit`, refused when edited, and the same value in `recsel privacy`,
//! `recsel recommend`, `recsel serve` (start-up and `GET /v1/model`); a release with the leaky
//! exact statistics says so in every output; the end-to-end audit passes on a release with
//! private statistics.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::http::Server;
use crate::util::recsel;

fn ok(args: &[&str]) -> std::process::Output {
    let o = recsel(args);
    assert!(
        o.status.success(),
        "recsel {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `recsel fit` of the synthetic data into `dir`, with `extra` options.
fn fit(dir: &Path, extra: &[&str]) {
    let mut a = vec![
        "fit",
        "--dataset",
        "synthetic",
        "--method",
        "exact",
        "--l2",
        "200",
        "--density",
        "0.01",
        "--out",
        dir.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    ok(&a);
}

fn report_json(dir: &Path) -> Value {
    let o = ok(&["privacy", "--model", dir.to_str().unwrap(), "--json"]);
    serde_json::from_slice(&o.stdout).unwrap()
}

fn part<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == name)
        .unwrap_or_else(|| panic!("no part '{name}' in {report:#}"))
}

fn total<'a>(report: &'a Value, population: &str) -> &'a Value {
    report["totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["population"] == population)
        .unwrap_or_else(|| panic!("no total of '{population}' in {report:#}"))
}

/// A release fitted without DP reports its training data as public, its clip ranges as reading
/// no calibration user and its counts as ε-DP; with the exact statistics (the leaky option) the
/// same report names the calibration and training users unprotected — the report can tell them
/// apart. The text form says the same.
#[test]
fn the_report_names_what_is_not_private() {
    let tmp = tempfile::tempdir().unwrap();
    let private = tmp.path().join("private");
    fit(&private, &["--count-epsilon", "0.5"]);
    let r = report_json(&private);
    let w = part(&r, "model weights");
    assert_eq!(w["population"], "training users");
    assert!(w["epsilon"].is_null(), "{w}");
    assert!(
        w["mechanism"]
            .as_str()
            .unwrap()
            .contains("training data treated as public"),
        "{w}"
    );
    let c = part(&r, "clip ranges");
    assert_eq!(
        (c["population"].as_str(), c["epsilon"].as_f64()),
        (Some("calibration users"), Some(0.0))
    );
    let p = part(&r, "popularity counts");
    assert_eq!(p["epsilon"].as_f64(), Some(0.5));
    assert!(total(&r, "training users")["epsilon"].is_null());
    assert_eq!(
        total(&r, "calibration users")["epsilon"].as_f64(),
        Some(0.0)
    );
    let text =
        String::from_utf8_lossy(&ok(&["privacy", "--model", private.to_str().unwrap()]).stdout)
            .to_string();
    assert!(
        text.contains("training data treated as public") && text.contains("not DP:"),
        "{text}"
    );
    assert!(!text.contains("LEAKY"), "{text}");

    let leaky = tmp.path().join("leaky");
    fit(&leaky, &["--release-statistics", "exact-leaky"]);
    let r = report_json(&leaky);
    let c = part(&r, "clip ranges");
    assert!(c["epsilon"].is_null(), "{c}");
    assert!(c["mechanism"].as_str().unwrap().contains("LEAKY"), "{c}");
    assert!(part(&r, "popularity counts")["epsilon"].is_null());
    assert!(total(&r, "calibration users")["epsilon"].is_null());
}

/// An edit of `privacy.json` (a population made to look protected) is refused at load by the
/// manifest's checksum — by `recsel privacy` and by `recsel recommend` — naming the file.
#[test]
fn an_edited_report_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(&dir, &[]);
    let path = dir.join("privacy.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("\"epsilon\": null", "\"epsilon\": 1.0", 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let m = dir.to_str().unwrap();
    for args in [
        vec!["privacy", "--model", m],
        vec![
            "recommend",
            "--model",
            m,
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--history",
            "1,2",
        ],
    ] {
        let o = recsel(&args);
        assert!(!o.status.success(), "{args:?} accepted an edited report");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("privacy.json") && err.contains("CRC-32"),
            "{err}"
        );
    }
}

/// A release written before the report (no `statistics`, no `privacy.json`) is still read and
/// reported as holding exact statistics, its calibration users not protected.
#[test]
fn an_older_release_is_reported_with_exact_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(&dir, &[]);
    let mpath = dir.join("release.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["format_version"] = 3.into();
    m.as_object_mut().unwrap().remove("statistics");
    m["files"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["name"] != "privacy.json");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    std::fs::remove_file(dir.join("privacy.json")).unwrap();
    let r = report_json(&dir);
    let c = part(&r, "clip ranges");
    assert!(c["epsilon"].is_null());
    assert!(
        c["mechanism"]
            .as_str()
            .unwrap()
            .contains("calibration users not protected"),
        "{c}"
    );
}

/// One source: the report `recsel recommend --privacy-json` writes, the one `GET /v1/model`
/// shows and the one `recsel privacy` prints agree (the served entries added to the
/// release's); the start-up log prints it. With the leaky exact statistics, recommend's and
/// serve's outputs say LEAKY, and with the private ones they do not.
#[test]
fn recommend_serve_and_privacy_show_one_report() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, extra, leaky) in [
        ("private", &[][..], false),
        ("leaky", &["--release-statistics", "exact-leaky"][..], true),
    ] {
        let dir = tmp.path().join(name);
        fit(&dir, extra);
        let m = dir.to_str().unwrap();
        let ids = recsel::recommend::release::Release::read(&dir)
            .unwrap()
            .manifest
            .item_ids;
        let history = format!("{},{}", ids[3], ids[17]);
        let json = tmp.path().join(format!("{name}-report.json"));
        let ledger = tmp.path().join(format!("{name}-rec.ledger"));
        let o = ok(&[
            "recommend",
            "--model",
            m,
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--secure",
            "--history",
            &history,
            "--ledger",
            ledger.to_str().unwrap(),
            "--budget",
            "10",
            "--create-ledger",
            "--user",
            "u1",
            "--privacy-json",
            json.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(err.contains("LEAKY"), leaky, "{name}: {err}");
        assert!(err.contains("privacy report"), "{err}");
        let from_recommend: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let served = part(&from_recommend, "each recommendation");
        assert_eq!(served["epsilon"].as_f64(), Some(1.0));
        assert_eq!(
            part(&from_recommend, "ledger period")["epsilon"].as_f64(),
            Some(10.0)
        );
        assert_eq!(
            total(&from_recommend, "served users")["epsilon"].as_f64(),
            Some(10.0)
        );
        // The release's own parts are those `recsel privacy` prints.
        let release = report_json(&dir);
        for p in release["parts"].as_array().unwrap() {
            assert_eq!(part(&from_recommend, p["part"].as_str().unwrap()), p);
        }

        let serve_ledger = tmp.path().join(format!("{name}-serve.ledger"));
        let s = Server::start(
            &[
                "--model",
                m,
                "--ledger",
                serve_ledger.to_str().unwrap(),
                "--budget",
                "10",
                "--mech",
                "mgem",
                "--eps",
                "1",
                "--threads",
                "2",
                "--create-ledger",
            ]
            .map(String::from),
        );
        s.wait_ready(Duration::from_secs(60));
        let r = s.get("/v1/model", None);
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert_eq!(v["serving"]["privacy_report"], from_recommend, "{name}");
        assert_eq!(
            v["serving"]["privacy"].as_str().unwrap().contains("LEAKY"),
            leaky
        );
        assert!(s.log_contains("privacy report"));
        assert_eq!(s.log_contains("LEAKY"), leaky, "{name}");
        s.kill();
    }
}

/// The end-to-end audit of the serving path is consistent with user-level 1-DP on a release
/// with private statistics (clip ranges from the model).
#[test]
fn the_end_to_end_audit_passes_on_private_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(&dir, &[]);
    let o = ok(&[
        "audit-e2e",
        "--model",
        dir.to_str().unwrap(),
        "--dataset",
        "synthetic",
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--samples",
        "20000",
        "--pairs",
        "2",
        "--seed",
        "3",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("claims user-level 1-DP") && out.contains("consistent"),
        "{out}"
    );
}

/// A DP fit on an item set (`--dp-items`) end to end: `fit --out` writes a model of the whole
/// catalogue whose weights touch at most K items, its training entry is one ε for both stages
/// (the item counts and the Gram matrix: their ρ summed, converted once), the report lists it
/// beside the popularity counts and sums the training users' parts, and the release serves a
/// recommendation. The item options without `--dp-epsilon` are refused.
#[test]
fn a_dp_fit_on_an_item_set_reports_both_stages_as_one_guarantee() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(
        &dir,
        &[
            "--dp-epsilon",
            "4",
            "--dp-items",
            "150",
            "--dp-items-share",
            "0.2",
            "--count-epsilon",
            "0.5",
        ],
    );
    let r = report_json(&dir);
    let w = part(&r, "model weights");
    assert_eq!(w["population"], "training users");
    let eps = w["epsilon"].as_f64().unwrap();
    assert!((eps - 4.0).abs() < 1e-3, "{w}");
    let mech = w["mechanism"].as_str().unwrap();
    assert!(
        mech.contains("two stages") && mech.contains("item universe by DP partition selection"),
        "{w}"
    );
    assert!(w["note"].as_str().unwrap().contains("20% of ρ"), "{w}");
    let training: f64 = r["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["population"] == "training users")
        .map(|p| p["epsilon"].as_f64().unwrap())
        .sum();
    let t = total(&r, "training users")["epsilon"].as_f64().unwrap();
    assert!((t - training).abs() < 1e-9, "{r:#}");
    // The popularity counts are the fit's stage-1 counts: no ε of their own; the held-out counts
    // keep theirs.
    let p = part(&r, "popularity counts");
    assert_eq!(p["epsilon"].as_f64(), Some(0.0), "{p}");
    assert!(
        p["mechanism"]
            .as_str()
            .unwrap()
            .contains("derived from the DP fit, no extra ε"),
        "{p}"
    );
    let heldout = r["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "held-out counts")
        .map_or(0.0, |p| p["epsilon"].as_f64().unwrap());
    assert!(heldout == 0.0 || heldout == 0.5, "{r:#}");
    assert!((t - (eps + heldout)).abs() < 1e-9, "{r:#}");

    // The weights: a model of every released item, whose nonzero columns are at most the 150
    // chosen.
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("model.json")).unwrap()).unwrap();
    let n = meta["n_items"].as_u64().unwrap() as usize;
    assert!(n > 150, "{n}");
    assert!(
        mech.contains(&format!("the top 150 of its {n} items")),
        "{w}"
    );
    let (model, _) = recsel::model::io::load(&dir, None).unwrap();
    assert_eq!(model.n_items(), n);
    let mut scratch = recsel::model::Scratch::new(n);
    let mut touched = vec![false; n];
    let mut out = vec![0.0; n];
    for j in 0..n as u32 {
        model.score_into(&[j], &mut out, &mut scratch);
        for (k, &v) in out.iter().enumerate() {
            if v != 0.0 {
                touched[k] = true;
                touched[j as usize] = true;
            }
        }
    }
    let used = touched.iter().filter(|&&t| t).count();
    assert!(used <= 150 && used > 100, "{used} items have weights");

    let ids = recsel::recommend::release::Release::read(&dir)
        .unwrap()
        .manifest
        .item_ids;
    let history = format!("{},{}", ids[3], ids[17]);
    ok(&[
        "recommend",
        "--model",
        dir.to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--history",
        &history,
    ]);

    let o = recsel(&[
        "fit",
        "--dataset",
        "synthetic",
        "--method",
        "exact",
        "--dp-items",
        "10",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give dp-epsilon too"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A DP fit's report names its contribution bound: the default `weight` (every interaction,
/// weighted) and `sample` (at most C interactions kept), with the ε asked for, in the report
/// and in `model.json`; `--dp-bound` without `--dp-epsilon` is refused.
#[test]
fn a_dp_fit_reports_its_contribution_bound() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, extra, unit, gram) in [
        (
            "weight",
            &[][..],
            "user (all interactions, weighted to the contribution of 20)",
            "on the user-weighted Gram matrix",
        ),
        (
            "sample",
            &["--dp-bound", "sample"][..],
            "user (at most 20 interactions kept)",
            "on the Gram matrix",
        ),
    ] {
        let dir = tmp.path().join(name);
        let mut a = vec!["--dp-epsilon", "4"];
        a.extend_from_slice(extra);
        fit(&dir, &a);
        let r = report_json(&dir);
        let w = part(&r, "model weights");
        assert_eq!(w["population"], "training users");
        assert_eq!(w["unit"], unit, "{w}");
        assert!((w["epsilon"].as_f64().unwrap() - 4.0).abs() < 1e-6, "{w}");
        assert!(w["mechanism"].as_str().unwrap().contains(gram), "{w}");
        let m: Value =
            serde_json::from_slice(&std::fs::read(dir.join("model.json")).unwrap()).unwrap();
        assert_eq!(m["training_privacy"]["unit"], unit);
        assert!(m["training_privacy"]["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("contribution bound `{name}`")));
    }
    let o = recsel(&[
        "fit",
        "--dataset",
        "synthetic",
        "--dp-bound",
        "sample",
        "--out",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("dp-epsilon"));
}
