//! How a user's charges compose (docs/ledger.md, "Composition").
//!
//! **Basic composition** holds for every ε-DP mechanism: k answers about one user with
//! ε_1, …, ε_k are (Σ ε_i)-DP together. That sum is what the ledger charges and limits.
//!
//! **A tighter accountant** exists only where a proof is written down: the exponential mechanism
//! is ε-bounded-range (its log-likelihood ratios between neighbours span an interval of width at
//! most ε; Durfee & Rogers 2019), and an ε-bounded-range mechanism is ε²/8-zCDP (Cesar & Rogers
//! 2021). zCDP composes by adding ρ, and ρ-zCDP implies (ε, δ)-DP for every δ > 0 with the ε of
//! the crate's one conversion, [`zcdp_epsilon`] (Canonne, Kamath & Steinke 2020, Prop. 12; never
//! more than the classical ρ + 2√(ρ ln(1/δ)) of Bun & Steinke 2016, Proposition 1.3).
//! Permute-and-flip, report-noisy-max with exponential noise (the same distribution), randomised
//! response, random stopping and the GEM family are not known to be bounded-range with their ε;
//! [`bounded_range_rho`] and [`Accountant::zcdp`] refuse them (a mechanism declares the property through
//! [`Mechanism::bounded_range`]).

use crate::mechanisms::Mechanism;
use crate::privacy::zcdp_epsilon;

use super::{LedgerError, Result, Units};

/// ρ of the zCDP guarantee of `mech` run at `epsilon`: `ε²/8` for a mechanism that is
/// ε-bounded-range, an error naming the mechanism otherwise.
pub fn bounded_range_rho(mech: &dyn Mechanism, epsilon: f64) -> Result<f64> {
    if !mech.bounded_range() {
        return Err(LedgerError::Invalid(format!(
            "mechanism '{}' is not known to be bounded-range, so no zCDP bound tighter than its \
             pure eps is claimed for it; account for it with basic composition (sum of eps)",
            mech.name()
        )));
    }
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(LedgerError::Units(format!(
            "epsilon must be finite and >= 0, got {epsilon}"
        )));
    }
    Ok(epsilon * epsilon / 8.0)
}

/// A running account of one user's answers under both rules.
#[derive(Debug, Clone, Default)]
pub struct Accountant {
    basic: Units,
    rho: f64,
    not_bounded_range: Option<&'static str>,
    answers: u64,
}

impl Accountant {
    /// An empty account.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one answer of `mech` at `epsilon` (the ε the ledger charged).
    pub fn add(&mut self, mech: &dyn Mechanism, epsilon: Units) -> Result<()> {
        self.basic = self.basic.checked_add(epsilon)?;
        match bounded_range_rho(mech, epsilon.as_epsilon()) {
            Ok(rho) => self.rho += rho,
            Err(_) => {
                self.not_bounded_range.get_or_insert(mech.name());
            }
        }
        self.answers += 1;
        Ok(())
    }

    /// Answers recorded.
    pub fn answers(&self) -> u64 {
        self.answers
    }

    /// The basic-composition total, Σ ε: what the ledger charges.
    pub fn basic(&self) -> Units {
        self.basic
    }

    /// The total ρ under zCDP, or an error if any answer came from a mechanism without a
    /// bounded-range proof.
    pub fn zcdp(&self) -> Result<f64> {
        match self.not_bounded_range {
            Some(name) => Err(LedgerError::Invalid(format!(
                "mechanism '{name}' is not known to be bounded-range; only basic composition \
                 applies to this account"
            ))),
            None => Ok(self.rho),
        }
    }

    /// The smaller of the basic total and the zCDP-implied ε at `delta` (the basic total alone
    /// when zCDP does not apply). The basic total is pure ε-DP; the zCDP one is (ε, δ)-DP, by
    /// [`zcdp_epsilon`].
    pub fn best_epsilon(&self, delta: f64) -> Result<f64> {
        if !(delta > 0.0 && delta < 1.0) {
            return Err(LedgerError::Invalid(format!(
                "need 0 < delta < 1, got delta = {delta}"
            )));
        }
        let basic = self.basic.as_epsilon();
        match self.zcdp() {
            Ok(rho) => Ok(zcdp_epsilon(rho, delta).min(basic)),
            Err(_) => Ok(basic),
        }
    }
}
