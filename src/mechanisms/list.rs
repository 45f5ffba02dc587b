//! Ordered lists of k distinct candidates with one guarantee for the whole list (docs/lists.md).
//!
//! A list is drawn in one of three forms ([`ListForm`]):
//!
//! * **peeling** — k rounds of a registry mechanism, each over the candidates not chosen yet;
//!   every registry mechanism supports it ([`Mechanism::select_list`]). With each round at ε/k
//!   the list is ε-DP by basic composition (adaptive: a round's candidates and sensitivities
//!   depend only on the earlier rounds' outputs, which are released anyway).
//! * **gumbel** — one-shot Gumbel top-k (Durfee & Rogers, NeurIPS 2019, "Practical
//!   differentially private top-k selection with pay-what-you-get composition"): add Gumbel
//!   noise of scale 2Δ/ε₀ to every score once and report the k largest in order. Its law is
//!   exactly that of peeling the exponential mechanism at ε₀ per round with the same Δ, so it
//!   has the same guarantee. `em` only.
//! * **laplace** — the one-shot Laplace mechanism of Qiao, Su & Zhang (ICML 2021, "Oneshot
//!   differentially private top-k selection"): add Laplace noise once and report the k largest.
//!   With δ = 0, noise `Lap(2kΔ/ε)` and the ordered list: ε-DP (their Theorem 2.1 for the set;
//!   the ordered list by the coupling of docs/lists.md). With δ > 0, noise
//!   `Lap(8Δ√(k ln(n/δ))/ε)` for ε ≤ 0.2 and δ ≤ 0.05: (ε, δ)-DP for the *set* of k (their
//!   Theorem 2.2, whose proof needs that the order is not released), so the list is released in
//!   a uniformly random order. `rnm-laplace` only.
//!
//! [`TopK`] is a list at a total ε: built from a registry entry, it builds the round mechanism
//! at ε/k and states the list's guarantee ([`ListGuarantee`]) — what serving prints and charges.

use std::fmt;

use rand::Rng as _;
use serde::Serialize;

use super::params::MechParams;
use super::peel::{self, Peeler, SubProblem};
use super::registry::{self, MechanismSpec};
use super::{Guarantee, Mechanism, Problem};
use crate::error::{Error, Result};
use crate::rng::{Draws, Rng, SecureRng};

/// How an ordered list of k candidates is drawn (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum ListForm {
    /// k rounds of the top-1 mechanism at ε/k each over the remaining candidates.
    Peeling,
    /// One-shot Gumbel top-k: the law of peeling `em` at ε/k with Δ fixed (Durfee & Rogers 2019).
    Gumbel,
    /// One-shot Laplace top-k (Qiao, Su & Zhang 2021): ε-DP and ordered with `delta` = 0
    /// (Theorem 2.1's scale), (ε, δ)-DP and in random order with `delta` > 0 (Theorem 2.2).
    Laplace {
        /// The δ of the guarantee; 0 for the pure form.
        delta: f64,
    },
}

impl ListForm {
    /// The words a front end accepts: `peeling`, `gumbel`, `laplace` (pure) and `laplace:DELTA`.
    pub const NAMES: &'static [&'static str] = &["peeling", "gumbel", "laplace", "laplace:DELTA"];

    /// Parses `peeling`, `gumbel`, `laplace` (δ = 0) or `laplace:DELTA` (δ in (0, 0.05], the
    /// range of Qiao, Su & Zhang's Theorem 2.2).
    pub fn parse(text: &str) -> Result<Self> {
        let t = text.trim();
        match t {
            "peeling" => return Ok(ListForm::Peeling),
            "gumbel" => return Ok(ListForm::Gumbel),
            "laplace" => return Ok(ListForm::Laplace { delta: 0.0 }),
            _ => {}
        }
        if let Some(d) = t.strip_prefix("laplace:") {
            let delta: f64 = d.trim().parse().map_err(|_| {
                Error::Invalid(format!("list form '{t}': the delta '{d}' is not a number"))
            })?;
            if !(delta > 0.0 && delta <= LAPLACE_MAX_DELTA) {
                return Err(Error::InvalidParameter {
                    name: "delta of the laplace list form",
                    requirement: "in (0, 0.05] (Qiao, Su & Zhang 2021, Theorem 2.2)",
                    value: delta,
                });
            }
            return Ok(ListForm::Laplace { delta });
        }
        Err(Error::UnknownName {
            kind: "list form",
            name: t.to_string(),
            valid: Self::NAMES.join(", "),
        })
    }

    /// The form's name without its parameter.
    pub fn name(&self) -> &'static str {
        match self {
            ListForm::Peeling => "peeling",
            ListForm::Gumbel => "gumbel",
            ListForm::Laplace { .. } => "laplace",
        }
    }
}

impl fmt::Display for ListForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListForm::Laplace { delta } if *delta > 0.0 => write!(f, "laplace:{delta}"),
            other => f.write_str(other.name()),
        }
    }
}

/// The constant of the approximate one-shot Laplace mechanism: `λ = 8Δ√(k ln(n/δ))/ε` (Qiao, Su
/// & Zhang 2021, Theorem 2.2).
pub const LAPLACE_ONESHOT_CONSTANT: f64 = 8.0;
/// The largest ε of Theorem 2.2.
pub const LAPLACE_MAX_EPSILON: f64 = 0.2;
/// The largest δ of Theorem 2.2.
pub const LAPLACE_MAX_DELTA: f64 = 0.05;

/// The Laplace scale λ of the one-shot mechanism for a list of `k` at `epsilon` over `n`
/// candidates with ℓ∞-sensitivity `max_sens` (Qiao, Su & Zhang 2021): `2kΔ/ε` for δ = 0
/// (Theorem 2.1, ε-DP), `8Δ√(k ln(n/δ))/ε` for δ > 0 (Theorem 2.2, (ε, δ)-DP for ε ≤ 0.2,
/// δ ≤ 0.05, n ≥ 2). `k` is the list's length, at most n.
pub fn laplace_scale(epsilon: f64, delta: f64, k: usize, n: usize, max_sens: f64) -> f64 {
    let k = k.min(n) as f64;
    if delta == 0.0 {
        2.0 * k * max_sens / epsilon
    } else {
        LAPLACE_ONESHOT_CONSTANT * max_sens * (k * (n as f64 / delta).ln()).sqrt() / epsilon
    }
}

/// The guarantee of a whole list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ListGuarantee {
    /// What the list is charged: basic composition of its rounds (ε-DP for ε-DP rounds), or the
    /// one-shot theorem's guarantee ((ε, δ) for `laplace`).
    pub charged: Guarantee,
    /// ρ-zCDP of the whole list when every round is bounded-range (Cesar & Rogers 2021: an
    /// ε₀-bounded-range round is ε₀²/8-zCDP, so k rounds at ε/k are ε²/(8k)-zCDP); `None`
    /// otherwise. A tighter (ε, δ) statement ([`ListGuarantee::tighter_epsilon`]), reported as
    /// such, never charged as pure ε.
    pub zcdp_rho: Option<f64>,
}

impl ListGuarantee {
    /// The ε at `delta` of the list's zCDP bound (the crate's one conversion,
    /// [`crate::privacy::zcdp_epsilon`]), when the list has one and it is below the charged ε.
    pub fn tighter_epsilon(&self, delta: f64) -> Option<f64> {
        let rho = self.zcdp_rho?;
        let eps = crate::privacy::zcdp_epsilon(rho, delta);
        match self.charged.epsilon_for(2) {
            Some(charged) if eps < charged => Some(eps),
            _ => None,
        }
    }
}

impl fmt::Display for ListGuarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.charged)?;
        if let Some(rho) = self.zcdp_rho {
            write!(f, " and {rho}-zCDP")?;
        }
        Ok(())
    }
}

/// The guarantee of `k` rounds of `round` (basic composition) on `n` candidates: ε and δ add up;
/// a per-candidate guarantee is counted on the candidates left at each round.
pub fn compose_rounds(round: Guarantee, k: usize, n: usize) -> Guarantee {
    let k = k.min(n);
    match round {
        Guarantee::NotPrivate => Guarantee::NotPrivate,
        Guarantee::Pure { epsilon } => Guarantee::Pure {
            epsilon: epsilon * k as f64,
        },
        Guarantee::PerCandidate { epsilon } => Guarantee::Pure {
            epsilon: (0..k).map(|r| epsilon * (n - r - 1) as f64).sum(),
        },
        Guarantee::Approx { epsilon, delta } => Guarantee::Approx {
            epsilon: epsilon * k as f64,
            delta: delta * k as f64,
        },
    }
}

/// Peeling: `min(k, n)` rounds of `round`, each over the candidates not chosen yet; `pick` runs
/// one round on a problem and returns the chosen index in it.
fn peel(
    problem: &Problem<'_>,
    k: usize,
    mut pick: impl FnMut(&Problem<'_>) -> Result<usize>,
) -> Result<Vec<usize>> {
    let k = k.min(problem.len());
    let mut out = Vec::with_capacity(k);
    if k == 0 {
        return Ok(out);
    }
    // Round one sees the problem as given (no copy).
    out.push(pick(problem)?);
    let mut remaining: Vec<usize> = (0..problem.len()).filter(|&a| a != out[0]).collect();
    while out.len() < k {
        let sub = SubProblem::new(problem, &remaining);
        let i = pick(&sub.problem())?;
        out.push(remaining.remove(i));
    }
    Ok(out)
}

/// [`Mechanism::select_list`]'s default: peeling with the mechanism as built.
pub(crate) fn peel_fast<M: Mechanism + ?Sized>(
    mech: &M,
    problem: &Problem<'_>,
    k: usize,
    rng: &mut Rng,
) -> Vec<usize> {
    peel(problem, k, |p| Ok(mech.prepare(p).sample(rng))).expect("the fast path cannot fail")
}

/// [`Mechanism::select_list_secure`]'s default: peeling on the secure path.
pub(crate) fn peel_secure<M: Mechanism + ?Sized>(
    mech: &M,
    problem: &Problem<'_>,
    k: usize,
    rng: &mut SecureRng,
) -> Result<Vec<usize>> {
    peel(problem, k, |p| Ok(mech.prepare_secure(p)?.sample(rng)))
}

/// A list of k at a total ε: the round mechanism built from a registry entry at ε/k (peeling,
/// gumbel) or the one-shot Laplace mechanism at (ε, δ), and the list's guarantee.
#[derive(Debug)]
pub struct TopK {
    round: Box<dyn Mechanism>,
    /// How peeling runs the rounds: the registry's `gem`, `mgem` and `em` with the work the
    /// rounds repeat done once per list (`peel.rs`), every other mechanism round by round.
    peeler: Peeler,
    k: usize,
    form: ListForm,
    epsilon: f64,
}

impl TopK {
    /// A list of `k` ≥ 1 by `form` with the mechanism `spec` and `params` (whose ε is the list's
    /// total ε). Errors if k is 0, if `form` does not apply to the mechanism (gumbel: `em` only;
    /// laplace: `rnm-laplace` only — their theorems are about those mechanisms), or if the
    /// parameters are invalid at ε/k.
    pub fn new(
        spec: &MechanismSpec,
        params: &MechParams,
        k: usize,
        form: ListForm,
    ) -> Result<Self> {
        if k == 0 {
            return Err(Error::InvalidParameter {
                name: "k",
                requirement: "at least 1",
                value: 0.0,
            });
        }
        let epsilon = super::check_epsilon(params.epsilon)?;
        let round = spec.build(&params.with_epsilon(epsilon / k as f64))?;
        if !round.list_forms().contains(&form.name()) {
            return Err(Error::Invalid(format!(
                "list form '{}' does not apply to mechanism '{}' (its forms: {}); peeling works \
                 for every mechanism",
                form.name(),
                spec.name,
                round.list_forms().join(", ")
            )));
        }
        if let ListForm::Laplace { delta } = form {
            if delta > 0.0 && (epsilon > LAPLACE_MAX_EPSILON || delta > LAPLACE_MAX_DELTA) {
                return Err(Error::Invalid(format!(
                    "list form 'laplace:{delta}' at eps {epsilon}: its theorem (Qiao, Su & \
                     Zhang 2021, Theorem 2.2) holds only for eps <= 0.2 and delta <= 0.05; use \
                     'laplace' (pure eps-DP) or peeling"
                )));
            }
        }
        // The registry's own entries only: another registry's entry of the same name may be
        // another mechanism.
        let own = |name: &str| registry::spec(name).is_ok_and(|s| std::ptr::eq(s, spec));
        let peeler = if own("gem") || own("mgem") {
            Peeler::Gem {
                variant: if own("gem") {
                    super::GemVariant::Gem
                } else {
                    super::GemVariant::Modified
                },
                beta: params.get(&super::BETA)?,
            }
        } else if own("em") {
            Peeler::Exponential
        } else {
            Peeler::Rounds
        };
        Ok(TopK {
            round,
            peeler,
            k,
            form,
            epsilon,
        })
    }

    /// The requested list length k (a list has `min(k, n)` items on n candidates).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The form.
    pub fn form(&self) -> ListForm {
        self.form
    }

    /// The list's total ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The mechanism of one round (built at ε/k).
    pub fn round(&self) -> &dyn Mechanism {
        self.round.as_ref()
    }

    /// The list's guarantee on `n` candidates (what serving prints and charges).
    pub fn guarantee(&self, n: usize) -> ListGuarantee {
        match self.form {
            ListForm::Laplace { delta } => ListGuarantee {
                charged: if delta == 0.0 {
                    Guarantee::Pure {
                        epsilon: self.epsilon,
                    }
                } else {
                    Guarantee::Approx {
                        epsilon: self.epsilon,
                        delta,
                    }
                },
                zcdp_rho: None,
            },
            ListForm::Peeling | ListForm::Gumbel => {
                let mut g = self.round.list_guarantee(self.k, n);
                // Report the requested ε, not k·(ε/k) with its rounding — unless a round spends
                // nothing (a list of `random` is 0-DP whatever ε it was configured with).
                if let (Guarantee::Pure { epsilon }, Guarantee::Pure { epsilon: round }) =
                    (&mut g.charged, self.round.guarantee())
                {
                    if self.k <= n && round > 0.0 {
                        *epsilon = self.epsilon;
                    }
                }
                g
            }
        }
    }

    /// One list on `problem` (fast path): `min(k, n)` distinct candidates, best first.
    pub fn select(&self, problem: &Problem<'_>, rng: &mut Rng) -> Vec<usize> {
        let eps = self.round.epsilon();
        match (self.form, self.peeler) {
            (ListForm::Peeling, Peeler::Gem { variant, beta }) => {
                peel::gem_fast(variant, eps, beta, problem, self.k, rng)
            }
            (ListForm::Peeling, _) => self.round.select_list(problem, self.k, rng),
            (ListForm::Gumbel, _) => gumbel_top_k(problem, eps, self.k, rng),
            (ListForm::Laplace { delta }, _) => {
                laplace_top_k(problem, self.epsilon, delta, self.k, rng)
            }
        }
    }

    /// One list on the secure path. Gumbel draws the same law as peeling `em`, so it peels `em`
    /// on the secure path; the one-shot Laplace form has no secure path (an error).
    pub fn select_secure(&self, problem: &Problem<'_>, rng: &mut SecureRng) -> Result<Vec<usize>> {
        let eps = self.round.epsilon();
        match self.form {
            ListForm::Peeling | ListForm::Gumbel => match self.peeler {
                Peeler::Gem { variant, beta } => {
                    peel::gem_secure(variant, eps, beta, problem, self.k, rng)
                }
                Peeler::Exponential => peel::em_secure(eps, problem, self.k, rng),
                Peeler::Rounds => self.round.select_list_secure(problem, self.k, rng),
            },
            ListForm::Laplace { .. } => Err(Error::Invalid(
                "list form 'laplace' has no secure path (--secure): use peeling".into(),
            )),
        }
    }

    /// One list from a runner's random source: the stream of (`mech_id`, `eps_index`, `user`,
    /// `trial`) in fast mode, the worker's secure generator in secure mode.
    pub fn sample(
        &self,
        problem: &Problem<'_>,
        draws: &mut Draws,
        mech_id: u32,
        eps_index: u32,
        user: u64,
        trial: u32,
    ) -> Result<Vec<usize>> {
        match draws {
            Draws::Seeded(streams) => Ok(self.select(
                problem,
                &mut streams.stream(mech_id, eps_index, user, trial),
            )),
            Draws::Secure(rng) => self.select_secure(problem, rng),
        }
    }
}

/// One-shot Gumbel top-k: the `min(k, n)` largest `ε₀ q_a / (2Δ) + G_a`, G_a i.i.d. standard
/// Gumbel, best first (Durfee & Rogers 2019, Lemma 4.2: the law of peeling the exponential
/// mechanism at ε₀ with the same Δ). Δ = the problem's largest sensitivity.
pub fn gumbel_top_k(problem: &Problem<'_>, eps_round: f64, k: usize, rng: &mut Rng) -> Vec<usize> {
    let c = eps_round / (2.0 * problem.max_sensitivity());
    let qmax = problem.max_score();
    let keys: Vec<f64> = problem
        .scores()
        .iter()
        .map(|&q| c * (q - qmax) - crate::numerics::distributions::exp1(rng).ln())
        .collect();
    top_k_of(&keys, k)
}

/// One-shot Laplace top-k (Qiao, Su & Zhang 2021): the `min(k, n)` largest `q_a + Lap(λ)`,
/// λ = [`laplace_scale`] at the problem's largest sensitivity. With `delta` = 0 the list is in
/// the order of the noisy scores (best first); with `delta` > 0 only the set is covered by the
/// theorem, so it is released in a uniformly random order (a shuffle that does not look at the
/// data).
pub fn laplace_top_k(
    problem: &Problem<'_>,
    epsilon: f64,
    delta: f64,
    k: usize,
    rng: &mut Rng,
) -> Vec<usize> {
    let lambda = laplace_scale(epsilon, delta, k, problem.len(), problem.max_sensitivity());
    let keys: Vec<f64> = problem
        .scores()
        .iter()
        .map(|&q| q + lambda * crate::numerics::distributions::laplace1(rng))
        .collect();
    let mut out = top_k_of(&keys, k);
    if delta > 0.0 {
        // Fisher–Yates.
        for i in (1..out.len()).rev() {
            out.swap(i, rng.random_range(0..=i));
        }
    }
    out
}

/// The indices of the `min(k, n)` largest keys, largest first (ties, of probability zero for
/// continuous noise, by index).
fn top_k_of(keys: &[f64], k: usize) -> Vec<usize> {
    let k = k.min(keys.len());
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    let by_key = |a: &usize, b: &usize| keys[*b].total_cmp(&keys[*a]).then(a.cmp(b));
    if k < idx.len() {
        idx.select_nth_unstable_by(k, by_key);
        idx.truncate(k);
    }
    idx.sort_unstable_by(by_key);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Streams;

    #[test]
    fn peeling_gives_k_distinct_candidates_and_the_argmax_first_at_large_epsilon() {
        let q = [0.0, 5.0, 3.0, 9.0, 1.0];
        let d = [1.0; 5];
        let p = Problem::new(&q, &d).unwrap();
        let params = MechParams::default().with_epsilon(3000.0);
        for name in ["em", "rnm", "gem", "mgem", "krr", "rs"] {
            let spec = super::super::spec(name).unwrap();
            let list = TopK::new(spec, &params, 3, ListForm::Peeling).unwrap();
            let mut rng = Streams::new(7).stream(0, 0, 0, 0);
            let l = list.select(&p, &mut rng);
            assert_eq!(l.len(), 3, "{name}");
            if name != "rs" {
                assert_eq!(l, vec![3, 1, 2], "{name}");
            }
            let mut s = l.clone();
            s.sort_unstable();
            s.dedup();
            assert_eq!(s.len(), 3, "{name}: no repeats");
            assert_eq!(
                list.guarantee(5).charged,
                Guarantee::Pure { epsilon: 3000.0 },
                "{name}"
            );
        }
        // k above the number of candidates: every candidate once.
        let spec = super::super::spec("em").unwrap();
        let all = TopK::new(spec, &params, 9, ListForm::Peeling).unwrap();
        let mut rng = Streams::new(7).stream(0, 0, 0, 0);
        assert_eq!(all.select(&p, &mut rng), vec![3, 1, 2, 4, 0]);
    }

    #[test]
    fn one_shot_forms_apply_only_where_their_theorem_holds() {
        let params = MechParams::default();
        let gumbel = ListForm::Gumbel;
        let laplace = ListForm::Laplace { delta: 0.0 };
        for name in ["rnm", "gem", "mgem", "cgem", "rs", "krr"] {
            let spec = super::super::spec(name).unwrap();
            assert!(TopK::new(spec, &params, 2, gumbel).is_err(), "{name}");
            assert!(TopK::new(spec, &params, 2, laplace).is_err(), "{name}");
        }
        assert!(TopK::new(super::super::spec("em").unwrap(), &params, 2, gumbel).is_ok());
        assert!(TopK::new(
            super::super::spec("rnm-laplace").unwrap(),
            &params,
            2,
            laplace
        )
        .is_ok());
        assert!(TopK::new(super::super::spec("em").unwrap(), &params, 0, gumbel).is_err());
        assert_eq!(ListForm::parse("laplace").unwrap(), laplace);
        let approx = ListForm::parse("laplace:1e-6").unwrap();
        assert_eq!(approx, ListForm::Laplace { delta: 1e-6 });
        assert!(ListForm::parse("laplace:0.06").is_err());
        // Theorem 2.2 holds for eps <= 0.2 only.
        let rnm_laplace = super::super::spec("rnm-laplace").unwrap();
        assert!(TopK::new(rnm_laplace, &params.with_epsilon(0.2), 2, approx).is_ok());
        assert!(TopK::new(rnm_laplace, &params.with_epsilon(0.3), 2, approx).is_err());
        assert!(ListForm::parse("top").is_err());
    }

    #[test]
    fn bounded_range_lists_report_a_tighter_approximate_guarantee() {
        let em = super::super::spec("em").unwrap();
        let params = MechParams::default().with_epsilon(1.0);
        let list = TopK::new(em, &params, 10, ListForm::Peeling).unwrap();
        let g = list.guarantee(100);
        assert_eq!(g.charged, Guarantee::Pure { epsilon: 1.0 });
        // Ten (1/10)-bounded-range rounds: 10 · (1/10)² / 8 = 1/80.
        assert!((g.zcdp_rho.unwrap() - 1.0 / 80.0).abs() < 1e-15);
        // ρ = 1/80 at δ = 1e-6 by Canonne, Kamath & Steinke's conversion: 0.700 (the infimum
        // over α evaluated independently on a fine grid of α).
        let tighter = g.tighter_epsilon(1e-6).unwrap();
        assert!((tighter - 0.700).abs() < 0.002, "{tighter}");
        // k = 5: ρ = 1/40 gives 1.014 > 1, so nothing tighter is reported.
        let five = TopK::new(em, &params, 5, ListForm::Peeling).unwrap();
        assert_eq!(five.guarantee(100).tighter_epsilon(1e-6), None);
        // Not bounded-range (rnm, gem): no zCDP statement at all.
        for name in ["rnm", "gem"] {
            let l = TopK::new(
                super::super::spec(name).unwrap(),
                &params,
                10,
                ListForm::Peeling,
            );
            assert_eq!(l.unwrap().guarantee(100).zcdp_rho, None, "{name}");
        }
    }
}
