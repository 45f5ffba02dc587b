//! `recsel ledger init|show|export|import|migrate`: create, inspect, move and migrate a privacy
//! ledger (docs/ledger.md).

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use recsel::io::write_atomic;
use recsel::ledger::{self, export, Answer, Period, Timestamp, Units};

/// Create, inspect, export and import a privacy ledger.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel ledger init --ledger budget.db --budget 2 --period day   # a new ledger, before serving
  recsel ledger show --ledger budget.db                  # every user: spent, remaining, events
  recsel ledger show --ledger budget.db --user u42       # one user's balance and event log
  recsel ledger export --ledger budget.db --out budget.jsonl
  recsel ledger import --ledger restored.db --from budget.jsonl
  recsel ledger migrate --ledger budget.db               # an older ledger to this version")]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Create a new ledger with its budget and period (an error if one is there already).
    /// `recsel serve` and `recsel recommend --ledger` charge only an existing ledger unless given
    /// --create-ledger.
    Init {
        /// The ledger: a file (must not exist) or a postgres:// URL (a database without one).
        #[arg(long, value_name = "FILE|URL")]
        ledger: String,
        /// ε each user may spend per period (decimal, rounded down to 10^-9).
        #[arg(long, value_name = "EPS")]
        budget: String,
        /// The budget's window (UTC calendar): day, week, month or none (the ledger's life;
        /// the default).
        #[arg(long, value_name = "PERIOD")]
        period: Option<Period>,
    },
    /// Settings, and per user the spent and remaining budget in the current window and the
    /// number of events; with --user, that user's event log.
    Show {
        /// The ledger file.
        #[arg(long, value_name = "FILE")]
        ledger: PathBuf,
        /// Show this user's events.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// The instant whose window is shown (RFC 3339 UTC or a date; default: now).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Also recompute every window's total from the events and check it.
        #[arg(long)]
        verify: bool,
    },
    /// The whole log as JSON lines (header, one line per event, trailer; docs/ledger.md).
    Export {
        /// The ledger file.
        #[arg(long, value_name = "FILE")]
        ledger: PathBuf,
        /// Write here (atomically) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Also seal the export with an HMAC-SHA256 under the key in this file (at least 16
        /// bytes; surrounding whitespace ignored): only a holder of the key can make an export
        /// that `import --hmac-key-file` accepts.
        #[arg(long, value_name = "FILE")]
        hmac_key_file: Option<PathBuf>,
    },
    /// Verify an export and load it into a new (or empty) ledger with the export's settings.
    Import {
        /// The ledger file to fill.
        #[arg(long, value_name = "FILE")]
        ledger: PathBuf,
        /// The export.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// Require the export's HMAC under the key in this file, and check it.
        #[arg(long, value_name = "FILE")]
        hmac_key_file: Option<PathBuf>,
        /// Import an export whose content checksum does not match (a deliberate edit, such as
        /// a new budget in the header); every other check still runs. Not with --hmac-key-file.
        #[arg(long, conflicts_with = "hmac_key_file")]
        accept_edits: bool,
    },
    /// Migrate a ledger written by an older recsel to this version's schema, in one transaction
    /// (every other command refuses an older ledger and names this one). Back it up first: an
    /// older recsel cannot open it afterwards.
    Migrate {
        /// The ledger: a file or a postgres:// URL.
        #[arg(long, value_name = "FILE|URL")]
        ledger: String,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Init {
            ledger,
            budget,
            period,
        } => {
            let budget = Units::budget(&budget).with_context(|| format!("budget '{budget}'"))?;
            let l = ledger::create(&ledger, budget, period)?;
            eprintln!("[ledger] created {}: {}", l.location(), l.settings());
            history_key_beside(&ledger)?;
        }
        Sub::Show {
            ledger,
            user,
            at,
            verify,
        } => {
            let at = match at {
                Some(t) => Timestamp::parse(&t)?,
                None => Timestamp::now(),
            };
            if verify {
                let n = ledger::open_existing(&ledger)?.verify()?;
                eprintln!("[ledger] verified: {n} windows, every running total equals its events");
            }
            let l = ledger::open_existing(&ledger)?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "ledger {}: {}", l.location(), l.settings())?;
            let window = l.settings().period.window(at);
            writeln!(out, "window: {window}")?;
            match user {
                Some(u) => {
                    let b = l.balance(&u, at)?;
                    writeln!(
                        out,
                        "user {u}: spent {}, remaining {}",
                        b.spent, b.remaining
                    )?;
                    writeln!(out, "seq\ttime\trequest_id\tmechanism\tepsilon\tanswer")?;
                    for e in l.log().events(&u)? {
                        let answer = match &e.answer {
                            Answer::Item(i) => format!("item {i}"),
                            Answer::List(l) => format!("list {}", l.join(" ")),
                            Answer::NoCandidate => "no candidate".into(),
                            Answer::Fallback(i) => format!("fallback {i}"),
                        };
                        writeln!(
                            out,
                            "{}\t{}\t{}\t{}\t{}\t{answer}",
                            e.seq, e.time, e.request_id, e.mechanism, e.units
                        )?;
                    }
                }
                None => {
                    writeln!(out, "user\tspent\tremaining\tevents")?;
                    for u in l.log().users()? {
                        let b = l.balance(&u, at)?;
                        let n = l.log().events(&u)?.len();
                        writeln!(out, "{u}\t{}\t{}\t{n}", b.spent, b.remaining)?;
                    }
                }
            }
        }
        Sub::Export {
            ledger,
            out,
            hmac_key_file,
        } => {
            let key = hmac_key_file.as_deref().map(read_key).transpose()?;
            let seal = export::Seal {
                key: key.as_deref(),
                accept_edits: false,
            };
            let l = ledger::open_existing(&ledger)?;
            let summary = match &out {
                Some(path) => {
                    let mut buf = Vec::new();
                    let s = export::export_sealed(&*l, &mut buf, seal)?;
                    write_atomic(path, &buf)
                        .with_context(|| format!("writing {}", path.display()))?;
                    s
                }
                None => export::export_sealed(&*l, &mut std::io::stdout().lock(), seal)?,
            };
            eprintln!(
                "[ledger] exported {} events, {} eps in total",
                summary.events, summary.units
            );
        }
        Sub::Import {
            ledger,
            from,
            hmac_key_file,
            accept_edits,
        } => {
            let key = hmac_key_file.as_deref().map(read_key).transpose()?;
            let seal = export::Seal {
                key: key.as_deref(),
                accept_edits,
            };
            let file = std::fs::File::open(&from)
                .with_context(|| format!("opening {}", from.display()))?;
            let verified =
                export::read_sealed(&mut BufReader::new(file), &from.display().to_string(), seal)?;
            if verified.unchecked_hmac {
                eprintln!(
                    "[ledger] warning: {} was sealed with an HMAC key (hmac_sha256 in its \
                     trailer), and it is imported without one: only its SHA-256 was checked, \
                     which anyone who edits the file can recompute. Import with \
                     --hmac-key-file to check the seal",
                    from.display()
                );
            }
            let l = ledger::open(&ledger.to_string_lossy(), verified.settings)?;
            let s = export::import(&*l, &verified)?;
            eprintln!(
                "[ledger] imported {} events ({} eps in total) into {}: {}",
                s.events,
                s.units,
                ledger.display(),
                verified.settings
            );
        }
        Sub::Migrate { ledger } => {
            let m = ledger::migrate(&ledger)?;
            if m.from == m.to {
                eprintln!(
                    "[ledger] {} is at schema version {} already; nothing changed",
                    m.location, m.to
                );
            } else {
                eprintln!(
                    "[ledger] migrated {} from schema version {} to {}: {} events kept (those \
                     stored before have no request hash: the unkeyed hashes are erased, their \
                     replays are not checked, and a list for one of their histories is charged \
                     again; docs/ledger.md, \"The history key\")",
                    m.location, m.from, m.to, m.events
                );
            }
            history_key_beside(&ledger)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// For a ledger file, its history key beside it (`LEDGER.history-key`), made now (mode 0600)
/// if it is not there; a PostgreSQL ledger's key is the operator's file (`--history-key-file`).
fn history_key_beside(spec: &str) -> anyhow::Result<()> {
    if let ledger::Location::Sqlite(p) = ledger::Location::parse(spec) {
        let beside = ledger::HistoryKey::beside(&p);
        if !beside.exists() {
            let k = ledger::HistoryKey::create(&beside)?;
            eprintln!(
                "[ledger] made the history key {} (id {}, mode 0600): the secret of the \
                 ledger's request hashes; keep it with the ledger, never inside it",
                beside.display(),
                k.id()
            );
        }
    }
    Ok(())
}

/// The operator's HMAC key ([`export::read_key_file`]).
fn read_key(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    Ok(export::read_key_file(path)?)
}
