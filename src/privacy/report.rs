//! One privacy report per release (docs/privacy-report.md): for every population a release
//! learned from or serves — training users, calibration users, served users — each part of the
//! release that touches it with its unit, ε, δ and mechanism, whatever is not differentially
//! private named as such, and the composition within each population.
//!
//! `recsel fit --out` writes the release-time report as `privacy.json` (its size and CRC-32 are in
//! `release.json`, so an edited report is refused at load); at load the tuning entry of
//! `tuning.json` is added, and a `recommend::Recommender` adds what each served
//! recommendation and each ledger period guarantee. `recsel privacy`, `recsel recommend`,
//! `recsel serve` (start-up and `GET /v1/model`) and Python all print this one value.
//!
//! Composition is never summed across populations: each population has its own guarantee. Within
//! one population the ε and δ of its parts add up (basic composition; the parts are computed
//! from the same users' data independently), and a part that is not DP makes the population
//! unprotected.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Population, PopulationPrivacy};
use crate::error::{Error, Result};

/// The report's file name in a model directory.
pub const PRIVACY: &str = "privacy.json";
/// The report's `format` field.
pub const FORMAT: &str = "recsel-privacy";
/// The report's layout version.
pub const VERSION: u32 = 1;
/// The part of a DP fit's private choice of its λ shift among a grid fitted from one noisy
/// Gram matrix (docs/training-privacy.md, "A private choice of the shift"): its population is
/// the calibration users.
pub const SHIFT_CHOICE: &str = "dp shift choice";
/// The part of a release's model weights.
pub const MODEL_WEIGHTS: &str = "model weights";

/// One part of a release and the privacy of the population it touches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// What of the release: `model weights`, `popularity counts`, `clip ranges`, `tuning`,
    /// `each recommendation`, `ledger period`.
    pub part: String,
    /// Its population, unit, ε, δ and mechanism.
    #[serde(flatten)]
    pub privacy: PopulationPrivacy,
}

/// What one population pays in total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Total {
    /// The population.
    pub population: Population,
    /// Sum of the parts' ε; `None` when some part is not DP (the population is not protected).
    pub epsilon: Option<f64>,
    /// Sum of the parts' δ.
    pub delta: f64,
    /// How the total is formed, and which parts are not DP.
    pub composition: String,
}

/// The privacy report of a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivacyReport {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub format_version: u32,
    /// Every part, in the order: training, calibration, served.
    pub parts: Vec<Part>,
    /// Per population, what it pays (computed when the report is built).
    pub totals: Vec<Total>,
    /// Each part that is not differentially private, in words.
    pub not_private: Vec<String>,
    /// The inputs the release declares public (split seed and shares, counts released exactly,
    /// hyperparameters); empty in reports written before they were listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_inputs: Vec<String>,
    /// Who is in which population, the unit of each, and what a person in two populations pays
    /// ([`population_rules`]); empty in reports written before they were stated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub populations: Vec<String>,
}

/// The populations' rule in words: how users are assigned (`split`, the release's recorded
/// rule), the unit of each population's guarantee, that each guarantee holds for its own
/// population, and what a person in two of them pays — the sum, in one unit. A replacement is a
/// removal followed by an addition, so a guarantee of ε under adding or removing one user is one
/// of at most 2ε under replacing one (group privacy for two changes); the converse does not
/// hold (an exact count is 0-DP under replacement and not DP under addition), so the common
/// unit is replacement (docs/privacy-report.md, "Populations").
pub fn population_rules(split: Option<&str>, calibration: &str) -> Vec<String> {
    vec![
        format!(
            "rule: {}",
            split.unwrap_or("not recorded in this release (written before the rule was)")
        ),
        "training users: fitted on; unit: one user added or removed (their whole row, capped \
         where the part says so)"
            .into(),
        format!(
            "calibration users ({calibration}): held out of the fit, never served; their number \
             is not published (the rule makes it depend on the data); unit: one user replaced \
             (their whole history and held-out items)"
        ),
        "test users: held out of the fit and evaluated on; nothing of them is in the release"
            .into(),
        "served users: whoever sends a history; unit: the history of one request".into(),
        "each guarantee holds for its own population, given the rule above; guarantees are not \
         summed across populations"
            .into(),
        "a person in two populations (a training user today, calibrated on or served by another \
         release) pays the sum, in one unit: in replacement units, 2 x the training total (an \
         (eps, delta) guarantee under adding or removing one user is (2 eps, (1 + e^eps) delta) \
         under replacing one) + the calibration total + what each served request spends"
            .into(),
    ]
}

/// The training users' entry when `model.json` has none: the weights are an exact function of
/// their data.
pub fn training_public() -> PopulationPrivacy {
    PopulationPrivacy::public(
        Population::Training,
        "training data treated as public (the model is fitted without DP)",
    )
}

impl PrivacyReport {
    /// A report of `parts`, totals filled in.
    pub fn new(parts: Vec<Part>) -> Self {
        let mut r = PrivacyReport {
            format: FORMAT.into(),
            format_version: VERSION,
            parts,
            totals: Vec::new(),
            not_private: Vec::new(),
            public_inputs: Vec::new(),
            populations: Vec::new(),
        };
        r.finish();
        r
    }

    /// Adds a part (replacing one of the same name and population) and recomputes the totals.
    pub fn with(mut self, part: &str, privacy: PopulationPrivacy) -> Self {
        self.parts
            .retain(|p| !(p.part == part && p.privacy.population == privacy.population));
        self.parts.push(Part {
            part: part.into(),
            privacy,
        });
        self.parts.sort_by_key(|p| p.privacy.population);
        self.finish();
        self
    }

    /// Recomputes the totals and the list of what is not DP.
    fn finish(&mut self) {
        self.not_private = self
            .parts
            .iter()
            .filter(|p| !p.privacy.is_private())
            .map(|p| {
                format!(
                    "{} ({}): {}",
                    p.part, p.privacy.population, p.privacy.mechanism
                )
            })
            .collect();
        let mut populations: Vec<Population> = Vec::new();
        for p in &self.parts {
            if !populations.contains(&p.privacy.population) {
                populations.push(p.privacy.population);
            }
        }
        self.totals = populations
            .into_iter()
            .map(|pop| {
                let parts: Vec<&Part> = self
                    .parts
                    .iter()
                    .filter(|p| p.privacy.population == pop)
                    .collect();
                total(pop, &parts)
            })
            .collect();
    }

    /// The total of `population`, if it has parts.
    pub fn total(&self, population: Population) -> Option<&Total> {
        self.totals.iter().find(|t| t.population == population)
    }

    /// The ε_T and δ of a DP fit with a private choice of its shift: the model weights' part
    /// (training users) plus the shift choice's part (calibration users), basic composition of
    /// the two; `None` without a DP shift choice. The keyed split puts each user in one of the
    /// two populations, so one user's data move only one of the parts (parallel composition:
    /// they pay their own part's ε); the sum bounds the release's model for anyone, a person in
    /// both populations included, in the report's own units.
    pub fn fit_total(&self) -> Option<(f64, f64)> {
        let part = |name: &str, pop: Population| {
            self.parts
                .iter()
                .find(|p| p.part == name && p.privacy.population == pop)
                .and_then(|p| p.privacy.epsilon.map(|e| (e, p.privacy.delta)))
        };
        let (et, dt) = part(MODEL_WEIGHTS, Population::Training)?;
        let (ec, dc) = part(SHIFT_CHOICE, Population::Calibration)?;
        Some((et + ec, dt + dc))
    }

    /// Reads `privacy.json` of `dir` (callers check its checksum through
    /// `recommend::Release::read`, which does).
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(PRIVACY);
        let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let r: PrivacyReport = serde_json::from_slice(&text)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        if r.format != FORMAT || r.format_version != VERSION {
            return Err(Error::Invalid(format!(
                "{}: format '{}' version {} (this recsel reads '{FORMAT}' version {VERSION})",
                path.display(),
                r.format,
                r.format_version
            )));
        }
        Ok(r)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serialises")
    }
}

/// The served users: per request and per ledger period are two views of one guarantee, the
/// period's budget being the composition of its requests; the total is the period's when a
/// ledger charges, else per request (n recommendations spend n times ε).
fn total(population: Population, parts: &[&Part]) -> Total {
    let open: Vec<&str> = parts
        .iter()
        .filter(|p| !p.privacy.is_private())
        .map(|p| p.part.as_str())
        .collect();
    if population == Population::Served {
        let period = parts.iter().find(|p| p.part == "ledger period");
        let request = parts.iter().find(|p| p.part == "each recommendation");
        return match (period, request) {
            (_, Some(r)) if !r.privacy.is_private() => Total {
                population,
                epsilon: None,
                delta: 0.0,
                composition: format!("not protected: {}", r.privacy.mechanism),
            },
            (Some(p), _) => Total {
                population,
                epsilon: p.privacy.epsilon,
                delta: p.privacy.delta,
                composition: format!(
                    "per {}: the ledger's budget, the sum of the eps of the recommendations it \
                     charges",
                    p.privacy.unit
                ),
            },
            (None, Some(r)) => Total {
                population,
                epsilon: r.privacy.epsilon,
                delta: r.privacy.delta,
                composition: "per recommendation; no ledger: n recommendations from one \
                              history spend n times this"
                    .into(),
            },
            (None, None) => Total {
                population,
                epsilon: None,
                delta: 0.0,
                composition: "no serving entry".into(),
            },
        };
    }
    if !open.is_empty() {
        return Total {
            population,
            epsilon: None,
            delta: 0.0,
            composition: format!("not protected: {} not DP", open.join(", ")),
        };
    }
    let eps: f64 = parts.iter().filter_map(|p| p.privacy.epsilon).sum();
    let delta: f64 = parts.iter().map(|p| p.privacy.delta).sum();
    Total {
        population,
        epsilon: Some(eps),
        delta,
        composition: format!(
            "basic composition over {}",
            parts
                .iter()
                .map(|p| p.part.as_str())
                .collect::<Vec<_>>()
                .join(" + ")
        ),
    }
}

/// ε as the texts print it: rounded up to 4 decimals, never down, except that a value within
/// floating-point error (1e-9 relative) of a 4-decimal value is that value — a sum of parts such as
/// 3 × 0.2 is 0.6000000000000001 in binary floating point and is shown as 0.6, not 0.6001. The
/// JSON keeps every digit.
pub fn epsilon_text(e: f64) -> String {
    let scaled = e * 1e4;
    let nearest = scaled.round();
    let shown = if (scaled - nearest).abs() <= 1e-9 * nearest.abs().max(1.0) {
        nearest
    } else {
        scaled.ceil()
    };
    format!("{}", shown / 1e4)
}

/// The guarantee in words, ε as [`epsilon_text`] prints it.
pub fn guarantee(epsilon: Option<f64>, delta: f64) -> String {
    match epsilon {
        None => "NOT DP".into(),
        Some(e) => {
            let e = epsilon_text(e);
            if delta > 0.0 {
                format!("({e}, {delta:e})-DP")
            } else {
                format!("{e}-DP")
            }
        }
    }
}

impl fmt::Display for PrivacyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "privacy report")?;
        if !self.public_inputs.is_empty() {
            writeln!(f, "  public inputs (declared; no guarantee covers them):")?;
            for s in &self.public_inputs {
                writeln!(f, "    - {s}")?;
            }
        }
        if !self.populations.is_empty() {
            writeln!(f, "  populations:")?;
            for s in &self.populations {
                writeln!(f, "    - {s}")?;
            }
        }
        let mut last = None;
        for p in &self.parts {
            let q = &p.privacy;
            if Some(q.population) != last {
                writeln!(f, "  {}:", q.population)?;
                last = Some(q.population);
            }
            writeln!(
                f,
                "    {:<22} {:<16} unit: {}; {}",
                p.part,
                guarantee(q.epsilon, q.delta),
                q.unit,
                q.mechanism
            )?;
            if !q.note.is_empty() {
                writeln!(f, "    {:<22} {}", "", q.note)?;
            }
        }
        writeln!(f, "  totals (never summed across populations):")?;
        for t in &self.totals {
            writeln!(
                f,
                "    {:<22} {:<16} {}",
                t.population,
                guarantee(t.epsilon, t.delta),
                t.composition
            )?;
        }
        let eps_delta = |pop: Population| {
            self.total(pop)
                .and_then(|t| t.epsilon.map(|e| (e, t.delta)))
        };
        if let (false, Some((et, dt)), Some((ec, dc))) = (
            self.populations.is_empty(),
            eps_delta(Population::Training),
            eps_delta(Population::Calibration),
        ) {
            // Group privacy for two changes: (ε, δ) under add/remove is (2ε, (1 + e^ε)δ) under
            // replacement.
            writeln!(
                f,
                "    {:<22} {:<16} a person in both, in replacement units: 2 x {et} + {ec} \
                 (training delta x (1 + e^eps))",
                "training + calibration",
                guarantee(Some(2.0 * et + ec), (1.0 + et.exp()) * dt + dc)
            )?;
        }
        if let Some((e, d)) = self.fit_total() {
            writeln!(
                f,
                "    {:<22} {:<16} the DP fit's eps_T: {} ({}) + {} ({}); the keyed split puts \
                 each user in one of the two, so a user's data move one part only",
                "fit with shift choice",
                guarantee(Some(e), d),
                MODEL_WEIGHTS,
                Population::Training,
                SHIFT_CHOICE,
                Population::Calibration
            )?;
        }
        if self.not_private.is_empty() {
            write!(f, "  not DP: nothing")
        } else {
            write!(f, "  not DP:")?;
            for s in &self.not_private {
                write!(f, "\n    - {s}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(pop: Population, e: f64, d: f64) -> PopulationPrivacy {
        PopulationPrivacy {
            population: pop,
            unit: "user".into(),
            epsilon: Some(e),
            delta: d,
            mechanism: "m".into(),
            note: String::new(),
        }
    }

    #[test]
    fn totals_add_within_a_population_and_never_across() {
        let r = PrivacyReport::new(vec![])
            .with("model weights", dp(Population::Training, 2.0, 1e-8))
            .with("popularity counts", dp(Population::Training, 1.0, 0.0))
            .with("clip ranges", dp(Population::Calibration, 0.0, 0.0))
            .with("tuning", dp(Population::Calibration, 0.5, 0.0));
        let t = r.total(Population::Training).unwrap();
        assert_eq!((t.epsilon, t.delta), (Some(3.0), 1e-8));
        assert_eq!(r.total(Population::Calibration).unwrap().epsilon, Some(0.5));
        assert!(r.not_private.is_empty());
        // A public part makes its population unprotected, and only that one.
        let r = r.with(
            "tuning",
            PopulationPrivacy::public(Population::Calibration, "chosen non-privately"),
        );
        // The text rounds ε up, never down.
        let shown =
            PrivacyReport::new(vec![]).with("m", dp(Population::Training, 7.999_979_6, 1e-6));
        assert!(shown.to_string().contains("(8, 1e-6)-DP"), "{shown}");
        let shown = PrivacyReport::new(vec![]).with("m", dp(Population::Training, 1.000_01, 0.0));
        assert!(shown.to_string().contains("1.0001-DP"), "{shown}");
        // A sum of parts off by floating-point error only is the value it sums to.
        let shown = PrivacyReport::new(vec![]).with("m", dp(Population::Training, 0.1 * 6.0, 0.0));
        assert!(shown.to_string().contains(" 0.6-DP"), "{shown}");
        assert_eq!(epsilon_text(0.300_000_000_000_000_04), "0.3");
        assert_eq!(epsilon_text(0.300_000_1), "0.3001");
        assert_eq!(r.total(Population::Calibration).unwrap().epsilon, None);
        assert_eq!(r.total(Population::Training).unwrap().epsilon, Some(3.0));
        assert_eq!(r.not_private.len(), 1);
        assert!(r.to_string().contains("chosen non-privately"));
        let back: PrivacyReport = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }
}
