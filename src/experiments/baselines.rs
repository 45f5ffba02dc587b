//! The free baselines beside `recsel select`'s mechanisms (docs/utility.md): hit@1 of the most
//! popular training item shown to everyone, of items drawn by training popularity, of the best
//! fixed item of the calibration users, and of the model's own top candidate (ε = ∞, not
//! private), each with its standard error over the run's users; the limit
//! `min(1, e^ε × best fixed item)`; and per ε whether the best ε-DP mechanism beats the best public
//! baseline (paired over users).

use std::fmt::Write as _;

use rayon::prelude::*;
use serde::Serialize;

use crate::mechanisms::{self, Guarantee};
use crate::scoring::UserScorer;

use super::select::{SelectConfig, UserRow};

/// One baseline's hit@1 per user of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// `popular`, `popular-sampled`, `best-fixed` or `top-1`.
    pub name: String,
    /// What it is, for people.
    pub label: String,
    /// Whether it is 0-DP (the three public ones) or not private (`top-1`).
    pub private: bool,
    /// Mean hit@1.
    pub hit: f64,
    /// Its standard error.
    pub se: f64,
    /// hit@1 per scored user (the scorer's order).
    #[serde(skip)]
    pub per_user: Vec<f64>,
}

/// The baselines of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baselines {
    /// Popular, popular-sampled, best fixed, top-1.
    pub rows: Vec<Baseline>,
    /// The hit rate of the best fixed item in-sample on the run's users (the limit's base).
    pub best_fixed_in_sample: f64,
    /// Where the best fixed item was estimated: `calibration users' held-out items`, or the
    /// training users' items when the split has no calibration users.
    pub best_fixed_source: String,
}

/// Mean and standard error over users.
fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n.max(1.0);
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

/// Computes the baselines for every user of `scorer` under `cfg`'s candidate policy:
/// `popularity` ranks the training items; `calibration` (held-out counts per item of users who
/// are neither fitted nor evaluated) picks the best fixed item, or `None` to fall back on
/// `popularity`'s top item (and say so).
pub fn select_baselines<S: UserScorer>(
    scorer: &S,
    cfg: &SelectConfig,
    popularity: &[u64],
    calibration: Option<&[u64]>,
) -> Baselines {
    let n = scorer.n_items();
    let argmax = |c: &[u64]| (0..c.len()).fold(0, |b, j| if c[j] > c[b] { j } else { b }) as u32;
    let popular = argmax(popularity);
    let best_fixed = calibration.map_or(popular, argmax);
    let total = popularity.iter().map(|&c| c as f64).sum::<f64>().max(1.0);
    let users: Vec<[f64; 4]> = (0..scorer.n_users())
        .into_par_iter()
        .map_init(
            || (vec![0.0; n], scorer.scratch()),
            |(buf, scratch), u| {
                let t = scorer.targets(u);
                let hit = |j: u32| f64::from(u8::from(t.binary_search(&j).is_ok()));
                scorer.score(u, buf, scratch);
                let top = cfg
                    .candidate_items(buf, scorer.excluded(u))
                    .first()
                    .map_or(0.0, |&j| hit(j));
                [
                    hit(popular),
                    t.iter()
                        .map(|&j| popularity[j as usize] as f64)
                        .sum::<f64>()
                        / total,
                    hit(best_fixed),
                    top,
                ]
            },
        )
        .collect();
    let mut counts = vec![0u64; n];
    for u in 0..scorer.n_users() {
        for &j in scorer.targets(u) {
            counts[j as usize] += 1;
        }
    }
    let names = [
        (
            "popular",
            "popular (the most popular training item to everyone)",
            true,
        ),
        (
            "popular-sampled",
            "popular-sampled (drawn by training popularity)",
            true,
        ),
        ("best-fixed", "best fixed item", true),
        (
            "top-1",
            "non-private top-1 of the model (NOT private)",
            false,
        ),
    ];
    let rows = names
        .iter()
        .enumerate()
        .map(|(i, &(name, label, private))| {
            let per_user: Vec<f64> = users.iter().map(|r| r[i]).collect();
            let (hit, se) = mean_se(&per_user);
            Baseline {
                name: name.into(),
                label: label.into(),
                private,
                hit,
                se,
                per_user,
            }
        })
        .collect();
    Baselines {
        rows,
        best_fixed_in_sample: counts.iter().copied().max().unwrap_or(0) as f64
            / scorer.n_users().max(1) as f64,
        best_fixed_source: if calibration.is_some() {
            "calibration users".into()
        } else {
            "training users: no calibration users in this split".into()
        },
    }
}

impl Baselines {
    /// The best public (0-DP) baseline.
    pub fn best_public(&self) -> &Baseline {
        // The first of equals: `popular` before the others.
        self.rows
            .iter()
            .filter(|b| b.private)
            .fold(None::<&Baseline>, |best, b| match best {
                Some(x) if x.hit >= b.hit => Some(x),
                _ => Some(b),
            })
            .expect("three public baselines")
    }

    /// `select`'s summary of the baselines: a grid in the layout of the mechanisms' grids (one
    /// row per baseline, constant over ε, and the limit `min(1, e^ε × best fixed item)` per ε),
    /// a line with the standard errors, and per ε the best ε-DP mechanism's paired difference
    /// to the best public baseline.
    pub fn summary(&self, cfg: &SelectConfig, rows: &[UserRow]) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "\n{:<13} {:>12}",
            "hit@1, free",
            format!("guar. k={}", cfg.top)
        );
        for e in &cfg.epsilons {
            let _ = write!(s, " {:>9}", format!("eps={e}"));
        }
        s.push('\n');
        let short = |r: &Baseline| match r.name.as_str() {
            "popular-sampled" => "pop-sampled".to_string(),
            "best-fixed" => "best fixed".to_string(),
            n if !r.private => format!("{n} (NP)"),
            n => n.to_string(),
        };
        let mut row = |name: &str, guarantee: &str, cell: &dyn Fn(f64) -> f64| {
            let _ = write!(s, "{name:<13} {guarantee:>12}");
            for &e in &cfg.epsilons {
                let _ = write!(s, " {:>9.4}", cell(e));
            }
            s.push('\n');
        };
        for r in &self.rows {
            let guarantee = if r.private { "0" } else { "NOT private" };
            row(&short(r), guarantee, &|_| r.hit);
        }
        let fixed = self.best_fixed_in_sample;
        row("limit", "e^eps*fixed", &|e| (e.exp() * fixed).min(1.0));
        let se: Vec<String> = self
            .rows
            .iter()
            .map(|r| format!("{} {:.4}", short(r), r.se))
            .collect();
        let _ = writeln!(
            s,
            "(s.e.: {}; best fixed from the {}; limit = min(1, e^eps × best fixed item \
             {fixed:.4}) over the evaluated users; NP: not private)",
            se.join(", "),
            self.best_fixed_source
        );
        let best = self.best_public();
        let ne = cfg.epsilons.len();
        let scope = match &cfg.candidates {
            Some(p) if p.policy.history_independent() => "",
            _ => " (candidates depend on the history: NOT user-level private)",
        };
        let _ = write!(
            s,
            "best eps-DP mechanism{scope} against {} (paired):",
            best.name
        );
        for (e, &eps) in cfg.epsilons.iter().enumerate() {
            let mut top: Option<(String, f64, f64)> = None;
            for (m, name) in cfg.mechanisms.iter().enumerate() {
                let pure = mechanisms::build(name, &cfg.params.with_epsilon(eps))
                    .map(|m| matches!(m.guarantee(), Guarantee::Pure { .. }))
                    .unwrap_or(false);
                if !pure || name == "random" {
                    continue;
                }
                let diff: Vec<f64> = rows
                    .iter()
                    .map(|r| r.hit[m * ne + e] - best.per_user[r.user as usize])
                    .collect();
                let (d, se) = mean_se(&diff);
                if top.as_ref().is_none_or(|t| d > t.1) {
                    top = Some((name.to_string(), d, se));
                }
            }
            match top {
                Some((name, d, se)) => {
                    let verdict = if d > 2.0 * se && d > 0.0 {
                        "beats"
                    } else if d < -2.0 * se && d < 0.0 {
                        "below"
                    } else {
                        "within noise"
                    };
                    let _ = write!(s, " eps={eps} {name} {d:+.4} ± {se:.4} ({verdict});");
                }
                None => {
                    let _ = write!(s, " eps={eps} none;");
                }
            }
        }
        s.push('\n');
        s
    }
}

/// `select`'s baselines ([`select_baselines`]), written as `baselines.json` into `out`; returns
/// them and the file's path. The one step both the command line and the Python binding take
/// after `select` has run, before its summary lists the files written ([`add_to_summary`]).
pub fn write_baselines<S: UserScorer>(
    scorer: &S,
    cfg: &SelectConfig,
    popularity: &[u64],
    calibration: Option<&[u64]>,
    out: &std::path::Path,
) -> crate::error::Result<(Baselines, std::path::PathBuf)> {
    let b = select_baselines(scorer, cfg, popularity, calibration);
    let bytes = serde_json::to_vec_pretty(&b)
        .map_err(|e| crate::error::Error::Invalid(format!("serialising the baselines: {e}")))?;
    let path = out.join("baselines.json");
    crate::io::write_atomic(&path, &bytes)?;
    Ok((b, path))
}

/// The baselines `b` added to `select`'s printed summary `text` — right after the hit@1 grid,
/// or before the list of files written — unless `json`.
pub fn add_to_summary(
    b: &Baselines,
    cfg: &SelectConfig,
    rows: &[UserRow],
    text: String,
    json: bool,
) -> String {
    if json {
        return text;
    }
    let lines = b.summary(cfg, rows);
    // Right after the hit@1 grid when it is printed, else before the list of files written.
    let at = match text.find("\n(hit@1: ") {
        Some(at) => text[at + 1..].find('\n').map(|e| at + 2 + e),
        None => text.find("\nwrote ").map(|at| at + 1),
    };
    match at {
        Some(at) => {
            let mut t = text;
            t.insert_str(at, &lines);
            t
        }
        None => text + &lines,
    }
}
