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
/// * `prepare_many_agrees_with_prepare`: the two preparations select the same candidate most
///   often on a problem with one clear winner at ε = 8 (a mechanism whose `prepare_many` draws
///   from another distribution shows up here);
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
    let mode = |prep: &dyn crate::mechanisms::Prepared| {
        let mut counts = [0u32; 10];
        let mut r = Rng::seed_from_u64(7);
        for _ in 0..2000 {
            counts[prep.sample(&mut r)] += 1;
        }
        (0..10).max_by_key(|&a| counts[a]).unwrap_or(0)
    };
    let (a, b) = (mode(&*once), mode(&*many));
    if a != b {
        return Err(failed(
            CHECKS[4],
            name,
            format!("most frequent selection {a} with prepare, {b} with prepare_many"),
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
