//! Failing closed on what a file-level attacker can change (docs/deployment.md, "Signed
//! releases"; docs/ledger.md, "A ledger changed under a running process" and "Clocks"): tuned
//! bounds pass the release's one check, a release key refuses a forged file whose CRC was
//! recomputed, a ledger file truncated or stripped of events under a running process stops
//! every answer, and a clock far from the ledger's is refused at start-up with `/budget`
//! agreeing with the charge.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use recsel::ledger::{self, Answer, ChargeRequest, Outcome, Period, Timestamp, Units};
use recsel::model::io::{crc32, npy_bytes, write_npz, NpyArray};
use recsel::recommend::signature::{self, KEY_ENV};
use recsel::recommend::tuned::Tuning;

fn run(args: &[&str], key: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_recsel"));
    c.args(args).env_remove(KEY_ENV);
    if let Some(k) = key {
        c.env(KEY_ENV, k);
    }
    c.output().expect("run recsel")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A copy of the tuned synthetic model of `worth` (fit, then `tune --mech em,mgem`).
fn tuned_copy(to: &Path) -> PathBuf {
    crate::util::copy_files(crate::worth::model(), to)
}

/// Rewrites array `name` of `dir/tuning.npz` with `edit` and records the new size and CRC-32 in
/// `tuning.json`, as an attacker who knows the format would.
fn tamper_tuning_npz(dir: &Path, name: &str, edit: &dyn Fn(&mut Vec<f64>)) {
    let path = dir.join("tuning.npz");
    let mut entries = crate::util::npz_arrays(&path);
    let mut found = false;
    for (n, a) in entries.iter_mut() {
        if n.strip_suffix(".npy").unwrap_or(n) == name {
            let NpyArray::F64(v) = a else {
                panic!("{name}")
            };
            edit(v);
            found = true;
        }
    }
    assert!(found, "no {name} in tuning.npz");
    let npy: Vec<(&str, Vec<u8>)> = entries
        .iter()
        .map(|(n, a)| (n.as_str(), npy_bytes(a)))
        .collect();
    let out = write_npz(&npy).unwrap();
    std::fs::write(&path, &out).unwrap();
    let tpath = dir.join("tuning.json");
    let mut t: serde_json::Value = serde_json::from_slice(&std::fs::read(&tpath).unwrap()).unwrap();
    t["bounds_file"]["bytes"] = serde_json::json!(out.len());
    t["bounds_file"]["crc32"] = serde_json::json!(crc32(&out));
    std::fs::write(&tpath, serde_json::to_vec_pretty(&t).unwrap()).unwrap();
}

/// mgem's tuned row at ε = 1 and the index of its clip range in `tuning.npz`.
fn mgem_clip(dir: &Path) -> ((f64, f64), usize) {
    let t = Tuning::read(dir).unwrap();
    let clip = t
        .mechanism_row("mgem", 1.0)
        .and_then(|r| r.clip)
        .expect("mgem's tuned row at eps 1 has a clip range");
    let i = t.clip_ranges.iter().position(|&c| c == clip).unwrap();
    (clip, i)
}

fn history(dir: &Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("release.json")).unwrap()).unwrap();
    format!(
        "{},{}",
        m["item_ids"][3].as_str().unwrap(),
        m["item_ids"][17].as_str().unwrap()
    )
}

fn recommend_mgem(dir: &Path, key: Option<&Path>) -> Output {
    let d = dir.to_str().unwrap();
    let h = history(dir);
    run(
        &[
            "recommend",
            "--model",
            d,
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--secure",
            "--history",
            &h,
        ],
        key,
    )
}

/// `recsel serve ARGS --listen 127.0.0.1:0` until it exits (at most 60 s); `None` if it was
/// still serving then (it is killed).
#[cfg(feature = "serve")]
fn serve_until_exit(args: &[&str], key: Option<&Path>) -> Option<Output> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_recsel"));
    c.env_remove(KEY_ENV);
    if let Some(k) = key {
        c.env(KEY_ENV, k);
    }
    let mut child = c
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `recsel serve` of `dir` with a new ledger in it, until it exits.
#[cfg(feature = "serve")]
fn serve_exit(dir: &Path, key: Option<&Path>) -> Option<Output> {
    let ledger = dir.join("ledger.db");
    let args = [
        "--model",
        dir.to_str().unwrap(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--budget",
        "10",
        "--create-ledger",
        "--mech",
        "mgem",
        "--eps",
        "1",
    ];
    serve_until_exit(&args, key)
}

/// A tuned bound in `tuning.npz` (every Δ of mgem's clip range 1e-12, or an upper bound of
/// 1e300) with its CRC fixed is refused by the library, `recsel recommend` and `recsel serve`
/// through the release's check, naming the file, the arrays and the item; the untouched copy
/// serves. A clip range in `tuning.json` outside the percentiles is refused naming the field.
#[test]
fn a_tampered_tuned_bound_is_refused_by_every_reader_naming_the_file_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny: &dyn Fn(&mut Vec<f64>) = &|v| v.iter_mut().for_each(|d| *d = 1e-12);
    let huge: &dyn Fn(&mut Vec<f64>) = &|v| v.iter_mut().for_each(|u| *u = 1e300);
    for (case, array, edit) in [
        ("untouched", "", None),
        ("delta 1e-12", "delta", Some(tiny)),
        ("upper 1e300", "upper", Some(huge)),
    ] {
        let dir = tuned_copy(&tmp.path().join(case.replace(' ', "-")));
        let (clip, i) = mgem_clip(&dir);
        if let Some(edit) = edit {
            tamper_tuning_npz(&dir, &format!("{array}-{i}"), edit);
        }
        let lib = Tuning::read(&dir).unwrap().bounds(&dir, clip);
        let cli = recommend_mgem(&dir, None);
        if edit.is_none() {
            lib.unwrap();
            assert!(cli.status.success(), "{}", stderr(&cli));
            continue;
        }
        let want = ["tuning.npz", &format!("delta-{i}"), "item 0", "delta = "];
        let err = lib.unwrap_err().to_string();
        eprintln!("{case}: {err}");
        for w in want {
            assert!(err.contains(w), "{case}: no {w:?} in {err}");
        }
        assert!(!cli.status.success(), "{case}: recommend served it");
        for w in want {
            assert!(
                stderr(&cli).contains(w),
                "{case}: recommend: {}",
                stderr(&cli)
            );
        }
        #[cfg(feature = "serve")]
        {
            let out = serve_exit(&dir, None).expect("serve still serving after 60 s");
            assert!(!out.status.success(), "{case}: serve served it");
            for w in want {
                assert!(stderr(&out).contains(w), "{case}: serve: {}", stderr(&out));
            }
            assert!(
                !stderr(&out).contains("listening on"),
                "a refused start says it listens: {}",
                stderr(&out)
            );
        }
    }
    // tuning.json: a clip range that is not a pair of percentiles.
    let dir = tuned_copy(&tmp.path().join("json"));
    let tpath = dir.join("tuning.json");
    let mut t: serde_json::Value = serde_json::from_slice(&std::fs::read(&tpath).unwrap()).unwrap();
    t["clip_ranges"][0] = serde_json::json!([1.0, 1e300]);
    std::fs::write(&tpath, serde_json::to_vec_pretty(&t).unwrap()).unwrap();
    let err = Tuning::read(&dir).unwrap_err().to_string();
    for w in ["tuning.json", "clip_ranges[0]", "1e300"] {
        assert!(err.contains(w), "no {w:?} in {err}");
    }
    let cli = recommend_mgem(&dir, None);
    assert!(!cli.status.success() && stderr(&cli).contains("clip_ranges[0]"));
}

/// Signs the release and the tuning in `dir` with the key in the file `key`, as `recsel tune`
/// run with it does.
fn sign(dir: &Path, key: &Path) {
    let mut names = recsel::recommend::Release::signed_files(dir).unwrap();
    names.extend(Tuning::signed_files(dir));
    let key = std::fs::read_to_string(key).unwrap();
    signature::sign(dir, key.trim().as_bytes(), &names).unwrap();
}

fn write_key(dir: &Path, key: &str) -> PathBuf {
    let p = dir.join("release.key");
    std::fs::write(&p, key).unwrap();
    p
}

/// Replaces `privacy.json` with `text` and records its size and CRC-32 in `release.json`: an
/// edit the CRCs cannot detect.
fn forge_privacy(dir: &Path, text: &str) {
    std::fs::write(dir.join("privacy.json"), text).unwrap();
    let mpath = dir.join("release.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    for f in m["files"].as_array_mut().unwrap() {
        if f["name"] == "privacy.json" {
            f["bytes"] = serde_json::json!(text.len());
            f["crc32"] = serde_json::json!(crc32(text.as_bytes()));
        }
    }
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// A release signed with a key: `recsel privacy` with the key says it is verified; a
/// `privacy.json` forged with its CRC recomputed is then refused by `privacy`, `recommend` and
/// `serve` with the key, naming the file — and shown without the key, under a line that says
/// the release is unsigned and the CRC detects accidents, not edits. A tuned bound edited in a
/// signed release, or a key other than the signer's, is refused too.
#[test]
fn a_forged_privacy_report_is_refused_with_the_release_key_and_called_unsigned_without() {
    let tmp = tempfile::tempdir().unwrap();
    let key = write_key(tmp.path(), "release-key-0123456789abcdef");
    let other = tmp.path().join("other.key");
    std::fs::write(&other, "another-key-0123456789abcdef").unwrap();
    let dir = tuned_copy(&tmp.path().join("signed"));
    let d = dir.to_str().unwrap();
    let unsigned = run(&["privacy", "--model", d], Some(&key));
    assert!(!unsigned.status.success());
    assert!(
        stderr(&unsigned).contains("no release.sig"),
        "{}",
        stderr(&unsigned)
    );
    sign(&dir, &key);
    let ok = run(&["privacy", "--model", d], Some(&key));
    assert!(ok.status.success(), "{}", stderr(&ok));
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(out.contains("release signature: verified"), "{out}");
    let wrong = run(&["privacy", "--model", d], Some(&other));
    assert!(
        stderr(&wrong).contains("HMAC does not match"),
        "{}",
        stderr(&wrong)
    );

    let report = std::fs::read_to_string(dir.join("privacy.json")).unwrap();
    let forged = report.replacen("\"epsilon\": null", "\"epsilon\": 2.0", 1);
    assert_ne!(forged, report, "nothing to forge in {report}");
    forge_privacy(&dir, &forged);
    let want = ["privacy.json", "SHA-256", "release.sig"];
    let p = run(&["privacy", "--model", d], Some(&key));
    let r = recommend_mgem(&dir, Some(&key));
    for o in [&p, &r] {
        assert!(!o.status.success(), "served a forged report: {}", stderr(o));
        for w in want {
            assert!(stderr(o).contains(w), "no {w:?} in {}", stderr(o));
        }
    }
    eprintln!("refused: {}", stderr(&p));
    #[cfg(feature = "serve")]
    {
        let s = serve_exit(&dir, Some(&key)).expect("serve still serving after 60 s");
        assert!(!s.status.success());
        for w in want {
            assert!(stderr(&s).contains(w), "serve: {}", stderr(&s));
        }
    }
    // Without the key the forgery passes the CRCs, and the output says so.
    let plain = run(&["privacy", "--model", d], None);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let out = String::from_utf8_lossy(&plain.stdout);
    assert!(
        out.contains("UNSIGNED") && out.contains("detects accidents, not edits"),
        "{out}"
    );

    // A tuned bound edited in a signed release, its CRC fixed: refused by its digest.
    let dir = tuned_copy(&tmp.path().join("signed-tuning"));
    sign(&dir, &key);
    let (_, i) = mgem_clip(&dir);
    tamper_tuning_npz(&dir, &format!("lower-{i}"), &|v| v[0] -= 1e-3);
    let r = recommend_mgem(&dir, Some(&key));
    assert!(!r.status.success());
    assert!(stderr(&r).contains("tuning.json") || stderr(&r).contains("tuning.npz"));
}

/// `recsel fit` with the key signs what it writes, and the release then verifies.
#[test]
fn fit_with_the_release_key_signs_the_release() {
    let tmp = tempfile::tempdir().unwrap();
    let key = write_key(tmp.path(), "release-key-0123456789abcdef");
    let dir = tmp.path().join("m");
    let d = dir.to_str().unwrap();
    let fit = run(&["fit", "--dataset", "synthetic", "--out", d], Some(&key));
    assert!(fit.status.success(), "{}", stderr(&fit));
    let sig: signature::Signature =
        serde_json::from_slice(&std::fs::read(dir.join("release.sig")).unwrap()).unwrap();
    let names: Vec<&str> = sig.files.iter().map(|f| f.name.as_str()).collect();
    for n in [
        "model.json",
        "release.json",
        "calibration.npz",
        "privacy.json",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let ok = run(&["privacy", "--model", d], Some(&key));
    assert!(ok.status.success(), "{}", stderr(&ok));
}

fn request(user: &str, id: &str, time: Timestamp) -> ChargeRequest {
    ChargeRequest {
        user: user.into(),
        request_id: id.into(),
        request_hash: ledger::RequestHash::of(&[user.as_bytes(), id.as_bytes()]),
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time,
        answer: Answer::Item("7".into()),
        fallback: None,
        once_per_history: false,
    }
}

/// A ledger file truncated to 0 bytes, or stripped of its newest events by SQL, under an open
/// ledger: the next charge fails, the ledger is not healthy, and it stays so (the failure
/// sticks, even for reads). The untouched ledger charges.
#[test]
fn a_ledger_truncated_or_stripped_while_open_refuses_every_charge_after() {
    let tmp = tempfile::tempdir().unwrap();
    let now = Timestamp::now();
    for case in ["truncated", "events deleted"] {
        let path = tmp.path().join(format!("{}.db", case.replace(' ', "-")));
        let spec = path.to_str().unwrap();
        // Created and closed: the file holds the tables (checkpointed), as after `ledger init`.
        drop(ledger::create(spec, Units::charge("100").unwrap(), Some(Period::None)).unwrap());
        let l = ledger::open_for_charging(spec, None, None, false).unwrap();
        for i in 0..3 {
            let o = l.charge(&[request("u", &format!("r{i}"), now)]).unwrap();
            assert!(matches!(o[0], Outcome::Charged { .. }), "{o:?}");
        }
        l.health().unwrap();
        match case {
            "truncated" => std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap(),
            _ => {
                let c = rusqlite::Connection::open(&path).unwrap();
                c.execute_batch(
                    "DELETE FROM events WHERE seq >= 2; \
                     UPDATE windows SET spent = 1000000000",
                )
                .unwrap();
            }
        }
        let e = l
            .charge(&[request("u", "r9", now)])
            .unwrap_err()
            .to_string();
        let want = if case == "truncated" {
            "shrank"
        } else {
            "lost events"
        };
        assert!(e.contains(want), "{case}: {e}");
        let h = l.health().unwrap_err().to_string();
        assert!(h.contains(want), "{case}: health: {h}");
        // It sticks: the next charge and a balance read fail the same way.
        assert!(l.charge(&[request("u", "r10", now)]).is_err());
        if case == "truncated" {
            assert!(l.balance("u", now).is_err());
        }
    }
}

/// A clock a year ahead of a replica's: its charge lands in next year's window. On a replica
/// with a right clock `/budget`'s balance and the charge agree (the window is closed: nothing
/// remains, the charge is refused), and a charging command refuses to start while the newest
/// event is beyond the tolerance ahead of its clock.
#[test]
fn a_clock_far_from_the_ledgers_is_refused_at_start_and_the_balance_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("l.db");
    let spec = path.to_str().unwrap();
    let now = Timestamp::now();
    let year = Timestamp(now.0 + 366 * 24 * 3600 * 1000);
    let l = ledger::create(spec, Units::charge("5").unwrap(), Some(Period::Day)).unwrap();
    l.charge(&[request("ahead", "r1", year)]).unwrap();
    let b = l.balance("ahead", now).unwrap();
    assert_eq!(b.remaining, Units::ZERO, "{b:?}");
    assert!(b.closed_by.is_some(), "{b:?}");
    let o = l.charge(&[request("ahead", "r2", now)]).unwrap();
    assert!(
        matches!(&o[0], Outcome::Rejected { reason } if reason.to_string().contains("clock went backwards")),
        "{o:?}"
    );
    let fresh = l.balance("other", now).unwrap();
    assert_eq!(fresh.remaining, Units::charge("5").unwrap());
    assert!(fresh.closed_by.is_none());
    drop(l);
    let e = ledger::open_for_charging(spec, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ahead of this machine's clock") && e.contains("300.0 s"),
        "{e}"
    );
    // Within the tolerance it starts.
    let near = tmp.path().join("near.db");
    let l = ledger::create(near.to_str().unwrap(), Units::charge("5").unwrap(), None).unwrap();
    l.charge(&[request("u", "r1", Timestamp(now.0 + 60_000))])
        .unwrap();
    drop(l);
    ledger::open_for_charging(near.to_str().unwrap(), None, None, false).unwrap();
}

/// An export sealed with an HMAC key and imported without it is imported with a warning that
/// says only its checksum was checked; with the key, without one.
#[test]
fn a_sealed_export_imported_without_its_key_warns() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.db");
    let l = ledger::create(src.to_str().unwrap(), Units::charge("5").unwrap(), None).unwrap();
    l.charge(&[request("u", "r1", Timestamp::now())]).unwrap();
    drop(l);
    let key = write_key(tmp.path(), "export-key-0123456789");
    let export = tmp.path().join("e.jsonl");
    let s = src.to_str().unwrap();
    let k = key.to_str().unwrap();
    let e = export.to_str().unwrap();
    let o = run(
        &[
            "ledger",
            "export",
            "--ledger",
            s,
            "--out",
            e,
            "--hmac-key-file",
            k,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let plain = tmp.path().join("plain.db");
    let o = run(
        &[
            "ledger",
            "import",
            "--ledger",
            plain.to_str().unwrap(),
            "--from",
            e,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("HMAC"),
        "{}",
        stderr(&o)
    );
    let keyed = tmp.path().join("keyed.db");
    let o = run(
        &[
            "ledger",
            "import",
            "--ledger",
            keyed.to_str().unwrap(),
            "--from",
            e,
            "--hmac-key-file",
            k,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// `truncate -s 0` of the ledger file under a running `recsel serve` (127.0.0.1, a handful of
/// requests, stopped at the end): the answers before are 200, every answer after is an error
/// and carries no item, `/readyz` turns 503, and stderr says why. An existing ledger is served
/// without `--budget` (it keeps its own).
#[cfg(feature = "serve")]
#[test]
fn a_ledger_truncated_under_a_running_server_stops_every_answer() {
    use crate::util::http::{good, model_dir, Server};
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    let spec = path.to_str().unwrap();
    let init = run(
        &[
            "ledger", "init", "--ledger", spec, "--budget", "100", "--period", "day",
        ],
        None,
    );
    assert!(init.status.success(), "{}", stderr(&init));
    let args: Vec<String> = [
        "--model",
        model_dir().to_str().unwrap(),
        "--ledger",
        spec,
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--threads",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let s = Server::start(&args);
    s.wait_ready(Duration::from_secs(60));
    assert!(s.log_contains("listening on"));
    for i in 0..3 {
        let r = s.post("/v1/recommend", None, &good("u1", &format!("before-{i}")));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(s.get("/readyz", None).status, 200);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    for i in 0..5 {
        let r = s.post("/v1/recommend", None, &good("u1", &format!("after-{i}")));
        assert!(
            r.status >= 500,
            "answered after the truncation: {} {}",
            r.status,
            r.body
        );
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        assert!(v.get("item").is_none(), "{}", r.body);
        eprintln!("after-{i}: {} {}", r.status, r.body);
    }
    let ready = s.get("/readyz", None);
    eprintln!("/readyz: {} {}", ready.status, ready.body);
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("shrank"), "{}", ready.body);
    assert!(
        s.log_contains("recsel ledger: NOT READY"),
        "{}",
        s.log.lock().unwrap()
    );
    let log = s.log.lock().unwrap().clone();
    eprintln!(
        "{}",
        log.lines()
            .filter(|l| l.contains("NOT READY"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    s.terminate();
}

/// A start refused after `--create-ledger` created the ledger (each recommendation charges
/// more than the budget) leaves no ledger file behind, and never says it listens.
#[cfg(feature = "serve")]
#[test]
fn a_refused_start_removes_the_ledger_it_created() {
    use crate::util::http::model_dir;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("new.db");
    let out = serve_until_exit(
        &[
            "--model",
            model_dir().to_str().unwrap(),
            "--ledger",
            path.to_str().unwrap(),
            "--budget",
            "0.5",
            "--create-ledger",
            "--mech",
            "mgem",
            "--eps",
            "1",
        ],
        None,
    )
    .expect("serve still serving after 60 s");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("more than the budget"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A PostgreSQL ledger stripped of its newest events, or dropped and created again, under an
/// open ledger: the next charge fails, the failure sticks and `health()` reports it. Without
/// PostgreSQL the test fails under CI and prints SKIPPED otherwise.
#[cfg(all(feature = "serve", feature = "postgres"))]
#[test]
fn a_postgres_ledger_emptied_or_recreated_while_open_refuses_every_charge_after() {
    let test = "a_postgres_ledger_emptied_or_recreated_while_open_refuses_every_charge_after";
    let Some(pg) = crate::serve_postgres::Pg::start(test) else {
        return;
    };
    let now = Timestamp::now();
    for (db, edit, want) in [
        (
            "stripped",
            "DELETE FROM recsel_events WHERE seq >= 2; \
             UPDATE recsel_windows SET spent = 1000000000",
            "lost events",
        ),
        (
            "recreated",
            "DROP TABLE recsel_meta, recsel_events, recsel_windows, recsel_runs",
            "identity row",
        ),
    ] {
        pg.create_db(db);
        let url = pg.url(db);
        drop(ledger::create(&url, Units::charge("100").unwrap(), None).unwrap());
        let l = ledger::open_for_charging(&url, None, None, false).unwrap();
        for i in 0..3 {
            let o = l.charge(&[request("u", &format!("r{i}"), now)]).unwrap();
            assert!(matches!(o[0], Outcome::Charged { .. }), "{o:?}");
        }
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        c.batch_execute(edit).unwrap();
        if db == "recreated" {
            // A new ledger at the same URL: tables and a `created` row of its own.
            std::thread::sleep(std::time::Duration::from_millis(5));
            drop(ledger::create(&url, Units::charge("100").unwrap(), None).unwrap());
        }
        let e = l
            .charge(&[request("u", "r9", now)])
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{db}: {e}");
        assert!(l.health().unwrap_err().to_string().contains(want));
        assert!(l.charge(&[request("u", "r10", now)]).is_err());
    }
}
