//! The shared ledger on a real PostgreSQL that the test starts on loopback (Debian's package,
//! `initdb` and `pg_ctl` into a temporary directory, a free port) and stops at the end: the same
//! decisions as the embedded store, two ledgers (replicas) racing for one user's last units, and
//! two `recsel serve` processes sharing one database. Without PostgreSQL the test fails under CI
//! and prints SKIPPED otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use recsel::ledger::{
    self, Answer, ChargeRequest, GroupCommitter, Ledger, LedgerLog, Outcome, Period,
    PostgresLedger, Settings, Timestamp, Units,
};

use crate::util::http::{args, simultaneous, Server};
use crate::util::missing_prerequisite;

/// A PostgreSQL server in a temporary directory, stopped when dropped.
pub struct Pg {
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<String>,
    pub port: u16,
    _dir: tempfile::TempDir,
}

fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("pg_ctl").is_file() && p.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop().or_else(|| {
        let out = Command::new("sh")
            .args(["-c", "command -v pg_ctl"])
            .output()
            .ok()?;
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        p.parent()
            .map(Path::to_path_buf)
            .filter(|d| d.join("initdb").is_file())
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Pg {
    /// Starts a server, or returns `None` after reporting the missing prerequisite.
    pub fn start(test: &str) -> Option<Pg> {
        let Some(bin) = pg_bin() else {
            missing_prerequisite(
                test,
                "PostgreSQL's initdb and pg_ctl not found (apt-get install -y postgresql; .ci/run \
                 installs it)",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // PostgreSQL refuses to run as root: then run it as the package's `postgres` user.
        // SAFETY: geteuid has no preconditions.
        let run_as = (unsafe { libc::geteuid() } == 0).then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            let ok = Command::new("chown")
                .args([user.as_str(), dir.path().to_str().unwrap()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown {user} {}", dir.path().display());
        }
        let data = dir.path().join("data");
        let port = free_port();
        let pg = Pg {
            bin,
            data,
            run_as,
            port,
            _dir: dir,
        };
        let out = pg.run(
            "initdb",
            &[
                "-D",
                pg.data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "recsel",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sock = pg.data.parent().unwrap().to_str().unwrap().to_string();
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={sock} -c fsync=on"
        );
        let log = pg.data.parent().unwrap().join("log");
        let out = pg.run(
            "pg_ctl",
            &[
                "-D",
                pg.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Some(pg)
    }

    fn run(&self, tool: &str, args: &[&str]) -> std::process::Output {
        let exe = self.bin.join(tool);
        let mut c = match &self.run_as {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        c.args(args).current_dir("/").output().unwrap()
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://recsel@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `db`.
    pub fn create_db(&self, db: &str) {
        let mut c = postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }
}

fn charge(user: &str, rid: &str, eps: &str) -> ChargeRequest {
    ChargeRequest {
        user: user.into(),
        request_id: rid.into(),
        request_hash: ledger::RequestHash::of(&[user.as_bytes(), rid.as_bytes()]),
        mechanism: "mgem".into(),
        epsilon: Units::charge(eps).unwrap(),
        time: Timestamp::from_date(2026, 11, 25),
        answer: Answer::Item(format!("item-of-{rid}")),
        fallback: None,
        once_per_history: false,
    }
}

#[test]
fn postgres_ledger_decides_like_the_embedded_one_and_replicas_cannot_overspend() {
    let test = "postgres_ledger_decides_like_the_embedded_one_and_replicas_cannot_overspend";
    let Some(pg) = Pg::start(test) else {
        return;
    };
    let settings = Settings {
        budget: Units::budget("1").unwrap(),
        period: Period::Day,
    };
    // Integer units: ten charges of 0.1 exhaust 1.0 exactly; the eleventh is refused.
    pg.create_db("decide");
    let l = PostgresLedger::open(&pg.url("decide"), settings).unwrap();
    let reqs: Vec<ChargeRequest> = (0..11)
        .map(|i| charge("u1", &format!("r{i}"), "0.1"))
        .collect();
    let out = l.charge(&reqs).unwrap();
    assert!(
        out[..10]
            .iter()
            .all(|o| matches!(o, Outcome::Charged { .. })),
        "{out:?}"
    );
    match &out[10] {
        Outcome::Refused {
            remaining,
            retry_after,
            ..
        } => {
            assert_eq!(*remaining, Units::ZERO);
            assert_eq!(*retry_after, Some(Timestamp::from_date(2026, 11, 26)));
        }
        o => panic!("{o:?}"),
    }
    // A replay returns the stored answer; the same id with another request hash is rejected
    // and charges nothing; another user's request with the id is that user's own (ids are
    // scoped per user); a fallback costs 0.
    let again = l.charge(&[charge("u1", "r3", "0.1")]).unwrap();
    assert!(
        matches!(&again[0], Outcome::Replayed { event } if event.answer == Answer::Item("item-of-r3".into()))
    );
    let mut different = charge("u1", "r3", "0.1");
    different.request_hash = ledger::RequestHash::of(&[b"another history"]);
    let o = l.charge(&[different]).unwrap();
    assert_eq!(
        o[0],
        Outcome::Rejected {
            reason: ledger::Rejection::DifferentRequest
        }
    );
    let other = l.charge(&[charge("u2", "r3", "0.1")]).unwrap();
    assert!(matches!(other[0], Outcome::Charged { .. }), "{other:?}");
    let mut fb = charge("u1", "r-fb", "0.1");
    fb.fallback = Some("popular-1".into());
    assert!(
        matches!(&l.charge(&[fb]).unwrap()[0], Outcome::Fallback { item, .. } if item == "popular-1")
    );
    assert_eq!(
        l.balance("u1", Timestamp::from_date(2026, 11, 25))
            .unwrap()
            .remaining,
        Units::ZERO
    );
    assert_eq!(l.events("u1").unwrap().len(), 11);
    l.verify().unwrap();
    // Reopening with other settings is an error naming both.
    let other_settings = Settings {
        budget: Units::budget("2").unwrap(),
        period: Period::Day,
    };
    let e = PostgresLedger::open(&pg.url("decide"), other_settings)
        .unwrap_err()
        .to_string();
    assert!(e.contains("budget"), "{e}");
    // Export from PostgreSQL, import into an empty embedded ledger: the same events.
    let mut buf = Vec::new();
    ledger::export::export(&l, &mut buf).unwrap();
    let verified = ledger::export::read(&mut buf.as_slice(), "export").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let sq = ledger::open(tmp.path().join("copy.db").to_str().unwrap(), settings).unwrap();
    ledger::export::import(&*sq, &verified).unwrap();
    assert_eq!(sq.log().events("u1").unwrap(), l.events("u1").unwrap());
    drop(l);

    // Two replicas (two ledgers on one database), 8 threads each, 100 requests of one user whose
    // budget allows 10: exactly 10 charged.
    pg.create_db("race");
    let a: Arc<dyn Ledger> = Arc::new(PostgresLedger::open(&pg.url("race"), settings).unwrap());
    let b: Arc<dyn Ledger> = Arc::new(PostgresLedger::open(&pg.url("race"), settings).unwrap());
    let committers = [
        Arc::new(GroupCommitter::new(Arc::clone(&a), 16)),
        Arc::new(GroupCommitter::new(Arc::clone(&b), 16)),
    ];
    let handles: Vec<_> = (0..16)
        .map(|t| {
            let c = Arc::clone(&committers[t % 2]);
            std::thread::spawn(move || {
                let reqs = (0..100)
                    .filter(|i| i % 16 == t)
                    .map(|i| charge("eve", &format!("e{i}"), "0.1"))
                    .collect();
                c.charge(reqs).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<Outcome> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let charged = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Charged { .. }))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Refused { .. }))
        .count();
    eprintln!("two ledgers on one PostgreSQL, 16 threads: {charged} charged, {refused} refused");
    assert_eq!((charged, refused), (10, 90));
    drop(committers);

    // Two `recsel serve` processes sharing one database: 100 simultaneous requests of one user,
    // spread over both, whose budget allows 10 → exactly 10 answered and 90 refused.
    pg.create_db("serve");
    let url = pg.url("serve");
    let s1 = Server::start(&args(&url, "10", &["--period", "day"]));
    let s2 = Server::start(&args(&url, "10", &["--period", "day"]));
    s1.wait_ready(Duration::from_secs(30));
    s2.wait_ready(Duration::from_secs(30));
    let replies = simultaneous(&[s1.addr, s2.addr], 100, "frank");
    let ok = replies.iter().filter(|r| r.status == 200).count();
    let refused = replies.iter().filter(|r| r.status == 429).count();
    eprintln!(
        "two servers sharing PostgreSQL: 100 simultaneous requests of one user, budget for 10: \
         {ok} answered, {refused} refused"
    );
    assert_eq!(
        (ok, refused),
        (10, 90),
        "{:?}",
        replies
            .iter()
            .map(|r| (r.status, r.body.clone()))
            .filter(|r| r.0 != 429)
            .collect::<Vec<_>>()
    );
    assert_eq!(s1.terminate().code(), Some(0));
    assert_eq!(s2.terminate().code(), Some(0));
    let check = PostgresLedger::open(
        &url,
        Settings {
            budget: Units::budget("10").unwrap(),
            period: Period::Day,
        },
    )
    .unwrap();
    check.verify().unwrap();
    assert_eq!(check.events("frank").unwrap().len(), 10);
    // `recsel ledger export` reads the shared ledger too (backups of a replicated service).
    let out = Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(["ledger", "export", "--ledger", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let verified = ledger::export::read(&mut text.as_bytes(), "export").unwrap();
    assert_eq!(verified.events.len(), 10);
    // The batch command creates and charges a shared ledger as it does a file (one `open` for
    // both backends): budget 2 at eps 1 answers twice per user, and a rerun replays.
    pg.create_db("batch");
    let url = pg.url("batch");
    let ids = crate::util::http::item_ids();
    let users = tmp.path().join("users.csv");
    let mut csv = String::from("user,item\n");
    for u in 0..5 {
        csv.push_str(&format!("u{u},{}\nu{u},{}\n", ids[u], ids[u + 10]));
    }
    std::fs::write(&users, csv).unwrap();
    let model = crate::util::http::model_dir().to_str().unwrap();
    let batch = |run: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_recsel"))
            .args([
                "recommend",
                "--model",
                model,
                "--mech",
                "mgem",
                "--eps",
                "1",
            ])
            .args([
                "--ledger",
                &url,
                "--history-key-file",
                crate::util::http::history_key_file().to_str().unwrap(),
                "--create-ledger",
                "--budget",
                "2",
                "--run-id",
                run,
                "--users",
            ])
            .arg(&users)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let first = batch("a");
    assert_eq!(first.matches(",recommended,").count(), 5, "{first}");
    assert_eq!(batch("a").matches(",true").count(), 5, "a rerun replays");
    batch("b");
    let third = batch("c");
    assert_eq!(third.matches(",refused,").count(), 5, "{third}");
    let shared = PostgresLedger::open_existing(&url).unwrap();
    shared.verify().unwrap();
    assert_eq!(shared.users().unwrap().len(), 5);
}
