//! Neighbouring input pairs for the audit: validated pairs, the built-in adversarial families and
//! pairs read from a file.

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mechanisms::Problem;
use crate::rng::Streams;

/// Two score vectors over the same candidates with `|q_a − q'_a| ≤ Δ_a` for every a.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourPair {
    /// A name for reports.
    pub label: String,
    /// Sensitivities Δ (finite, > 0).
    pub sens: Vec<f64>,
    /// Scores on the first input.
    pub q: Vec<f64>,
    /// Scores on the neighbouring input.
    pub q2: Vec<f64>,
}

impl NeighbourPair {
    /// Validates both problems and the neighbour condition (up to a relative 1e-12 rounding slack).
    pub fn new(
        label: impl Into<String>,
        sens: Vec<f64>,
        q: Vec<f64>,
        q2: Vec<f64>,
    ) -> Result<Self> {
        let pair = NeighbourPair {
            label: label.into(),
            sens,
            q,
            q2,
        };
        pair.validate()?;
        Ok(pair)
    }

    fn validate(&self) -> Result<()> {
        let ctx = |m: String| Error::Invalid(format!("pair '{}': {m}", self.label));
        Problem::new(&self.q, &self.sens).map_err(|e| ctx(format!("q: {e}")))?;
        Problem::new(&self.q2, &self.sens).map_err(|e| ctx(format!("q2: {e}")))?;
        for (a, ((x, y), d)) in self.q.iter().zip(&self.q2).zip(&self.sens).enumerate() {
            if (x - y).abs() > d * (1.0 + 1e-12) {
                return Err(ctx(format!(
                    "not neighbours: candidate {a} moves by {} > its sensitivity {d}",
                    (x - y).abs()
                )));
            }
        }
        Ok(())
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Always false: a validated pair has candidates.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// A tiny sensitivity standing in for "Δ → 0" of the docs/mechanisms.md counterexamples.
pub const TINY: f64 = 1e-6;

/// The built-in adversarial pairs around the base problem `(q, sens)`:
/// * `up-o` / `down-o` for each candidate o: o moves up by Δ_o and every other candidate down by its
///   Δ (and the reverse);
/// * `high-up` / `low-up`: only the candidates with sensitivity above / at most the median move up;
/// * `random-i`: four pairs drawn uniformly within the box `|q_a − q'_a| ≤ Δ_a`;
/// * the counterexamples of docs/mechanisms.md: `rnmh-2cand` (Δ_1 tiny, q_2 = ±1/2), `rnmh-laplace-k5` (the
///   (k−1)ε construction with k = 5), `rs-exp-appB` (seed 001 appendix B with k = 20) and
///   `bot-exp-2cand` (best-of-T without random stopping, docs/mechanisms.md).
pub fn builtin_pairs(q: &[f64], sens: &[f64], seed: u64) -> Result<Vec<NeighbourPair>> {
    Problem::new(q, sens)?;
    let k = q.len();
    let mut out = Vec::new();
    for o in 0..k {
        for (name, sign) in [("up", 1.0), ("down", -1.0)] {
            let q2 = (0..k)
                .map(|a| q[a] + if a == o { sign } else { -sign } * sens[a])
                .collect();
            out.push(NeighbourPair::new(
                format!("{name}-{o}"),
                sens.to_vec(),
                q.to_vec(),
                q2,
            )?);
        }
    }
    let mut sorted = sens.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[(k - 1) / 2];
    for (name, high) in [("high-up", true), ("low-up", false)] {
        let q2: Vec<f64> = (0..k)
            .map(|a| {
                q[a] + if (sens[a] > median) == high {
                    sens[a]
                } else {
                    0.0
                }
            })
            .collect();
        if q2 != q {
            out.push(NeighbourPair::new(name, sens.to_vec(), q.to_vec(), q2)?);
        }
    }
    let mut rng = Streams::new(seed).derive(0xa0d1).stream(0, 0, 0, 0);
    for i in 0..4 {
        let q2 = (0..k)
            .map(|a| q[a] + (2.0 * rng.random::<f64>() - 1.0) * sens[a])
            .collect();
        out.push(NeighbourPair::new(
            format!("random-{i}"),
            sens.to_vec(),
            q.to_vec(),
            q2,
        )?);
    }
    out.extend(counterexamples()?);
    Ok(out)
}

/// The counterexample pairs of docs/mechanisms.md (seed 001 §IV-A and appendices A–B).
pub fn counterexamples() -> Result<Vec<NeighbourPair>> {
    let mut sens5 = vec![1.0; 5];
    sens5[0] = TINY;
    let mut sens20 = vec![1.0; 20];
    sens20[0] = TINY;
    let mut q20b = vec![0.0; 20];
    q20b[0] = 1.0;
    Ok(vec![
        NeighbourPair::new(
            "rnmh-2cand",
            vec![TINY, 1.0],
            vec![0.0, 0.5],
            vec![0.0, -0.5],
        )?,
        NeighbourPair::new(
            "rnmh-laplace-k5",
            sens5,
            vec![0.0; 5],
            vec![0.0, 1.0, 1.0, 1.0, 1.0],
        )?,
        NeighbourPair::new("rs-exp-appB", sens20, vec![1.0; 20], q20b)?,
        // bot-exp: without random stopping, candidate 0 wins on q only when every draw is
        // candidate 0 (docs/mechanisms.md, "Random stopping").
        NeighbourPair::new(
            "bot-exp-2cand",
            vec![TINY, 1.0],
            vec![0.0, 0.001],
            vec![0.0, -0.999],
        )?,
    ])
}

/// Reads pairs from a JSON file: an array of `{"label", "sens", "q", "q2"}` objects. Errors name
/// the file and the offending pair.
pub fn read_pairs(path: &std::path::Path) -> Result<Vec<NeighbourPair>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let pairs: Vec<NeighbourPair> = serde_json::from_str(&text).map_err(|e| Error::Parse {
        context: format!("{} line {} column {}", path.display(), e.line(), e.column()),
        message: e.to_string(),
    })?;
    if pairs.is_empty() {
        return Err(Error::Invalid(format!("{}: no pairs", path.display())));
    }
    for (i, p) in pairs.iter().enumerate() {
        p.validate().map_err(|e| Error::Parse {
            context: format!("{} pair {}", path.display(), i + 1),
            message: e.to_string(),
        })?;
    }
    Ok(pairs)
}
