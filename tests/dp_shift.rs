//! The private choice of a DP fit's shift (docs/training-privacy.md, "A private choice of the
//! shift"): the grid's fits are post-processing of the one noisy Gram matrix, the choice follows
//! the exponential mechanism's law, and the release records the grid and the chosen shift with
//! one ε_T for training and calibration users. The neighbour audit of such a release is in
//! `release_audit`.

use recsel::data::csr_from_rows;
use recsel::evaluate::shift::{choose_with, em_draw, em_law};
use recsel::model::dp::{fit_private, GramMechanism};
use recsel::model::options::TrainingPrivacyOptions;
use recsel::model::{Method, Model, ModelParams, Precision};
use recsel::numerics::hypothesis::chi_square_gof;
use recsel::options::OptionTable;
use recsel::privacy::report::{PrivacyReport, MODEL_WEIGHTS, SHIFT_CHOICE};
use recsel::privacy::{NoiseSource, Population};

use crate::privacy_report::{fit, part, report_json};

/// 300 users over 40 items, each with 10 items from a band around their own position.
fn rows() -> Vec<Vec<u32>> {
    (0..300u32)
        .map(|u| {
            let mut r: Vec<u32> = (0..10).map(|k| (u + k * k) % 40).collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect()
}

fn weights(m: &Model) -> Vec<f64> {
    match m {
        Model::Ease(e) => e.b.clone(),
        Model::Sansa(s) => [s.w().data(), s.w_r().data()].concat(),
        Model::Popular(p) => p.clone(),
    }
}

/// Every fit of a grid is the fit of that shift alone on the same release: with the noise seeded,
/// the grid's fit at K equals bit for bit the single fit at K (EASE, and SANSA in f64), for both
/// contribution bounds — the grid spends nothing beyond the one noisy matrix. Power: another
/// noise seed gives other weights.
#[test]
fn a_grids_fits_are_post_processing_of_one_release() {
    let x = csr_from_rows(&rows(), 40);
    for method in [Method::Ease, Method::Exact] {
        let params = ModelParams::new(method, 1.0, 0.5)
            .unwrap()
            .with_precision(Precision::F64);
        for bound in [
            recsel::model::dp::ContributionBound::Weight,
            recsel::model::dp::ContributionBound::Sample,
        ] {
            let mech = GramMechanism::new(4.0, 1e-8, 10, false, NoiseSource::InsecureSeed(7))
                .unwrap()
                .with_bound(bound);
            let grid = mech.with_shift_grid(&[1.0, 3.0, 10.0]).unwrap();
            let g = fit_private(&x, &params, &grid, 1, &|_| {}).unwrap();
            assert_eq!(g.by_shift.len(), 3);
            for f in &g.by_shift {
                let one = fit_private(&x, &params, &mech.with_shift(f.shift).unwrap(), 1, &|_| {})
                    .unwrap();
                assert_eq!(one.l2_used, f.l2_used, "{method:?} {bound:?} K={}", f.shift);
                assert_eq!(
                    weights(&one.model),
                    weights(&f.model),
                    "{method:?} {bound:?} K={}",
                    f.shift
                );
            }
            // The training entry names every λ and the part that chooses among them.
            assert!(
                g.privacy.note.contains("λ used one of") && g.privacy.note.contains(SHIFT_CHOICE),
                "{}",
                g.privacy.note
            );
            assert_eq!(g.privacy.epsilon, one_eps(&mech));
            let other = GramMechanism::new(4.0, 1e-8, 10, false, NoiseSource::InsecureSeed(8))
                .unwrap()
                .with_bound(bound)
                .with_shift_grid(&[1.0, 3.0, 10.0])
                .unwrap();
            let h = fit_private(&x, &params, &other, 1, &|_| {}).unwrap();
            assert_ne!(weights(&h.by_shift[0].model), weights(&g.by_shift[0].model));
        }
    }
    // A grid is 2 to 8 distinct shifts, each ≥ 1.
    let mech = GramMechanism::new(4.0, 1e-8, 10, false, NoiseSource::InsecureSeed(7)).unwrap();
    for bad in [&[3.0][..], &[0.5, 3.0], &[1.0, 1.0], &[1.0; 9]] {
        assert!(mech.with_shift_grid(bad).is_err(), "{bad:?}");
    }
}

fn one_eps(mech: &GramMechanism) -> Option<f64> {
    mech.privacy(1.0).epsilon
}

/// The choice's law is the exponential mechanism's on the exact scores: 200,000 draws on a toy
/// of five candidates with fixed scores pass a chi-square test against P(k) ∝ exp(ε S_k / 2)
/// (p ≥ 1e-6), and the same draws are refuted against the law at 2ε (power: a choice twice as
/// sharp, i.e. spending 2ε, is caught) and against the uniform choice.
#[test]
fn the_shift_choice_follows_the_exponential_law() {
    let sums = [40.0, 42.5, 43.0, 41.0, 38.0];
    let eps = 1.0;
    let law = em_law(&sums, eps);
    let mut rng = recsel::rng::Streams::new(3).stream(1, 0, 0, 0);
    let mut counts = [0u64; 5];
    for _ in 0..200_000 {
        counts[em_draw(&law, &mut rng)] += 1;
    }
    let honest = chi_square_gof(&counts, &law);
    println!("EM law at eps {eps}: counts {counts:?}, law {law:?}, chi-square {honest:?}");
    assert!(honest.p_value >= 1e-6, "{honest:?}");
    let sharp = chi_square_gof(&counts, &em_law(&sums, 2.0 * eps));
    println!("against the law at 2 eps: {sharp:?}");
    assert!(sharp.p_value < 1e-6, "{sharp:?}");
    let uniform = chi_square_gof(&counts, &[0.2; 5]);
    assert!(uniform.p_value < 1e-6, "{uniform:?}");
}

/// `choose_with` keeps the chosen fit of the grid (its model and λ) and records the grid, the
/// chosen shift and the calibration users' entry — at ε_s, unit one calibration user replaced —
/// and nothing of the scores; through the options (the path of `recsel fit` and Python), the
/// grid needs calibration rows and excludes `dp-shift`.
#[test]
fn the_choice_keeps_one_fit_of_the_grid_and_records_only_the_shift() {
    let r = rows();
    let x = csr_from_rows(&r[..240], 40);
    let history = csr_from_rows(
        &r[240..]
            .iter()
            .map(|v| v[..v.len() - 2].to_vec())
            .collect::<Vec<_>>(),
        40,
    );
    let heldout = csr_from_rows(
        &r[240..]
            .iter()
            .map(|v| v[v.len() - 2..].to_vec())
            .collect::<Vec<_>>(),
        40,
    );
    let params = ModelParams::new(Method::Ease, 1.0, 1.0).unwrap();
    let mut opts = TrainingPrivacyOptions::default();
    assert!(opts.set("dp_epsilon", "4").unwrap());
    assert!(opts.set("dp_shift_grid", "1,3,10").unwrap());
    assert!(opts.set("dp_select_epsilon", "0.5").unwrap());
    let trained = opts.fit(&x, &params, 1, &|_| {}).unwrap();
    assert_eq!(trained.shift_candidates.len(), 3);
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..15 {
        let mut t = opts.fit(&x, &params, 1, &|_| {}).unwrap();
        let cal = recsel::data::heldout::HeldOutRows {
            history: history.clone(),
            heldout: heldout.clone(),
            ids: Vec::new(),
            population: "validation",
            split: String::new(),
        };
        let mut rng = recsel::rng::Streams::new(seed).stream(2, 0, 0, 0);
        choose_with(&mut t, &cal, None, 40, 0.5, &mut rng).unwrap();
        let c = t.shift_choice.clone().unwrap();
        assert_eq!(c.grid, vec![1.0, 3.0, 10.0]);
        let k = c.grid.iter().position(|&s| s == c.chosen).unwrap();
        assert_eq!(weights(&t.model), weights(&t.shift_candidates[k].model));
        assert_eq!(t.l2_used, t.shift_candidates[k].l2_used);
        assert_eq!(c.privacy.population, Population::Calibration);
        assert_eq!(c.privacy.epsilon, Some(0.5));
        assert!(c.privacy.unit.starts_with("one calibration user replaced"));
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("score\":"), "{json}");
        seen.insert(k);
    }
    // At ε_s = 0.5 on 60 users the choice is random: more than one shift is drawn.
    assert!(seen.len() > 1, "{seen:?}");

    let no_cal = recsel::evaluate::shift::fit_rows(&opts, &x, &params, 1, None, &|_| {});
    assert!(no_cal.unwrap_err().to_string().contains("calibration"));
    let mut both = opts.clone();
    assert!(both.set("dp_shift", "3").unwrap());
    assert!(both.fit(&x, &params, 1, &|_| {}).is_err());
    let mut alone = TrainingPrivacyOptions::default();
    assert!(alone.set("dp_epsilon", "4").unwrap());
    assert!(alone.set("dp_select_epsilon", "0.5").unwrap());
    assert!(alone.fit(&x, &params, 1, &|_| {}).is_err());
}

/// The privacy report's ε_T of a fit with its shift choice is the model weights' ε (training
/// users) plus the choice's (calibration users), in JSON and in words; without a choice there is
/// no such total (power: the sum is not made up from other parts).
#[test]
fn the_reports_total_is_training_plus_selection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(
        &dir,
        &[
            "--dp-epsilon",
            "3.9",
            "--dp-shift-grid",
            "1,3",
            "--dp-select-epsilon",
            "0.1",
            "--validation-users",
            "0.1",
        ],
    );
    let r = report_json(&dir);
    let w = part(&r, MODEL_WEIGHTS);
    let s = part(&r, SHIFT_CHOICE);
    assert_eq!(w["population"], "training users");
    assert_eq!(s["population"], "calibration users");
    let (et, es) = (
        w["epsilon"].as_f64().unwrap(),
        s["epsilon"].as_f64().unwrap(),
    );
    assert!(
        (et - 3.9).abs() < 1e-9 && (es - 0.1).abs() < 1e-12,
        "{et} {es}"
    );
    let report: PrivacyReport = serde_json::from_value(r.clone()).unwrap();
    let (e, _) = report.fit_total().unwrap();
    assert!((e - (et + es)).abs() < 1e-12, "{e}");
    let text =
        String::from_utf8(crate::util::ok(&["privacy", "--model", dir.to_str().unwrap()]).stdout)
            .unwrap();
    println!("{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("fit with shift choice") && l.contains("(4")),
        "{text}"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("model.json")).unwrap()).unwrap();
    let chosen = meta["shift_choice"]["chosen"].as_f64().unwrap();
    assert!(chosen == 1.0 || chosen == 3.0, "{meta:#}");
    // Without a grid: no shift part, no fit total.
    let plain = tmp.path().join("p");
    fit(&plain, &["--dp-epsilon", "3.9"]);
    let report: PrivacyReport = serde_json::from_value(report_json(&plain)).unwrap();
    assert!(report.fit_total().is_none());
    assert!(!report.to_string().contains("fit with shift choice"));
}
