//! The private choice of a DP fit's λ shift (docs/training-privacy.md, "A private choice of the
//! shift"): `recsel fit --dp-epsilon E --dp-shift-grid K,K,…` fits every shift of the grid from
//! the one noisy Gram matrix (post-processing of the training users' release: no extra ε for
//! them), scores each fit by the calibration users' Recall@20 and keeps one chosen by the
//! exponential mechanism at `--dp-select-epsilon`.
//!
//! * **Score**: `S_k = Σ_u r_u(k)`, the sum over the calibration users of their Recall@20
//!   (hits in the top 20 of their history's scores / min(20, |held-out items|)), each in
//!   [0, 1]. Replacing one calibration user (their whole history and held-out items) moves every
//!   `S_k` by at most 1; so does adding or removing one. The number of users is not used.
//! * **Choice**: the exponential mechanism, `P(k) ∝ exp(ε_s · S_k / 2)` (McSherry–Talwar 2007):
//!   ε_s-DP for the calibration users at sensitivity 1. It is used rather than random stopping
//!   (seed 004, Lemma 5.1) because the candidates are not independent DP runs: they are all
//!   post-processing of one release, so the training users pay once whatever is chosen, and the
//!   only private step left is one choice among a small public grid, which the exponential
//!   mechanism makes at ε_s exactly (random stopping would cost 3ε₀ and release a noisy score).
//! * **Release**: the grid (a public input) and the chosen shift (the mechanism's output); never
//!   the scores. The model is the chosen fit.
//! * **Composition**: the training users pay the fit's ε, the calibration users ε_s; the keyed
//!   split puts each user in one of the two, so the fit with its choice is (ε + ε_s)-DP in the
//!   privacy report's total ([`crate::privacy::report::PrivacyReport::fit_total`]).

use crate::data::heldout::{calibration_users, HeldOutRows};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::dp_items::embed;
use crate::model::options::{ShiftChoice, TrainedModel, TrainingPrivacyOptions};
use crate::model::ModelParams;
use crate::privacy::{Population, PopulationPrivacy};
use crate::rng::Rng;

/// The exponential mechanism's law over candidates of scores `sums` (sensitivity 1) at ε:
/// `P(k) ∝ exp(ε · sums[k] / 2)`, computed from the differences to the largest score.
pub fn em_law(sums: &[f64], epsilon: f64) -> Vec<f64> {
    let top = sums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = sums
        .iter()
        .map(|s| (epsilon * (s - top) / 2.0).exp())
        .collect();
    let z: f64 = w.iter().sum();
    w.into_iter().map(|x| x / z).collect()
}

/// One draw from `law` by its inverse distribution function.
pub fn em_draw(law: &[f64], rng: &mut Rng) -> usize {
    use rand::Rng as _;
    let u: f64 = rng.random::<f64>();
    let mut acc = 0.0;
    for (k, p) in law.iter().enumerate() {
        acc += p;
        if u < acc {
            return k;
        }
    }
    law.len() - 1
}

/// The generator of the choice: seeded by the whole-release audit's noise seed when it is set
/// ([`crate::rng::AUDIT_NOISE_SEED`]), else from the operating system's entropy.
fn choice_rng() -> Rng {
    let streams = match crate::rng::audit_noise_seed() {
        Some(s) => crate::rng::Streams::new(s),
        None => crate::rng::Streams::from_entropy(),
    };
    streams.stream(crate::rng::name_id("dp-shift-choice"), 0, 0, 0)
}

/// The calibration users' entry of the choice at `epsilon` over `grid`.
pub fn choice_privacy(grid: &[f64], epsilon: f64) -> PopulationPrivacy {
    PopulationPrivacy {
        population: Population::Calibration,
        unit: crate::evaluate::tuning::private::CALIBRATION_UNIT.into(),
        epsilon: Some(epsilon),
        delta: 0.0,
        mechanism: format!(
            "exponential mechanism over the DP fit's shifts K ∈ {{{}}} (each fitted from the one \
             noisy Gram matrix), score: the sum of the calibration users' Recall@20 (each in \
             [0, 1], sensitivity 1), P(K) ∝ exp(eps · score / 2); floating-point sampler",
            grid.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        note: "released: the chosen shift only (model.json shift_choice.chosen), never the \
               scores; the training users' part is the model weights' (post-processing of one \
               release, whichever shift is kept)"
            .into(),
    }
}

/// The exact calibration score of each candidate: the sum of the calibration users' Recall@20
/// (in memory only: never written or printed). `columns` maps the models' columns into the
/// data's (the released universe), `None` when they are the data's.
pub fn calibration_sums(
    trained: &TrainedModel,
    calibration: &HeldOutRows,
    columns: Option<&[u32]>,
    n_items: usize,
) -> Result<Vec<f64>> {
    trained
        .shift_candidates
        .iter()
        .map(|c| {
            let model = match columns {
                Some(cols) => embed(c.model.clone(), cols, n_items)?,
                None => c.model.clone(),
            };
            let r =
                crate::eval::recall20_per_row(&model, &calibration.history, &calibration.heldout);
            Ok(r.iter().sum())
        })
        .collect()
}

/// Makes the private choice among `trained`'s grid on `calibration` at `epsilon` with `rng`, and
/// keeps the chosen fit as the model (its λ as `l2_used`); records the choice. Nothing to do
/// without a grid.
pub fn choose_with(
    trained: &mut TrainedModel,
    calibration: &HeldOutRows,
    columns: Option<&[u32]>,
    n_items: usize,
    epsilon: f64,
    rng: &mut Rng,
) -> Result<()> {
    if trained.shift_candidates.is_empty() {
        return Ok(());
    }
    let sums = calibration_sums(trained, calibration, columns, n_items)?;
    let k = em_draw(&em_law(&sums, epsilon), rng);
    let grid: Vec<f64> = trained.shift_candidates.iter().map(|c| c.shift).collect();
    let chosen = &trained.shift_candidates[k];
    trained.model = chosen.model.clone();
    trained.l2_used = chosen.l2_used;
    trained.shift_choice = Some(ShiftChoice {
        chosen: chosen.shift,
        privacy: choice_privacy(&grid, epsilon),
        grid,
    });
    Ok(())
}

/// [`TrainingPrivacyOptions::fit_dataset`] and, with `dp-shift-grid`, the private choice of the
/// shift on the calibration users of `data` (its validation users, their rows split as the
/// release's calibration splits them, by `seed`): the one fit path of `recsel fit`. Fails with a
/// grid when `data` has no calibration users.
pub fn fit_dataset(
    opts: &TrainingPrivacyOptions,
    data: &Dataset,
    params: &ModelParams,
    seed: u64,
    catalogue: bool,
    progress: &dyn Fn(&str),
) -> Result<(TrainedModel, Option<Vec<u32>>)> {
    let calibration = match &opts.dp_shift_grid {
        Some(_) => Some(calibration_users(data, seed).ok_or_else(|| {
            Error::Invalid(
                "dp-shift-grid chooses the shift on calibration users, and this split has none: \
                 give --validation-users auto (LightGCN files) or a validation share"
                    .into(),
            )
        })?),
        None => None,
    };
    let (mut trained, universe) = opts.fit_dataset(data, params, seed, catalogue, progress)?;
    if let Some(cal) = calibration {
        progress("private choice of the shift on the calibration users");
        choose_with(
            &mut trained,
            &cal,
            universe.as_deref(),
            data.n_items(),
            opts.dp_select_epsilon(),
            &mut choice_rng(),
        )?;
    }
    Ok((trained, universe))
}

/// [`TrainingPrivacyOptions::fit`] on the caller's rows and, with `dp-shift-grid`, the private
/// choice of the shift on `calibration` (history, held-out rows on the same columns): the path
/// of Python's `Model.fit`. A grid without calibration rows is refused.
pub fn fit_rows(
    opts: &TrainingPrivacyOptions,
    train: &crate::data::Csr,
    params: &ModelParams,
    cap_seed: u64,
    calibration: Option<(crate::data::Csr, crate::data::Csr)>,
    progress: &dyn Fn(&str),
) -> Result<TrainedModel> {
    let mut trained = opts.fit(train, params, cap_seed, progress)?;
    match (calibration, trained.shift_candidates.is_empty()) {
        (_, true) => Ok(trained),
        (None, false) => Err(Error::Invalid(
            "dp_shift_grid chooses the shift on calibration users: give their rows too".into(),
        )),
        (Some((history, heldout)), false) => {
            let cal = HeldOutRows {
                history,
                heldout,
                ids: Vec::new(),
                population: "validation",
                split: "the caller's calibration rows".into(),
            };
            let n = train.cols();
            choose_with(
                &mut trained,
                &cal,
                None,
                n,
                opts.dp_select_epsilon(),
                &mut choice_rng(),
            )?;
            Ok(trained)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The law is the exponential mechanism's: ratios exp(ε (s_a − s_b)/2), and a neighbour's
    /// scores (each moved by at most 1) change no probability by more than e^ε.
    #[test]
    fn the_law_is_the_exponential_mechanisms() {
        let s = [10.0, 12.0, 9.0, 12.5];
        let p = em_law(&s, 0.8);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for a in 0..4 {
            for b in 0..4 {
                let want = (0.8 * (s[a] - s[b]) / 2.0f64).exp();
                assert!((p[a] / p[b] - want).abs() < 1e-12 * want);
            }
        }
        let moved = [11.0, 11.0, 10.0, 11.5];
        let q = em_law(&moved, 0.8);
        for k in 0..4 {
            assert!((p[k] / q[k]).ln().abs() <= 0.8 + 1e-12, "{k}");
        }
        // Power: at 2ε the bound fails for this neighbour.
        let p2 = em_law(&s, 1.6);
        let q2 = em_law(&moved, 1.6);
        assert!((0..4).any(|k| (p2[k] / q2[k]).ln().abs() > 0.8 + 0.1));
    }
}
