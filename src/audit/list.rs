//! The audit on ordered lists (docs/lists.md, "The audit on lists"): the recipe of the module
//! above with the output an ordered list of k items. A list `(l_1, …, l_k)` over n candidates is
//! output `l_1 n^{k−1} + … + l_k` of n^k (the tuples with a repeat are outputs the list never
//! gives), and the claim is the list's total guarantee ([`TopK::guarantee`]).

use crate::error::{Error, Result};
use crate::mechanisms::{Guarantee, Problem, TopK};
use crate::rng::{name_id, Draws, Streams};

use super::{direction_bound, tally, AuditConfig, AuditReport, DirectionResult, NeighbourPair};

/// How one list is drawn: `(problem, draws, family, index)` → the list, where draw `index` of
/// the stream family `family` (one per pair, input and batch) must use its own stream.
pub type ListDraw<'a> =
    dyn Fn(&Problem<'_>, &mut Draws, u32, u64) -> Result<Vec<usize>> + Sync + 'a;

/// Audits the lists of `list` on `pairs`, holding them to [`TopK::guarantee`].
pub fn audit_list(
    list: &TopK,
    pairs: &[NeighbourPair],
    config: &AuditConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<AuditReport> {
    let id = name_id(list.round().name());
    let name = format!(
        "{} list of {} ({})",
        list.round().name(),
        list.k(),
        list.form()
    );
    let draw = |p: &Problem<'_>, draws: &mut Draws, family: u32, index: u64| {
        list.sample(p, draws, id, family, index >> 32, index as u32)
    };
    audit_list_claim(
        &name,
        list.epsilon(),
        &|n| list.guarantee(n).charged,
        list.k(),
        &draw,
        pairs,
        config,
        progress,
    )
}

/// Audits lists of `k` drawn by `draw` on `pairs`, holding them to `claimed(n)` on n candidates
/// (`epsilon` is the nominal ε of the report): the form of [`audit_list`] that a test uses to
/// plant an over-claim.
#[allow(clippy::too_many_arguments)]
pub fn audit_list_claim(
    name: &str,
    epsilon: f64,
    claimed: &dyn Fn(usize) -> Guarantee,
    k: usize,
    draw: &ListDraw<'_>,
    pairs: &[NeighbourPair],
    config: &AuditConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<AuditReport> {
    if pairs.is_empty() {
        return Err(Error::Invalid("no neighbouring pairs to audit".into()));
    }
    let outputs = |n: usize| n.pow(k.min(n) as u32);
    if let Some(p) = pairs.iter().find(|p| outputs(p.len()) > 1 << 16) {
        return Err(Error::Invalid(format!(
            "pair '{}': {} candidates give {}^{} ordered lists, too many outputs to audit",
            p.label,
            p.len(),
            p.len(),
            k.min(p.len())
        )));
    }
    // Bonferroni over every output, direction and pair; each bound gets half of its share.
    let tests: usize = pairs.iter().map(|p| 2 * outputs(p.len())).sum();
    let level = config.alpha / (2.0 * tests as f64);
    let streams = Streams::new(config.seed);
    let counts = |q: &[f64], sens: &[f64], n: u64, family: u32| -> Result<Vec<u64>> {
        let problem = Problem::new(q, sens)?;
        let cands = q.len();
        tally(outputs(cands), n, &streams, config.noise, |draws, i| {
            let list = draw(&problem, draws, family, i)
                .expect("a list audit draws from a mechanism it validated");
            list.iter().fold(0, |c, &a| c * cands + a)
        })
    };
    // Validate the draw once (a secure path that does not exist errors here, not mid-tally).
    if let Some(p) = pairs.first() {
        let problem = Problem::new(&p.q, &p.sens)?;
        let mut draws = Draws::new(config.noise, streams)?;
        draw(&problem, &mut draws, u32::MAX, 0)?;
    }
    let mut results = Vec::new();
    let mut drawn = 0u64;
    let mut delta = 0.0f64;
    let mut guarantee = None;
    for (i, pair) in pairs.iter().enumerate() {
        let fam = 4 * i as u32;
        let (n0, n) = (config.select_samples, config.samples);
        let sel_a = counts(&pair.q, &pair.sens, n0, fam)?;
        let sel_b = counts(&pair.q2, &pair.sens, n0, fam + 1)?;
        let fresh_a = counts(&pair.q, &pair.sens, n, fam + 2)?;
        let fresh_b = counts(&pair.q2, &pair.sens, n, fam + 3)?;
        drawn += 2 * (n0 + n);
        progress(2 * (n0 + n));
        let g = claimed(pair.len());
        delta = delta.max(g.delta());
        guarantee.get_or_insert(g);
        for (direction, sel_first, sel_second, first, second) in [
            ("q->q'", &sel_a, &sel_b, &fresh_a, &fresh_b),
            ("q'->q", &sel_b, &sel_a, &fresh_b, &fresh_a),
        ] {
            results.push(DirectionResult {
                pair: pair.label.clone(),
                direction,
                k: pair.len(),
                bound: direction_bound(sel_first, sel_second, first, second, n, level),
                claimed: g.epsilon_for(pair.len()),
            });
        }
    }
    let guarantee = guarantee.expect("at least one pair");
    let (max_eps_lb, violation, exceeds_nominal) =
        super::verdict(&results, guarantee.is_private(), delta, epsilon);
    Ok(AuditReport {
        mechanism: name.to_string(),
        epsilon,
        guarantee: guarantee.to_string(),
        private: guarantee.is_private(),
        results,
        max_eps_lb,
        violation,
        exceeds_nominal,
        samples_drawn: drawn,
        bottom: None,
        config: *config,
    })
}
