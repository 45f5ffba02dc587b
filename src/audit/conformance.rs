//! The generic checks every mechanism gets for free (docs/extending.md, "Generic tests"): what the
//! test suite runs over the built-in registry, as one public call that a mechanism written
//! outside the crate runs in its own tests.

use rand::{Rng as _, SeedableRng as _};

use super::{audit, builtin_pairs, AuditConfig};
use crate::error::{Error, Result};
use crate::mechanisms::{MechParams, MechanismSpec, Problem};
use crate::rng::{Rng, Streams};

/// The names of the checks [`check_mechanism`] runs, in order.
pub const CHECKS: [&str; 6] = [
    "rejects_bad_epsilon",
    "reports_its_name_and_epsilon",
    "one_candidate_is_returned",
    "outputs_in_range_and_reproducible",
    "prepare_many_agrees_with_prepare",
    "audit_finds_no_violation",
];

fn failed(check: &str, name: &str, what: String) -> Error {
    Error::Invalid(format!("mechanism '{name}' fails {check}: {what}"))
}

/// Runs the generic checks of [`CHECKS`] on `spec` built with `params` (ε varied by the checks):
///
/// * `rejects_bad_epsilon`: building with ε = 0, −1, NaN or ∞ is an error;
/// * `reports_its_name_and_epsilon`: the built mechanism's `name()` is the registry name and
///   `epsilon()` the ε it was built with;
/// * `one_candidate_is_returned`: a one-candidate problem selects candidate 0;
/// * `outputs_in_range_and_reproducible`: on 200 random problems (k = 2..60, ε = 0.01..20) every
///   selection is a candidate index, and the same generator state gives the same selection;
/// * `prepare_many_agrees_with_prepare`: on a 10-candidate problem with one clear winner at
///   ε = 8, the two preparations select the winner equally often (within 6 standard errors of
///   4,000 draws each; a `prepare_many` that draws from another distribution shows up here);
/// * `audit_finds_no_violation` (only for a spec marked private): `recsel audit`'s lower bound
///   (docs/deployment.md) on the built-in neighbouring pairs at ε = 1 does not refute the
///   claimed guarantee (`samples` per input; 20,000 or more is sensitive to a factor-2
///   miscalibration).
///
/// The first failing check is the error, named as in [`CHECKS`].
pub fn check_mechanism(spec: &MechanismSpec, params: &MechParams, samples: u64) -> Result<()> {
    let name = spec.name;
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        if spec.build(&params.with_epsilon(bad)).is_ok() {
            return Err(failed(
                CHECKS[0],
                name,
                format!("built with epsilon = {bad}"),
            ));
        }
    }
    for eps in [0.1, 1.0, 4.0] {
        let m = spec.build(&params.with_epsilon(eps))?;
        if m.name() != name || m.epsilon() != eps {
            return Err(failed(
                CHECKS[1],
                name,
                format!(
                    "built with {eps} it reports '{}' and {}",
                    m.name(),
                    m.epsilon()
                ),
            ));
        }
    }
    let mut rng = Rng::seed_from_u64(0x5eed);
    let one = spec.build(&params.with_epsilon(1.0))?;
    let p1 = Problem::new(&[0.3], &[1.0])?;
    if one.select(&p1, &mut rng) != 0 {
        return Err(failed(
            CHECKS[2],
            name,
            "selected a candidate other than 0".into(),
        ));
    }
    for trial in 0..200u64 {
        let k = rng.random_range(2..=60usize);
        let q: Vec<f64> = (0..k).map(|_| rng.random_range(-5.0..5.0)).collect();
        let d: Vec<f64> = (0..k).map(|_| rng.random_range(0.01..3.0)).collect();
        let eps = 10f64.powf(rng.random_range(-2.0..1.3));
        let m = spec.build(&params.with_epsilon(eps))?;
        let p = Problem::new(&q, &d)?;
        let seed = rng.random::<u64>();
        let a = m.select(&p, &mut Rng::seed_from_u64(seed));
        let b = m.select(&p, &mut Rng::seed_from_u64(seed));
        if a >= k || a != b {
            return Err(failed(
                CHECKS[3],
                name,
                format!("problem {trial} (k = {k}, eps = {eps}): selections {a} and {b}"),
            ));
        }
    }
    let q: Vec<f64> = (0..10).map(|a| if a == 3 { 10.0 } else { 0.0 }).collect();
    let d = vec![1.0; 10];
    let p = Problem::new(&q, &d)?;
    let m = spec.build(&params.with_epsilon(8.0))?;
    let (once, many) = (m.prepare(&p), m.prepare_many(&p));
    // Share of 4,000 selections that pick the winner (candidate 3), from independent streams.
    let share = |prep: &dyn crate::mechanisms::Prepared, seed: u64| {
        let mut r = Rng::seed_from_u64(seed);
        (0..4000).filter(|_| prep.sample(&mut r) == 3).count() as f64 / 4000.0
    };
    let (a, b) = (share(&*once, 7), share(&*many, 8));
    // Two binomial shares of n = 4,000 differ by more than 6 standard errors of their
    // difference with probability below 2·10^-9.
    let p_bar = (a + b) / 2.0;
    let tol = 6.0 * (2.0 * p_bar * (1.0 - p_bar) / 4000.0).sqrt() + 1e-9;
    if (a - b).abs() > tol {
        return Err(failed(
            CHECKS[4],
            name,
            format!(
                "the winner is selected {a:.4} of the time with prepare, {b:.4} with prepare_many"
            ),
        ));
    }
    if spec.private {
        let pairs = builtin_pairs(&[0.0, 0.25, 0.5, 0.75, 1.0], &[0.2, 1.0, 0.5, 2.0, 1.0], 5)?;
        let config = AuditConfig::new(samples, 1e-4, Streams::new(11).seed())?;
        let m = spec.build(&params.with_epsilon(1.0))?;
        let r = audit(&*m, &pairs, &config, &|_| {})?;
        if r.violation {
            return Err(failed(
                CHECKS[5],
                name,
                format!(
                    "claims {} at eps = 1 but the audit's lower bound is {:.3}",
                    m.guarantee(),
                    r.max_eps_lb
                ),
            ));
        }
    }
    Ok(())
}
