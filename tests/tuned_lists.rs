//! Tuned lists (docs/utility.md, "Tuning lists"): `recsel tune --k K` writes list rows that
//! record K, `recommend --k K` serves them (and refuses a length without rows), and every
//! estimate a list row reports is made on calibration users its choice did not read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::util::{fit_synthetic, ok, recsel};
use recsel::data::{calibration_users, DataOptions};
use recsel::evaluate::options::release_data;
use recsel::evaluate::tuning::estimate::parts;
use recsel::evaluate::tuning::tune;
use recsel::mechanisms::MechParams;
use recsel::options::OptionTable;
use recsel::recommend::tuned::{Tuning, TUNED};
use recsel::recommend::{RecommendConfig, Recommender, Standing};
use recsel::rng::NoiseMode;

/// Synthetic data fitted with validation users and tuned with lists of 5 at eps 1 and 8, once
/// per test process.
fn model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let dir = t.join("model");
        fit_synthetic(&dir, &["--validation-users", "auto"]);
        ok(&[
            "tune",
            "--model",
            dir.to_str().unwrap(),
            "--dataset",
            "synthetic",
            "--validation-users",
            "auto",
            "--mech",
            "none",
            "--eps",
            "1,8",
            "--k",
            "5",
        ]);
        dir
    })
}

fn tuned(eps: f64, k: usize) -> RecommendConfig {
    let mut c = RecommendConfig::new(
        TUNED,
        MechParams {
            epsilon: eps,
            ..Default::default()
        },
        NoiseMode::Fast,
    );
    c.list_k = k;
    c
}

/// `tune --k 5` writes one list row per tuned eps, each recording k = 5; the library and
/// `recommend --k 5` serve the row (its mechanism, pool and released length, with the Recall@5
/// worth line); a length without rows is refused with the command that makes them.
#[test]
fn tune_k_writes_list_rows_and_recommend_k_reads_them() {
    let dir = model();
    let t = Tuning::read(dir).unwrap();
    assert_eq!(t.config.lists.k, vec![5]);
    assert_eq!(t.lists.len(), 2, "{:?}", t.lists);
    for (r, eps) in t.lists.iter().zip([1.0, 8.0]) {
        assert_eq!((r.k, r.epsilon), (5, eps));
        assert!(r.serves.released >= 5);
        assert!(r.recall.mean.is_finite() && r.free_recall.mean.is_finite());
        // A private list is served only with a gain above the margin; else the free list.
        if r.serves.is_public() {
            assert_eq!(r.serves, r.free);
            assert_eq!(r.spends, 0.0);
        } else {
            assert!(recsel::recommend::tuned::beats(&r.gain, r.margin));
            assert_eq!(r.spends, eps);
        }
    }
    let rec = Recommender::load(dir, &tuned(8.0, 5)).unwrap();
    let row = rec.tuned_list().expect("a tuned list").clone();
    assert_eq!(row, t.lists[1]);
    assert_eq!(rec.released_len(5).unwrap(), row.serves.released);
    assert!(rec.released_len(3).is_err());
    let w = rec.worth_for(5);
    assert_eq!(w.standing, Standing::Tuned);
    assert_eq!(w.metric, "Recall@5");
    assert_eq!(w.hit, Some(row.recall));
    let mut draws = rec.draws_seeded(1).unwrap();
    let mut scratch = rec.scratch();
    let list = rec
        .recommend_list(&[0, 1, 2], 5, 7, &mut draws, &mut scratch)
        .unwrap();
    assert_eq!(list.len(), row.serves.released);

    // The command line: the list of 5 shown, the worth line in Recall@5.
    let ids = &rec.release().manifest.item_ids;
    let history = format!("{},{},{}", ids[0], ids[1], ids[2]);
    let run = |k: &str| {
        recsel(&[
            "recommend",
            "--model",
            dir.to_str().unwrap(),
            "--eps",
            "8",
            "--k",
            k,
            "--history",
            &history,
            "--seed",
            "3",
        ])
    };
    let o = run("5");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let shown: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .trim()
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(shown.len(), 5, "{shown:?}");
    assert!(err.contains("calibration Recall@5"), "{err}");
    if row.serves.released > 5 {
        assert!(shown.iter().all(|s| !history.split(',').any(|h| h == s)));
    }
    // Power: a length the tuning has no rows for is refused, naming the command.
    let o = run("3");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no tuned lists of 3") && err.contains("tune --k 3"),
        "{err}"
    );
}

/// A recommender loaded for one item with the tuned configuration and asked for a list of 5
/// answers the tuned list of 5 ([`Recommender::for_k`], resolved once): the same row, mechanism,
/// pool, released length, ε, statement, worth and — for the same seed — items as one loaded with
/// `--k 5`. The top-1 row is never peeled into a list (its own list of 5 is refused), a length
/// without tuned rows is refused naming `recsel tune --k`, a named mechanism keeps answering its
/// own lists, and the recommender loaded for 5 asked for one item answers the tuned top-1 row.
#[test]
fn a_top1_recommender_asked_for_k_answers_the_tuned_list_of_k() {
    let dir = model();
    let top1 = Arc::new(Recommender::load(dir, &tuned(8.0, 1)).unwrap());
    let five = Arc::new(Recommender::load(dir, &tuned(8.0, 5)).unwrap());
    assert!(top1.tuned_list().is_none() && five.tuned_list().is_some());
    let got = top1.for_k(5).unwrap();
    assert!(Arc::ptr_eq(&got, &top1.for_k(5).unwrap()), "resolved once");
    assert!(Arc::ptr_eq(&top1.for_k(1).unwrap(), &top1));
    assert_eq!(got.tuned_list(), five.tuned_list());
    assert_eq!(got.mechanism().name(), five.mechanism().name());
    assert_eq!(got.candidate_policy(), five.candidate_policy());
    assert_eq!(got.released_len(5).unwrap(), five.released_len(5).unwrap());
    assert_eq!(got.list_epsilon(5).unwrap(), five.list_epsilon(5).unwrap());
    assert_eq!(
        got.list_statement(5).unwrap(),
        five.list_statement(5).unwrap()
    );
    assert_eq!(got.list_privacy(5).unwrap(), five.list_privacy(5).unwrap());
    assert_eq!(got.list_guarantee_words(5), five.list_guarantee_words(5));
    assert_eq!(got.worth_for(5), five.worth_for(5));
    let ids = &five.release().manifest.item_ids;
    let lists = |rec: &Recommender, seed: u64| {
        let mut draws = rec.draws_seeded(seed).unwrap();
        let mut scratch = rec.scratch();
        (0..20u32)
            .map(|u| {
                let history = [u, u + 7, u + 40];
                rec.recommend_list(&history, 5, u as u64, &mut draws, &mut scratch)
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let answered = lists(&got, 3);
    assert_eq!(answered, lists(&five, 3));
    assert!(answered
        .iter()
        .all(|l| l.len() == five.released_len(5).unwrap()));
    eprintln!(
        "k = 5 of the top-1 recommender: {} — {}",
        answered[0]
            .iter()
            .map(|&j| ids[j as usize].as_str())
            .collect::<Vec<_>>()
            .join(","),
        got.list_statement(5).unwrap()
    );
    // The top-1 row itself draws no list of 5: what was tuned for 5 is the only answer.
    let mut draws = top1.draws_seeded(3).unwrap();
    let mut scratch = top1.scratch();
    let e = top1
        .recommend_list(&[0, 7, 40], 5, 0, &mut draws, &mut scratch)
        .unwrap_err()
        .to_string();
    assert!(e.contains("for_k(5)"), "{e}");
    // A length without tuned rows is refused with the command that makes them, every time.
    for _ in 0..2 {
        let e = top1.for_k(3).unwrap_err().to_string();
        assert!(
            e.contains("no tuned lists of 3") && e.contains("recsel tune --k 3"),
            "{e}"
        );
    }
    // The recommender loaded for 5, asked for one item: the tuned top-1 row.
    let one = five.for_k(1).unwrap();
    assert_eq!(one.privacy_statement(), top1.privacy_statement());
    assert_eq!(one.worth(), top1.worth());
    // A named mechanism draws its own lists of any length.
    let mut c = RecommendConfig::new(
        "mgem",
        MechParams {
            epsilon: 8.0,
            ..Default::default()
        },
        NoiseMode::Fast,
    );
    c.tuned_row = true;
    let named = Arc::new(Recommender::load(dir, &c).unwrap());
    assert!(Arc::ptr_eq(&named.for_k(3).unwrap(), &named));
    assert_eq!(named.released_len(3).unwrap(), 3);
}

/// Every number a list row reports is the estimation users': replacing what they held out with
/// an item no list shows leaves every choice (served, best private and best free list) as it was
/// and sets the free list's estimate to 0; the selection and estimation users are disjoint.
#[test]
fn the_tuned_list_is_estimated_on_users_the_choice_did_not_read() {
    let dir = model();
    let tuning = Tuning::read(dir).unwrap();
    let mut data = DataOptions::default();
    data.set("dataset", "synthetic").unwrap();
    data.set("validation_users", "auto").unwrap();
    let (ds, release) = release_data(dir, &data, 42).unwrap();
    let cal = calibration_users(&ds, 42).unwrap();
    let (model, _) = recsel::model::io::load(dir).unwrap();
    let (sel, est) = parts(&cal).unwrap();
    assert!(!sel.is_empty() && !est.is_empty());
    assert!(sel.iter().all(|u| !est.contains(u)));
    let t = tune(&model, &release, &cal, &tuning.config, &|_| {}).unwrap();
    // The tuning is reproducible (its numbers up to the JSON round trip).
    assert_eq!(t.lists.len(), tuning.lists.len());
    for (a, b) in t.lists.iter().zip(&tuning.lists) {
        assert_eq!((&a.serves, &a.free, &a.best), (&b.serves, &b.free, &b.best));
        assert!((a.recall.mean - b.recall.mean).abs() < 1e-12);
    }
    let changed = crate::util::estimation_users_hold_out_the_rarest_item(
        &cal,
        &est,
        &release,
        model.n_items(),
    );
    let t2 = tune(&model, &release, &changed, &tuning.config, &|_| {}).unwrap();
    for (a, b) in t.lists.iter().zip(&t2.lists) {
        assert_eq!((&a.free, &a.best), (&b.free, &b.best), "eps {}", a.epsilon);
        assert!(a.free_recall.mean > 0.0, "{a:?}");
        assert_eq!(b.free_recall.mean, 0.0, "{b:?}");
    }
}

/// `POST /v1/recommend` with `"k": 5` on a tuned service loaded for one item answers the tuned
/// list of 5 — the items, mechanism, pool, ε charged, guarantee and device filter of `recsel
/// serve --k 5` for the same test seed and request id — in the batch endpoint too; a `"k"` the
/// tuning has no list of is a 422 naming `recsel tune --k` (the request alone, in a batch), and
/// nothing of it reaches the ledger.
#[cfg(feature = "serve")]
#[test]
fn a_top1_service_serves_the_tuned_list_of_k_and_refuses_an_untuned_k() {
    use crate::util::http::Server;
    use recsel::ledger::{Ledger, SqliteLedger};
    use serde_json::{json, Value};
    use std::time::Duration;

    let dir = model();
    let tmp = tempfile::tempdir().unwrap();
    let start = |name: &str, extra: &[&str]| {
        let ledger = tmp.path().join(name);
        let mut a: Vec<String> = [
            "--model",
            dir.to_str().unwrap(),
            "--eps",
            "8",
            "--ledger",
            ledger.to_str().unwrap(),
            "--budget",
            "100",
            "--create-ledger",
            "--threads",
            "2",
            "--insecure-test-seed",
            "5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        let s = Server::start(&a);
        s.wait_ready(Duration::from_secs(60));
        (s, ledger)
    };
    let (top1, ledger) = start("top1.db", &[]);
    let (five, _) = start("five.db", &["--k", "5"]);
    let ids = recsel::recommend::release::Release::read(dir)
        .unwrap()
        .manifest
        .item_ids;
    let body = |rid: &str, k: Option<usize>| {
        let mut b =
            json!({"user": "alice", "history": [ids[0], ids[1], ids[2]], "request_id": rid});
        if let Some(k) = k {
            b["k"] = json!(k);
        }
        b
    };
    let spent = |s: &Server| s.get("/v1/users/alice/budget", None).json()["spent"].clone();

    let asked = body("r1", Some(5));
    let a = top1.post("/v1/recommend", None, &asked);
    eprintln!(
        "top-1 service: POST /v1/recommend {asked}\n-> {} {}",
        a.status, a.body
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let b = five.post("/v1/recommend", None, &body("r1", None));
    eprintln!("--k 5 service: -> {} {}", b.status, b.body);
    assert_eq!(b.status, 200, "{}", b.body);
    let (a, b) = (a.json(), b.json());
    let row = Recommender::load(dir, &tuned(8.0, 5))
        .unwrap()
        .tuned_list()
        .unwrap()
        .clone();
    assert_eq!(a["items"].as_array().unwrap().len(), row.serves.released);
    for f in [
        "item",
        "items",
        "k",
        "mechanism",
        "candidates",
        "epsilon",
        "charged",
        "guarantee",
        "list_form",
        "device_filter",
    ] {
        assert_eq!(a[f], b[f], "{f}: {a} against {b}");
    }
    assert_eq!(a["candidates"], json!(row.serves.candidates.to_string()));
    assert_eq!(
        a["device_filter"],
        if row.serves.released > 5 {
            json!(5)
        } else {
            Value::Null
        }
    );
    let after_list = spent(&top1);

    // The batch path: the list of 5 (the same history: the stored list, one release per
    // history) beside a request for 3, refused on its own.
    let batch = top1.post(
        "/v1/recommend/batch",
        None,
        &json!({"requests": [body("r2", Some(5)), body("r3", Some(3))]}),
    );
    assert_eq!(batch.status, 200, "{}", batch.body);
    let r = batch.json()["responses"].clone();
    assert_eq!(
        (r[0]["status"].clone(), r[0]["items"].clone()),
        (json!(200), a["items"].clone())
    );
    assert_eq!(r[1]["status"], json!(422), "{r}");
    assert_eq!(r[1]["error"]["field"], json!("requests[1].k"), "{r}");

    // A k the tuning has no list of: 422, naming the command that makes one; nothing charged.
    let refused = top1.post("/v1/recommend", None, &body("r4", Some(3)));
    eprintln!(
        "top-1 service, \"k\": 3: -> {} {}",
        refused.status, refused.body
    );
    assert_eq!(refused.status, 422, "{}", refused.body);
    let e = &refused.json()["error"];
    assert_eq!(
        (e["code"].clone(), e["field"].clone()),
        (json!("no_tuned_list"), json!("k"))
    );
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("recsel tune --k 3") && msg.contains("nothing was charged"),
        "{msg}"
    );
    assert_eq!(spent(&top1), after_list);
    // One item: the tuned top-1 row, as before.
    let one = top1.post("/v1/recommend", None, &body("r5", None));
    assert_eq!(one.status, 200, "{}", one.body);
    assert!(one.json().get("items").is_none(), "{}", one.body);
    assert_eq!(top1.terminate().code(), Some(0));
    assert_eq!(five.terminate().code(), Some(0));
    let l = SqliteLedger::open_existing(&ledger).unwrap();
    for rid in ["r3", "r4"] {
        assert!(
            l.log().event("alice", rid).unwrap().is_none(),
            "{rid} reached the ledger"
        );
    }
    assert!(l.log().event("alice", "r1").unwrap().is_some());
}

/// A tuned list spends what its row records: a public ranking (served as `random` over its
/// items) is 0-DP, so its ε and the ledger's charge are 0 whatever ε the request was configured
/// with; a private row spends its ε. Loaded for 5 or resolved from a top-1 recommender
/// ([`Recommender::for_k`]), the same. Power: a list of `random` reported at the configured ε
/// (k rounds of ε/k) would charge 8 for the public row.
#[test]
fn a_tuned_list_is_charged_what_its_row_spends() {
    use recsel::ledger::{
        GroupCommitter, HistoryKey, Ledger, Period, Settings, SqliteLedger, Units,
    };
    use recsel::recommend::ledgered::LedgeredRecommender;
    let dir = model();
    let t = Tuning::read(dir).unwrap();
    assert!(
        t.lists.iter().any(|r| r.serves.is_public()),
        "the fixture has a public tuned list: {:?}",
        t.lists
    );
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let settings = Settings {
        budget: Units::charge("100").unwrap(),
        period: Period::Day,
    };
    let ledger: Arc<dyn Ledger> =
        Arc::new(SqliteLedger::open(&tmp.path().join("l.db"), settings).unwrap());
    for r in &t.lists {
        let five = Arc::new(Recommender::load(dir, &tuned(r.epsilon, 5)).unwrap());
        let top1 = Arc::new(Recommender::load(dir, &tuned(r.epsilon, 1)).unwrap());
        for rec in [Arc::clone(&five), top1.for_k(5).unwrap()] {
            assert_eq!(rec.list_epsilon(5).unwrap(), Some(r.spends), "{r:?}");
            // The guarantee's words say what is charged.
            let words = rec.list_guarantee_words(5);
            assert_eq!(words.starts_with("0-DP"), r.serves.is_public(), "{words}");
        }
        let committer = Arc::new(GroupCommitter::new(Arc::clone(&ledger), 1));
        let key = HistoryKey::from_bytes(&[7; 32]).unwrap();
        let lr = LedgeredRecommender::new(five, committer, None, &key).unwrap();
        assert_eq!(
            lr.charge_for(5).unwrap(),
            Units::charge_f64(r.spends).unwrap(),
            "{r:?}"
        );
    }
}

/// A loaded recommender reads its model directory once: with `tuning.json` (and `tuning.npz`)
/// removed while it serves, a tuned recommender loaded for one item still answers the tuned list
/// of 5 — the same row, statement and items as before — and its privacy report keeps the tuning
/// entry of the file it read, which is also what `recsel privacy` printed of the directory.
/// Power: resolving another length from the directory again (what `for_k` did) fails here with
/// "tuning.json not found".
#[test]
fn a_loaded_recommender_resolves_every_length_from_the_tuning_it_read() {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = crate::util::copy_files(model(), &t.path().join("model"));
    let five = Recommender::load(&dir, &tuned(8.0, 5)).unwrap();
    let printed = recsel::recommend::release_privacy_report(&dir).unwrap();
    let read = Tuning::read(&dir).unwrap();
    let top1 = Arc::new(Recommender::load(&dir, &tuned(8.0, 1)).unwrap());
    let tuning_entry = |r: &recsel::privacy::report::PrivacyReport| {
        r.parts
            .iter()
            .find(|p| p.part == "tuning")
            .map(|p| p.privacy.clone())
    };
    assert_eq!(
        tuning_entry(&top1.privacy_report()),
        Some(read.privacy.clone())
    );
    assert_eq!(tuning_entry(&printed), Some(read.privacy.clone()));
    for f in ["tuning.json", "tuning.npz"] {
        if dir.join(f).exists() {
            std::fs::remove_file(dir.join(f)).unwrap();
        }
    }
    let got = top1.for_k(5).unwrap();
    assert_eq!(got.tuned_list(), five.tuned_list());
    assert_eq!(
        got.list_statement(5).unwrap(),
        five.list_statement(5).unwrap()
    );
    assert_eq!(got.worth_for(5), five.worth_for(5));
    assert_eq!(tuning_entry(&got.privacy_report()), Some(read.privacy));
    let lists = |rec: &Recommender| {
        let mut draws = rec.draws_seeded(11).unwrap();
        let mut scratch = rec.scratch();
        (0..10u32)
            .map(|u| {
                rec.recommend_list(&[u, u + 3], 5, u as u64, &mut draws, &mut scratch)
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(lists(&got), lists(&five));
    // The directory itself no longer has a tuned configuration: a new load is refused.
    let e = Recommender::load(&dir, &tuned(8.0, 5))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tuning.json not found"), "{e}");
}
