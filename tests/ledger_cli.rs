//! `recsel recommend --ledger` and `recsel ledger` end to end (docs/ledger.md): durability under
//! SIGKILL, request ids from the users file, show/export/import.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use recsel::ledger::{Answer, Ledger, LedgerLog, SqliteLedger, Units};

use crate::util::ok;

fn recsel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recsel"))
}

/// Rows of a `recommend --ledger` CSV: (user, request_id, status, item).
fn read_rows(path: &Path) -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("user,request_id,status,item,epsilon,remaining,retry_after,replayed")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].into(), f[1].into(), f[2].into(), f[3].into())
        })
        .collect()
}

/// A model directory and a users file of `n` users with 5 random items each.
fn fixture(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let model = dir.join("model");
    let data = recsel::recommend::example_release(&model).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
    let mut csv = String::from("user,item\n");
    for u in 0..n {
        for _ in 0..5 {
            let j = rng.random_range(0..data.item_ids.len());
            csv.push_str(&format!("u{u},{}\n", data.item_ids[j]));
        }
    }
    let users = dir.join("users.csv");
    std::fs::write(&users, csv).unwrap();
    (model, users)
}

/// Checks the invariants after any attempt: the store is consistent (every running total equals
/// its events, none over the budget), no user has more events than the rounds begun, and every
/// recommendation in every output file has its charge (same user, same item) in the ledger.
/// Returns the number of events of each run id.
fn check(
    ledger: &Path,
    outputs: &[PathBuf],
    rounds: usize,
    budget: Units,
) -> HashMap<String, usize> {
    let l = SqliteLedger::open_existing(ledger).unwrap();
    l.verify().unwrap();
    let mut runs: HashMap<String, usize> = HashMap::new();
    for u in l.users().unwrap() {
        let ev = l.events(&u).unwrap();
        assert!(ev.len() <= rounds.min(2), "user {u}: {} events", ev.len());
        let spent = ev
            .iter()
            .fold(Units::ZERO, |a, e| a.checked_add(e.units).unwrap());
        assert!(spent <= budget, "user {u} spent {spent}");
        for e in &ev {
            *runs
                .entry(e.request_id.split('/').next().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert!(
        runs.len() <= rounds,
        "{} run ids for {rounds} rounds",
        runs.len()
    );
    for out in outputs.iter().filter(|p| p.exists()) {
        for (user, rid, status, item) in read_rows(out) {
            if status == "recommended" {
                let e = l
                    .event(&user, &rid)
                    .unwrap()
                    .unwrap_or_else(|| panic!("{}: {rid} has no charge", out.display()));
                assert_eq!(e.user, user);
                assert_eq!(e.answer, Answer::Item(item));
            }
        }
    }
    runs
}

/// The durability test: `recommend --ledger` over 3,000 users (groups of 8, one fsync each) is
/// SIGKILLed at seeded random moments — at least 20 kills — and rerun until each round completes
/// (a round is one batch, `--run-id round<r>`; every attempt of it is the same command).
/// After every kill: every recommendation present in an output file has its charge in the
/// ledger, no user is over the budget, and no charge is counted twice (a rerun resumes the same
/// run, so its request ids replay). After each completed round the output has one row per user,
/// and the items are the ones stored with the charges; the third round (budget 2.5, ε = 1) is
/// all refusals.
#[test]
fn recommend_with_a_ledger_survives_sigkill_at_random_moments() {
    let tmp = tempfile::tempdir().unwrap();
    let n_users = 3000;
    let (model, users) = fixture(tmp.path(), n_users);
    let ledger = tmp.path().join("ledger.db");
    let budget = Units::budget("2.5").unwrap();
    let args = |out: &Path, ledger: &Path, run: &str| -> Vec<String> {
        [
            "recommend",
            "--model",
            model.to_str().unwrap(),
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--candidates",
            "popular:100",
            "--secure",
            "--users",
            users.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--create-ledger",
            "--budget",
            "2.5",
            "--period",
            "none",
            "--group",
            "8",
            "--run-id",
            run,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // How long one uninterrupted run takes here, on a scratch ledger.
    let t = Instant::now();
    let o = recsel()
        .args(args(
            &tmp.path().join("scratch.csv"),
            &tmp.path().join("scratch.db"),
            "scratch",
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Kill times are drawn against the fastest complete attempt seen so far.
    let mut full = t.elapsed();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let mut kills = 0;
    let mut mid_run = 0; // kills that left a round partly charged
    let mut outputs: Vec<PathBuf> = Vec::new();
    let mut round = 0;
    while round < 3 || kills < 20 {
        assert!(round < 8, "only {kills} kills in 8 rounds");
        round += 1;
        let out = tmp.path().join(format!("round{round}.csv"));
        outputs.push(out.clone());
        let mut done = false;
        for _ in 0..8 {
            let started = Instant::now();
            let mut child = recsel()
                .args(args(&out, &ledger, &format!("round{round}")))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let delay = full.mul_f64(rng.random_range(0.02..0.9));
            std::thread::sleep(delay);
            let _ = child.kill(); // SIGKILL (a no-op if it has exited)
            let status = child.wait().unwrap();
            // Whether the kill landed is what the exit status says, not whether it was sent.
            if status.signal() == Some(libc::SIGKILL) {
                kills += 1;
            } else {
                assert!(status.success(), "exit {status:?}");
                full = full.min(started.elapsed());
                done = true;
            }
            let runs = check(&ledger, &outputs, round, budget);
            let n = runs.get(&format!("round{round}")).copied().unwrap_or(0);
            if !done && n > 0 && n < n_users {
                mid_run += 1;
            }
            if done {
                break;
            }
        }
        if !done {
            let o = recsel()
                .args(args(&out, &ledger, &format!("round{round}")))
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            check(&ledger, &outputs, round, budget);
        }
        // The completed round: one row per user, from one run, consistent with the ledger.
        let rows = read_rows(&out);
        assert_eq!(rows.len(), n_users);
        let run: std::collections::HashSet<&str> = rows
            .iter()
            .map(|r| r.1.split('/').next().unwrap())
            .collect();
        assert_eq!(run.len(), 1, "round {round} used several run ids");
        let expect = if round <= 2 { "recommended" } else { "refused" };
        assert!(
            rows.iter().all(|r| r.2 == expect),
            "round {round}: {:?}",
            rows.iter().find(|r| r.2 != expect)
        );
        let l = SqliteLedger::open_existing(&ledger).unwrap();
        for (user, _, _, _) in rows.iter().step_by(97) {
            assert_eq!(l.events(user).unwrap().len(), round.min(2), "user {user}");
        }
    }
    eprintln!(
        "{kills} SIGKILLs over {round} rounds, {mid_run} of them with the round partly \
         charged; the fastest complete attempt took {:.2} s",
        full.as_secs_f64()
    );
    assert!(kills >= 20);
    assert!(
        mid_run >= 5,
        "only {mid_run} kills landed while charges were committing"
    );
}

/// Request ids from the users file: a user may make several requests; rerunning the same file
/// replays them (same items, nothing charged); a request id is scoped per user (another user's
/// `q3` is that user's own request), and an id reused with another history is rejected;
/// `ledger show`, `export` and `import` agree with what was charged; `--history` charges the
/// `--user` given; an exhausted user with a fallback gets it at 0 ε.
#[test]
fn request_ids_from_the_users_file_replay_and_the_ledger_commands_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, _) = fixture(tmp.path(), 1);
    let data = recsel::recommend::example_data().unwrap();
    let item = |j: usize| data.item_ids[j].clone();
    let jsonl = tmp.path().join("req.jsonl");
    std::fs::write(
        &jsonl,
        format!(
            "{{\"user\": \"a\", \"request_id\": \"q1\", \"items\": [\"{}\"]}}\n\
             {{\"user\": \"a\", \"request_id\": \"q2\", \"items\": [\"{}\"]}}\n\
             {{\"user\": \"b\", \"request_id\": \"q3\", \"items\": [\"{}\"]}}\n\
             {{\"user\": \"c\", \"request_id\": \"q3\", \"items\": [\"{}\"]}}\n",
            item(1),
            item(2),
            item(3),
            item(4)
        ),
    )
    .unwrap();
    let ledger = tmp.path().join("l.db");
    let m = model.to_str().unwrap();
    let l = ledger.to_str().unwrap();
    let run = |out: &str, extra: &[&str]| {
        let out = tmp.path().join(out);
        let mut a = vec![
            "recommend",
            "--model",
            m,
            "--mech",
            "gem",
            "--eps",
            "0.5",
            "--candidates",
            "popular:50",
            "--users",
        ];
        a.push(jsonl.to_str().unwrap());
        a.extend(["--out", out.to_str().unwrap(), "--ledger", l]);
        a.extend(extra);
        ok(&a);
        read_rows(&out)
    };
    let first = run(
        "1.csv",
        &["--create-ledger", "--budget", "1", "--period", "month"],
    );
    let status: Vec<&str> = first.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(
        status,
        ["recommended", "recommended", "recommended", "recommended"]
    );
    let second = run("2.csv", &[]);
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a, b, "a replay returns the stored answer");
    }
    let text = std::fs::read_to_string(tmp.path().join("2.csv")).unwrap();
    assert!(text.lines().skip(1).take(4).all(|l| l.ends_with(",true")));
    // The same request ids with b's history changed, as another run: b's q3 asks a different
    // question and is rejected (its stored item not shown); the others replay.
    let original = std::fs::read_to_string(&jsonl).unwrap();
    let changed = original.replacen(
        &format!("[\"{}\"]", item(3)),
        &format!("[\"{}\"]", item(6)),
        1,
    );
    assert_ne!(changed, original);
    std::fs::write(&jsonl, changed).unwrap();
    let third = run("3.csv", &["--run-id", "edited"]);
    let status: Vec<&str> = third.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(
        status,
        ["recommended", "recommended", "rejected", "recommended"]
    );
    assert_eq!(third[2].3, "", "a rejected row shows no item");
    std::fs::write(&jsonl, original).unwrap();
    // A third request for user a: the budget (1 = 2 × 0.5) is spent; the fallback is served.
    let fb = item(9);
    let o = ok(&[
        "recommend",
        "--model",
        m,
        "--mech",
        "gem",
        "--eps",
        "0.5",
        "--candidates",
        "popular:50",
        "--history",
        &item(5),
        "--ledger",
        l,
        "--user",
        "a",
        "--request-id",
        "q9",
        "--fallback",
        &format!("item:{fb}"),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), fb);
    let lg = SqliteLedger::open_existing(&ledger).unwrap();
    assert_eq!(lg.events("a").unwrap().len(), 3);
    assert_eq!(
        lg.balance("a", recsel::ledger::Timestamp::now())
            .unwrap()
            .remaining,
        Units::ZERO
    );
    let show =
        String::from_utf8(ok(&["ledger", "show", "--ledger", l, "--verify"]).stdout).unwrap();
    assert!(show.contains("1 eps per user per month"), "{show}");
    assert!(show.contains("a\t1\t0\t3"), "{show}");
    assert!(show.contains("b\t0.5\t0.5\t1"), "{show}");
    let exp = tmp.path().join("e.jsonl");
    ok(&[
        "ledger",
        "export",
        "--ledger",
        l,
        "--out",
        exp.to_str().unwrap(),
    ]);
    let l2 = tmp.path().join("l2.db");
    ok(&[
        "ledger",
        "import",
        "--ledger",
        l2.to_str().unwrap(),
        "--from",
        exp.to_str().unwrap(),
    ]);
    let exp2 = tmp.path().join("e2.jsonl");
    ok(&[
        "ledger",
        "export",
        "--ledger",
        l2.to_str().unwrap(),
        "--out",
        exp2.to_str().unwrap(),
    ]);
    // Without the header (its export time) and the trailer's checksum (over the header).
    let body = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(",\"sha256\"").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(body(&exp), body(&exp2));
    // Another budget on the same ledger is refused, naming both.
    let o = recsel()
        .args(["recommend", "--model", m, "--mech", "gem", "--eps", "0.5"])
        .args([
            "--users",
            jsonl.to_str().unwrap(),
            "--ledger",
            l,
            "--budget",
            "2",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1 eps per user per month") && err.contains("2 eps"),
        "{err}"
    );
    let counts: HashMap<String, usize> = lg
        .users()
        .unwrap()
        .into_iter()
        .map(|u| {
            let n = lg.events(&u).unwrap().len();
            (u, n)
        })
        .collect();
    assert_eq!(
        counts.get("b"),
        Some(&1),
        "the rejected request charged nothing"
    );
    assert_eq!(counts.get("c"), Some(&1), "c's q3 is c's own request");
}
