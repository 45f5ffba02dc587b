//! The release's privacy report (docs/privacy-report.md) and its private statistics: one report
//! per release, written by `fit`, refused when edited, and the same value in `recsel privacy`,
//! `recsel recommend`, `recsel serve` (start-up and `GET /v1/model`); a release with the leaky
//! exact statistics says so in every output; the end-to-end audit passes on a release with
//! private statistics.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::http::Server;
use crate::util::{fit_synthetic, ok, recsel, SYNTHETIC_MODEL};

/// `recsel fit` of the synthetic example into `dir`, with `extra` options.
pub(crate) fn fit(dir: &Path, extra: &[&str]) {
    fit_synthetic(dir, &[SYNTHETIC_MODEL, extra].concat());
}

pub(crate) fn report_json(dir: &Path) -> Value {
    let o = ok(&["privacy", "--model", dir.to_str().unwrap(), "--json"]);
    serde_json::from_slice(&o.stdout).unwrap()
}

pub(crate) fn part<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == name)
        .unwrap_or_else(|| panic!("no part '{name}' in {report:#}"))
}

pub(crate) fn total<'a>(report: &'a Value, population: &str) -> &'a Value {
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

/// Every key path whose name says it holds a hash of the data, anywhere in a JSON document.
fn data_hash_keys(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let path = format!("{at}.{k}");
                if k.contains("fingerprint") || k.contains("data_hash") {
                    out.push(path.clone());
                }
                data_hash_keys(x, &path, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                data_hash_keys(x, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The top-level fields of two JSON objects that differ.
fn differing(a: &Value, b: &Value) -> Vec<String> {
    let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| k.to_string())
        .collect()
}

/// A click log of `users` users as CSV (user, item, click): each user's items from a fixed
/// pseudo-random sequence, so a log with one user more is a neighbour of the shorter one.
fn click_log(path: &Path, users: u32) {
    let mut text = String::from("user,item,click\n");
    let mut z: u64 = 7;
    for u in 0..users {
        let mut items = std::collections::BTreeSet::new();
        while items.len() < 12 {
            z = z
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            items.insert((z >> 33) % 60);
        }
        for i in items {
            text.push_str(&format!("u{u},i{i},1\n"));
        }
    }
    std::fs::write(path, text).unwrap();
}

/// Two DP fits on neighbouring data (one training user added) publish no hash of the data: no
/// field of `model.json` or `release.json` is named for one, neither file holds the data's
/// fingerprint, and the fields that differ between the two releases are the declared random and
/// noisy ones (the random release id, and the checksums of the noisy weights). The same checks
/// flag the releases as they were written with a `data_fingerprint` field.
#[test]
fn neighbouring_fits_publish_no_data_hash() {
    let tmp = tempfile::tempdir().unwrap();
    // The same file name (the data set's name in the release) in two directories.
    for d in ["one", "two"] {
        std::fs::create_dir(tmp.path().join(d)).unwrap();
    }
    let (small, large) = (tmp.path().join("one/d.csv"), tmp.path().join("two/d.csv"));
    click_log(&small, 400);
    // The added user is a training user under the default split (seed 42).
    let mut added = 400;
    while recsel::data::split::user_group(42, &format!("u{added}"), 0.1, 0.1)
        != recsel::data::split::Group::Train
    {
        added += 1;
    }
    click_log(&large, added + 1);
    let text = std::fs::read_to_string(&large).unwrap();
    // Keep users 0..400 and the added one only.
    let keep: String = text
        .lines()
        .filter(|l| {
            l.split(',').next().is_some_and(|u| {
                u == "user"
                    || u == format!("u{added}")
                    || u[1..].parse::<u32>().is_ok_and(|n| n < 400)
            })
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&large, keep).unwrap();
    // A declared catalogue of every item, so the small data set needs no DP partition selection
    // (its users are too few for any item to pass the threshold at this ε).
    let catalogue = tmp.path().join("catalogue.txt");
    std::fs::write(
        &catalogue,
        (0..60).map(|i| format!("i{i}\n")).collect::<String>(),
    )
    .unwrap();
    let fit_on = |data: &Path, out: &Path| {
        ok(&[
            "fit",
            "--catalogue",
            catalogue.to_str().unwrap(),
            "--format",
            "csv",
            "--path",
            data.to_str().unwrap(),
            "--user-col",
            "user",
            "--item-col",
            "item",
            "--rating-col",
            "click",
            "--min-rating",
            "none",
            "--method",
            "ease",
            "--l2",
            "50",
            "--dp-epsilon",
            "1",
            "--out",
            out.to_str().unwrap(),
        ]);
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fit_on(&small, &a);
    fit_on(&large, &b);
    // The fingerprints of the two data sets, computed on this side and never stored.
    let fp = |data: &Path| {
        let src = recsel::data::DataSource::Path {
            format: recsel::data::Format::Csv,
            path: data.to_path_buf(),
            columns: Some(recsel::data::load::Columns {
                user: "user".into(),
                item: "item".into(),
                rating: Some("click".into()),
            }),
        };
        let opts = recsel::data::LoadOptions {
            min_rating: Some(None),
            ..Default::default()
        };
        format!(
            "{:016x}",
            recsel::data::load_dataset_with(&src, 42, &opts)
                .unwrap()
                .fingerprint()
        )
    };
    let (fa, fb) = (fp(&small), fp(&large));
    assert_ne!(fa, fb, "neighbouring data sets have different fingerprints");
    let read = |d: &Path, f: &str| -> (String, Value) {
        let t = std::fs::read_to_string(d.join(f)).unwrap();
        let v = serde_json::from_str(&t).unwrap();
        (t, v)
    };
    let check = |files: [(&str, &str, Value); 2], hashes: [&str; 2]| -> Vec<String> {
        let mut bad = Vec::new();
        for (name, text, v) in &files {
            data_hash_keys(v, name, &mut bad);
            for h in hashes {
                if text.contains(h) {
                    bad.push(format!("{name} holds the data's fingerprint {h}"));
                }
            }
        }
        let allowed = ["release_id", "files", "model_file"];
        for d in differing(&files[0].2, &files[1].2) {
            if !allowed.contains(&d.as_str()) {
                bad.push(format!("{} differs between neighbours", d));
            }
        }
        bad
    };
    for f in ["model.json", "release.json"] {
        let ((ta, va), (tb, vb)) = (read(&a, f), read(&b, f));
        let found = check(
            [(f, ta.as_str(), va.clone()), (f, tb.as_str(), vb.clone())],
            [&fa, &fb],
        );
        assert!(found.is_empty(), "{f}: {found:?}");
        assert_ne!(va["release_id"], vb["release_id"]);
        // The same file as it was written with a hash of the data: flagged.
        let with = |mut v: Value, h: &str| {
            v.as_object_mut()
                .unwrap()
                .insert("data_fingerprint".into(), h.into());
            let t = v.to_string();
            (t, v)
        };
        let ((oa, ova), (ob, ovb)) = (with(va, &fa), with(vb, &fb));
        let flagged = check([(f, oa.as_str(), ova), (f, ob.as_str(), ovb)], [&fa, &fb]);
        assert!(flagged.len() >= 3, "{f}: {flagged:?}");
    }
}

/// `--clip-range` names percentiles of the calibration users' scores, which only exact-leaky
/// statistics read: with the default private statistics another range is refused before any data
/// is read, naming the option and the way out (it used to be recorded in `release.json` and never
/// used), and with `--release-statistics exact-leaky` it calibrates the release at those
/// percentiles. The default range with private statistics is accepted as before.
#[test]
fn a_clip_range_is_refused_where_the_release_would_not_use_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    let o = recsel(
        &[
            &[
                "fit",
                "--dataset",
                "synthetic",
                "--out",
                dir.to_str().unwrap(),
            ][..],
            SYNTHETIC_MODEL,
            &["--clip-range", "5,95"],
        ]
        .concat(),
    );
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "{e}");
    for w in [
        "--clip-range",
        "5,95",
        "exact-leaky",
        "derives its clip ranges from the model",
    ] {
        assert!(e.contains(w), "{w}: {e}");
    }
    assert!(!dir.join("release.json").exists());
    fit(&dir, &["--clip-range", "1,99"]);
    let leaky = tmp.path().join("leaky");
    fit(
        &leaky,
        &[
            "--release-statistics",
            "exact-leaky",
            "--clip-range",
            "5,95",
        ],
    );
    let r: Value =
        serde_json::from_slice(&std::fs::read(leaky.join("release.json")).unwrap()).unwrap();
    assert_eq!(
        (
            r["calibration"]["lower_percentile"].as_f64(),
            r["calibration"]["upper_percentile"].as_f64()
        ),
        (Some(5.0), Some(95.0))
    );
}
