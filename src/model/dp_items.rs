//! A DP fit on a privately chosen item set (docs/training-privacy.md, "Large catalogues"): the
//! training users' Gram matrix released on K items only, the K chosen by a first DP release of
//! the item counts. Both releases are zCDP and add up; the fitted K-item model is embedded into
//! the full catalogue, where the items outside the set have no weights.
//!
//! * **Stage 1, item counts.** A user with d items adds the integer weight
//!   `w(d) = ⌊M·√(min(1, C/d))⌋` (M = [`COUNT_SCALE`], C = `--dp-cap`) to the count of each of
//!   their items; the released count is the sum over users divided by M, plus noise. Every user's
//!   items count, whatever their number: a long history is down-weighted instead of sampled.
//! * **Sensitivity of stage 1** (add/remove one user; [`count_weight`], [`count_sensitivity`]).
//!   The user changes exactly the d counts of their items, each by `w(d)`, so the L2 distance of
//!   the two integer count vectors is `√d · w(d)`. If d ≤ C, `w(d) = M` and `√d·M ≤ √C·M`. If
//!   d > C, `w(d)` is the largest integer with `w² · d ≤ M² · C` (computed exactly on integers),
//!   so `√d · w(d) ≤ M√C`. A user with no item changes nothing. Hence the L2 sensitivity of the
//!   integer vector is at most `M√C`, of the released counts (divided by M) at most `√C`, with
//!   equality at d = C.
//! * **Noise and accounting of stage 1.** Gaussian noise of standard deviation σ₁ on each count
//!   (on the integer vector: M·σ₁; with `secure`, the discrete Gaussian of variance parameter
//!   M²σ₁², rounded up onto the 2⁻¹⁰ grid) is ρ₁-zCDP with `ρ₁ = C / (2σ₁²)` (Bun–Steinke 2016;
//!   Canonne–Kamath–Steinke 2020, Thm 14 for the discrete one). ρ₁ is the share `--dp-items-share`
//!   of the total ρ the requested (ε, δ) allows.
//! * **Selection.** The K items of largest noisy count (ties to the smaller index) are a function
//!   of the released counts alone: post-processing, no privacy cost.
//! * **Stage 2, the Gram matrix** of the training rows restricted to the K items, through the
//!   ordinary [`fit_private`] with the Gram mechanism's σ scaled by `1/√(1 − share)`, so that its
//!   ρ₂ = (1 − share)·ρ. The item set is fixed before stage 2 reads the data (it depends on the
//!   data only through stage 1's output), so adaptive composition of zCDP applies: the whole fit
//!   is (ρ₁ + ρ₂)-zCDP, turned into (ε, δ) once by [`zcdp_epsilon`].
//! * **Positive definiteness** is stage 2's: the floor `σ₂(2√K + …)` grows with √K, not √n.

use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use super::dp::{fit_private, GramMechanism, PrivateFit};
use super::sansa::{Sansa, SparseWeights};
use super::{Ease, Method, Model, ModelParams};
use crate::data::Csr;
use crate::error::{Error, Result};
use crate::privacy::{
    contribution_weight, discrete_gaussian_on_grid, zcdp_epsilon, Gaussian, PopulationPrivacy,
};
use crate::rng::{name_id, Streams};

/// The integer scale of the stage-1 weights: a user's weight per item is a multiple of 1/M.
/// 256 keeps the rounding loss of the weight below 1/256 of an interaction and every count far
/// inside the integers an `f64` holds exactly.
pub const COUNT_SCALE: u64 = 256;

/// The default share of the training users' ρ spent on the item counts (`--dp-items-share`):
/// stage 2's σ grows by `1/√(1 − share)`, 5.4% at 0.1, while the counts that choose the items
/// are sums over all the users, large beside their noise for the items a model can use
/// (docs/training-privacy.md, "Large catalogues").
pub const DEFAULT_SHARE: f64 = 0.1;

/// The stage-1 weight of each item of a user with `d` items under the contribution bound `cap`,
/// in units of 1/[`COUNT_SCALE`]: `M` when d ≤ C, else the largest integer w with
/// `w²·d ≤ M²·C`, so that the user's vector has L2 norm `√d·w ≤ M√C`: [`contribution_weight`].
pub fn count_weight(d: usize, cap: usize) -> u64 {
    contribution_weight(COUNT_SCALE, d as u128, cap as u128)
}

/// L2 sensitivity of the released counts (in interactions, the integer vector divided by
/// [`COUNT_SCALE`]) under adding or removing one user: `√C` (the module's doc).
pub fn count_sensitivity(cap: usize) -> f64 {
    (cap as f64).sqrt()
}

/// The weighted item counts of the rows of `x` in units of 1/[`COUNT_SCALE`]: item j's count is
/// `Σ_u w(d_u)` over the users u who have j.
pub fn weighted_counts(x: &Csr, cap: usize) -> Vec<u64> {
    let ptr = x.indptr();
    let ptr = ptr.raw_storage();
    let idx = x.indices();
    let mut counts = vec![0u64; x.cols()];
    for u in 0..x.rows() {
        let items = &idx[ptr[u]..ptr[u + 1]];
        let w = count_weight(items.len(), cap);
        for &j in items {
            counts[j as usize] += w;
        }
    }
    counts
}

/// The two-stage release: the item counts (stage 1) and the Gram mechanism restricted to the
/// chosen items (stage 2), with their shares of one zCDP budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItemSetMechanism {
    /// Items kept (K).
    pub items: usize,
    /// The share of the total ρ stage 1 spends.
    pub share: f64,
    /// The contribution bound C of stage 1 (the Gram mechanism's cap).
    pub cap: usize,
    /// ρ of stage 1, with the noise actually drawn.
    pub rho: f64,
    /// Standard deviation of each released count's noise, in interactions.
    pub sigma: f64,
    /// The secure path's variance parameter of the integer counts, times 2^10 (rounded up).
    sigma2_num: u128,
    /// Stage 2: the Gram mechanism with ρ₂ = (1 − share)·ρ.
    pub gram: GramMechanism,
}

impl ItemSetMechanism {
    /// Splits the budget of `total` (the mechanism of the whole fit: its ρ, δ, cap, noise and
    /// shift) into the counts' share and the Gram matrix's rest, keeping `items` items.
    pub fn new(total: &GramMechanism, items: usize, share: f64) -> Result<Self> {
        if items == 0 {
            return Err(Error::InvalidParameter {
                name: "dp-items",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        if !(share > 0.0 && share < 1.0) {
            return Err(Error::InvalidParameter {
                name: "dp-items-share",
                requirement: "in (0, 1)",
                value: share,
            });
        }
        let cap = total.cap;
        // Integer units on the secure path: variance M²σ², rounded up onto the grid; ρ from the
        // rounded value.
        let Gaussian {
            sigma,
            rho,
            sigma2_num,
        } = Gaussian::calibrate(
            count_sensitivity(cap),
            share * total.rho,
            total.secure,
            COUNT_SCALE as f64,
        );
        Ok(ItemSetMechanism {
            items,
            share,
            cap,
            rho,
            sigma,
            sigma2_num,
            gram: total.with_sigma_scaled(1.0 / (1.0 - share).sqrt()),
        })
    }

    /// ρ of the whole fit: stage 1's plus stage 2's.
    pub fn rho_total(&self) -> f64 {
        self.rho + self.gram.rho
    }

    /// ε of the whole fit at its δ: [`zcdp_epsilon`] of [`ItemSetMechanism::rho_total`].
    pub fn epsilon(&self) -> f64 {
        zcdp_epsilon(self.rho_total(), self.gram.delta)
    }

    /// Stage 1: every item's weighted count (in interactions) plus its noise.
    pub fn noisy_counts(&self, x: &Csr) -> Result<Vec<f64>> {
        let counts = weighted_counts(x, self.cap);
        let m = COUNT_SCALE as f64;
        if self.gram.secure {
            let mut rng = self.gram.source.secure_rng(|s| s ^ 0x6974_656d)?;
            Ok(counts
                .iter()
                .map(|&c| {
                    let z = discrete_gaussian_on_grid(&mut rng, self.sigma2_num);
                    (c as i128 + z) as f64 / m
                })
                .collect())
        } else {
            let mut rng =
                Streams::new(self.gram.source.fast_seed()).stream(name_id("dp-items"), 0, 0, 0);
            Ok(counts
                .iter()
                .map(|&c| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    c as f64 / m + self.sigma * z
                })
                .collect())
        }
    }
}

/// The `k` items of largest noisy count, ties to the smaller index, in ascending item order
/// (all items when `k` is at least their number).
pub fn top_items(noisy: &[f64], k: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..noisy.len() as u32).collect();
    if k < order.len() {
        order.select_nth_unstable_by(k, |&a, &b| {
            noisy[b as usize]
                .total_cmp(&noisy[a as usize])
                .then(a.cmp(&b))
        });
        order.truncate(k);
    }
    order.sort_unstable();
    order
}

/// The rows of `x` with only the columns `items` (ascending), renumbered `0..K` in that order.
pub fn restrict_columns(x: &Csr, items: &[u32]) -> Csr {
    let mut code = vec![u32::MAX; x.cols()];
    for (k, &j) in items.iter().enumerate() {
        code[j as usize] = k as u32;
    }
    let ptr = x.indptr();
    let ptr = ptr.raw_storage();
    let idx = x.indices();
    let mut indptr = Vec::with_capacity(x.rows() + 1);
    indptr.push(0usize);
    let mut indices = Vec::new();
    for u in 0..x.rows() {
        // The renumbering keeps the order: each row stays sorted.
        indices.extend(
            idx[ptr[u]..ptr[u + 1]]
                .iter()
                .map(|&j| code[j as usize])
                .filter(|&c| c != u32::MAX),
        );
        indptr.push(indices.len());
    }
    let data = vec![1.0f32; indices.len()];
    Csr::new((x.rows(), items.len()), indptr, indices, data)
}

/// `m` (K × K, either storage order) with row and column k moved to `items[k]` of an `n × n`
/// matrix: the other rows and columns are empty. `items` ascending, so every stored outer
/// vector keeps its inner order.
fn embed_sparse(m: &SparseWeights, items: &[u32], n: usize) -> SparseWeights {
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let (mut indices, mut data) = (Vec::with_capacity(m.nnz()), Vec::with_capacity(m.nnz()));
    let mut next = 0usize;
    for outer in 0..n {
        if next < items.len() && items[next] as usize == outer {
            if let Some(v) = m.outer_view(next) {
                for (i, &x) in v.iter() {
                    indices.push(items[i]);
                    data.push(x);
                }
            }
            next += 1;
        }
        indptr.push(indices.len());
    }
    if m.is_csc() {
        SparseWeights::new_csc((n, n), indptr, indices, data)
    } else {
        SparseWeights::new((n, n), indptr, indices, data)
    }
}

/// Bytes of a dense `n × n` f64 matrix.
fn dense_bytes(n: usize) -> f64 {
    8.0 * n as f64 * n as f64
}

/// The K-item model `model` (fitted on the columns `items` of the catalogue) as a model of all
/// `n` items: SANSA's factors reindexed (the items outside the set have empty rows and columns),
/// EASE's dense `B` copied into an `n × n` matrix of zeros when that fits in 90% of the available
/// memory (else an error naming `--method exact`). Every item outside the set scores 0 for every
/// user, and a user's items outside the set add nothing to any score.
pub fn embed(model: Model, items: &[u32], n: usize) -> Result<Model> {
    assert!(
        items.windows(2).all(|w| w[0] < w[1]) && items.last().is_none_or(|&j| (j as usize) < n),
        "the item set is ascending and inside the catalogue"
    );
    assert_eq!(
        model.n_items(),
        items.len(),
        "one model item per chosen item"
    );
    match model {
        Model::Sansa(s) => Ok(Model::Sansa(Sansa::new(
            embed_sparse(s.w(), items, n),
            embed_sparse(s.w_r(), items, n),
        ))),
        Model::Ease(e) => {
            if let Some(avail) = super::ease::available_memory_bytes() {
                if dense_bytes(n) > 0.9 * avail as f64 {
                    return Err(Error::Invalid(format!(
                        "EASE on a chosen item set is served as a dense {n}x{n} matrix ({:.1} GiB) \
                         but only {:.1} GiB is available; use --method exact (SANSA's sparse \
                         weights embed into the catalogue without a dense matrix)",
                        dense_bytes(n) / (1u64 << 30) as f64,
                        avail as f64 / (1u64 << 30) as f64
                    )));
                }
            }
            let k = e.n;
            let mut b = vec![0.0f64; n * n];
            b.par_chunks_mut(n)
                .enumerate()
                .filter_map(|(j, row)| items.binary_search(&(j as u32)).ok().map(|r| (r, row)))
                .for_each(|(r, row)| {
                    for (c, &j) in items.iter().enumerate() {
                        row[j as usize] = e.b[r * k + c];
                    }
                });
            Ok(Model::Ease(Ease { n, b }))
        }
        Model::Popular(_) => Err(Error::Invalid(
            "a DP fit on an item set takes --method ease or exact".into(),
        )),
    }
}

/// The chosen items of a fit on an item set and the stage-1 counts that chose them.
#[derive(Debug, Clone)]
pub struct ItemSelection {
    /// The chosen items, ascending.
    pub items: Vec<u32>,
    /// Every item's noisy weighted count (stage 1), in interactions.
    pub noisy_counts: Vec<f64>,
}

/// Whether the DP fit's dense matrix on `n` items fits in 90% of the available memory: EASE's
/// three f64 matrices, SANSA's one matrix in its precision (the checks of the two fits).
pub fn dense_fit_fits(params: &ModelParams, n: usize) -> bool {
    let need = match params.method {
        Method::Ease => 3.0 * dense_bytes(n),
        _ => params.precision.bytes() as f64 * n as f64 * n as f64,
    };
    super::ease::available_memory_bytes().is_none_or(|avail| need <= 0.9 * avail as f64)
}

/// A DP fit, on an item set when `items` is given (K and the share of ρ of its counts), else on
/// the whole catalogue ([`fit_private`]) — which is refused, naming `--dp-items`, when its dense
/// matrix does not fit in memory.
pub fn fit_private_with_items(
    train: &Csr,
    params: &ModelParams,
    mech: &GramMechanism,
    items: Option<(usize, f64)>,
    cap_seed: u64,
    progress: &dyn Fn(&str),
) -> Result<(PrivateFit, Option<ItemSelection>)> {
    let n = train.cols();
    let Some((k, share)) = items else {
        if matches!(params.method, Method::Ease | Method::Exact) && !dense_fit_fits(params, n) {
            return Err(Error::Invalid(format!(
                "a DP fit on all {n} items needs a dense {n}x{n} noisy Gram matrix, which does not \
                 fit in the available memory: give --dp-items K to fit on K items chosen by a DP \
                 count (docs/training-privacy.md, \"Large catalogues\")"
            )));
        }
        return Ok((fit_private(train, params, mech, cap_seed, progress)?, None));
    };
    let set = ItemSetMechanism::new(mech, k, share)?;
    let t = std::time::Instant::now();
    progress("noisy item counts (DP item set)");
    let noisy_counts = set.noisy_counts(train)?;
    let chosen = top_items(&noisy_counts, k);
    let restricted = restrict_columns(train, &chosen);
    let counts_s = t.elapsed().as_secs_f64();
    let mut f = fit_private(&restricted, params, &set.gram, cap_seed, progress)?;
    drop(restricted);
    f.report.stages.insert(0, ("item set".into(), counts_s));
    let t = std::time::Instant::now();
    f.model = embed(f.model, &chosen, n)?;
    f.by_shift = embed_each(f.by_shift, &chosen, n)?;
    f.report.stage("embed", t);
    f.privacy = set.privacy(f.privacy, n);
    Ok((
        f,
        Some(ItemSelection {
            items: chosen,
            noisy_counts,
        }),
    ))
}

/// [`embed`] of every fit of a shift grid.
pub fn embed_each(
    fits: Vec<super::dp::ShiftFit>,
    items: &[u32],
    n: usize,
) -> Result<Vec<super::dp::ShiftFit>> {
    fits.into_iter()
        .map(|f| {
            Ok(super::dp::ShiftFit {
                model: embed(f.model, items, n)?,
                ..f
            })
        })
        .collect()
}

impl ItemSetMechanism {
    /// The training users' entry of the whole fit from stage 2's (`gram`, as [`fit_private`]
    /// states it for the restricted matrix): ε of the summed ρ, both stages named.
    pub fn privacy(&self, gram: PopulationPrivacy, n: usize) -> PopulationPrivacy {
        let noise = if self.gram.secure {
            "exact discrete Gaussian"
        } else {
            "Gaussian"
        };
        PopulationPrivacy {
            epsilon: Some(self.epsilon()),
            mechanism: format!(
                "two stages, zCDP ρ={:.6} = {:.6} + {:.6}, ε from ρ by Canonne–Kamath–Steinke: \
                 (1) {noise} on every item's weighted count, the top {} of {n} items kept; \
                 (2) {}",
                self.rho_total(),
                self.rho,
                self.gram.rho,
                self.items.min(n),
                gram.mechanism
            ),
            note: format!(
                "item counts: σ₁={:.4}, L2 sensitivity √C={:.4} (each of a user's d items \
                 weighted min(1, √(C/d)) on the 1/{COUNT_SCALE} grid), {:.0}% of ρ; Gram matrix on \
                 the chosen items: {}",
                self.sigma,
                count_sensitivity(self.cap),
                100.0 * self.share,
                gram.note
            ),
            ..gram
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::data::csr_from_rows as csr;
    use crate::privacy::NoiseSource;

    /// Adding one user moves the integer count vector by exactly √d·w(d) in L2, never more than
    /// M√C, with equality at d = C; at every d ≥ C the bound is nearly reached (the weight is
    /// the largest that fits), and w(d) + 1 would break it. d = 0 changes nothing.
    #[test]
    fn one_user_moves_the_counts_by_at_most_the_sensitivity() {
        let cap = 20;
        let m = COUNT_SCALE as f64;
        let base = vec![vec![0u32, 1, 2], vec![3, 4], vec![0, 5, 6, 7]];
        for d in [0usize, 1, 7, 19, 20, 21, 23, 80, 99, 100, 400] {
            let mut with = base.clone();
            with.push((0..d as u32).collect());
            let (c0, c1) = (
                weighted_counts(&csr(&base, 400), cap),
                weighted_counts(&csr(&with, 400), cap),
            );
            let sq: f64 = c0
                .iter()
                .zip(&c1)
                .map(|(&a, &b)| (b as f64 - a as f64).powi(2))
                .sum();
            let dist = sq.sqrt() / m;
            let w = count_weight(d, cap) as f64;
            assert!((dist - (d as f64).sqrt() * w / m).abs() < 1e-12, "d={d}");
            assert!(dist <= count_sensitivity(cap) + 1e-12, "d={d}: {dist}");
            if d == cap {
                assert!((dist - count_sensitivity(cap)).abs() < 1e-12);
            }
            if d >= cap {
                // The largest weight that fits: one more unit exceeds the bound.
                let over = (d as f64).sqrt() * (w + 1.0) / m;
                assert!(over > count_sensitivity(cap), "d={d}: w+1 still fits");
                assert!(dist > 0.98 * count_sensitivity(cap), "d={d}: {dist}");
            }
            if d == 0 {
                assert_eq!(c0, c1);
            }
        }
        // Exact on integers where a float square root is inexact: w² · d ≤ M² C < (w+1)² · d.
        for (d, cap) in [(3usize, 2usize), (1_000_003, 20), (49, 1), (65_536 * 3, 3)] {
            let w = count_weight(d, cap) as u128;
            let bound = (COUNT_SCALE as u128).pow(2) * cap as u128;
            assert!(w * w * d as u128 <= bound && (w + 1) * (w + 1) * d as u128 > bound);
        }
    }

    /// The total ρ is the two stages' sum, the reported ε is `zcdp_epsilon` of that sum and equals
    /// the requested ε; leaving either stage out of the sum would report a smaller ε (by more
    /// than the tolerance of the check), on both noise paths.
    #[test]
    fn the_two_stages_compose_to_the_requested_budget() {
        for secure in [false, true] {
            for (eps, share) in [(1.0, 0.1), (4.0, 0.1), (8.0, 0.3), (2.0, 0.02)] {
                let total = GramMechanism::new(eps, 1e-8, 20, secure, NoiseSource::InsecureSeed(1))
                    .unwrap();
                let s = ItemSetMechanism::new(&total, 500, share).unwrap();
                assert!(
                    (s.rho_total() - total.rho).abs() < 1e-6 * total.rho,
                    "{eps}"
                );
                assert!(s.rho_total() <= total.rho * (1.0 + 1e-12));
                assert!((s.rho - share * total.rho).abs() < 1e-6 * total.rho);
                assert!((s.gram.rho - (1.0 - share) * total.rho).abs() < 1e-6 * total.rho);
                assert_eq!(s.epsilon(), zcdp_epsilon(s.rho + s.gram.rho, 1e-8));
                assert!(
                    (s.epsilon() - eps).abs() < 1e-4 * eps,
                    "{eps}: {}",
                    s.epsilon()
                );
                // Either stage alone is far from the requested ε.
                assert!(zcdp_epsilon(s.gram.rho, 1e-8) < (1.0 - 0.005) * eps);
                assert!(zcdp_epsilon(s.rho, 1e-8) < 0.7 * eps);
                // σ₁ is calibrated to ρ₁ with the sensitivity √C.
                let c = count_sensitivity(20);
                assert!((c * c / (2.0 * s.sigma * s.sigma) - s.rho).abs() < 1e-9 * s.rho);
                let p = s.privacy(total.privacy(100.0), 1000);
                assert_eq!(p.epsilon, Some(s.epsilon()));
                assert_eq!(p.population, crate::privacy::Population::Training);
            }
        }
        let total = GramMechanism::new(1.0, 1e-8, 20, false, NoiseSource::InsecureSeed(1)).unwrap();
        assert!(ItemSetMechanism::new(&total, 0, 0.1).is_err());
        assert!(ItemSetMechanism::new(&total, 10, 0.0).is_err());
        assert!(ItemSetMechanism::new(&total, 10, 1.0).is_err());
    }

    /// The stage-1 noise has the calibrated σ₁ (mean and variance over 20,000 items within five
    /// standard errors; a σ off by 30% fails), on the secure path on the 1/M grid.
    #[test]
    fn the_count_noise_has_the_calibrated_scale() {
        let n = 20_000;
        let x = csr(&[vec![0, 1], vec![1, 2]], n);
        let clean = weighted_counts(&x, 20);
        for secure in [false, true] {
            let total =
                GramMechanism::new(2.0, 1e-6, 20, secure, NoiseSource::InsecureSeed(5)).unwrap();
            let s = ItemSetMechanism::new(&total, 10, 0.1).unwrap();
            let noisy = s.noisy_counts(&x).unwrap();
            let z: Vec<f64> = noisy
                .iter()
                .zip(&clean)
                .map(|(&v, &c)| v - c as f64 / COUNT_SCALE as f64)
                .collect();
            if secure {
                assert!(z.iter().all(|v| (v * COUNT_SCALE as f64).fract() == 0.0));
            }
            let m = n as f64;
            let mean = z.iter().sum::<f64>() / m;
            let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / m;
            let s2 = s.sigma * s.sigma;
            assert!(
                mean.abs() < 5.0 * (s2 / m).sqrt(),
                "secure={secure}: {mean}"
            );
            let tol = 5.0 * (2.0 / m).sqrt();
            assert!(
                (var / s2 - 1.0).abs() < tol,
                "secure={secure}: {var} vs {s2}"
            );
            for wrong in [1.3f64, 1.0 / 1.3] {
                assert!((var / (s2 * wrong * wrong) - 1.0).abs() > tol);
            }
        }
    }

    /// The top K by noisy count, ties to the smaller index, ascending; the restriction keeps the
    /// chosen columns of every row renumbered in order.
    #[test]
    fn the_item_set_is_the_top_of_the_noisy_counts() {
        let noisy = [3.0, 9.0, 1.0, 9.0, 7.0, -2.0, 7.0];
        assert_eq!(top_items(&noisy, 3), vec![1, 3, 4]);
        assert_eq!(top_items(&noisy, 4), vec![1, 3, 4, 6]);
        assert_eq!(top_items(&noisy, 10), (0..7).collect::<Vec<u32>>());
        let x = csr(&[vec![0, 1, 4, 6], vec![2, 5], vec![3, 4]], 7);
        let r = restrict_columns(&x, &[1, 3, 4]);
        assert_eq!(r.cols(), 3);
        let row = |u| crate::data::row_items(&r, u).to_vec();
        assert_eq!((row(0), row(1), row(2)), (vec![0, 2], vec![], vec![1, 2]));
    }

    /// The embedded model scores every user exactly as the K-item model scores their chosen
    /// items (one user and block scoring, bit for bit), gives 0 to every other item, and a
    /// user's unchosen items change nothing; EASE the same.
    #[test]
    fn the_embedded_model_scores_as_the_item_set_model() {
        let (n, k) = (90usize, 30usize);
        let rows: Vec<Vec<u32>> = (0..300u32)
            .map(|u| {
                (0..9)
                    .map(|t| (u * 11 + t * t * 5) % k as u32)
                    .collect::<std::collections::BTreeSet<u32>>()
                    .into_iter()
                    .collect()
            })
            .collect();
        let xk = csr(&rows, k);
        let chosen: Vec<u32> = (0..k as u32).map(|c| c * 3 + (c % 3)).collect();
        for method in [Method::Exact, Method::Ease] {
            let params = ModelParams::new(method, 50.0, 0.3).unwrap();
            let (small, _) = super::super::fit(&xk, &params, &|_| {}).unwrap();
            let big = embed(small.clone(), &chosen, n).unwrap();
            assert_eq!(big.n_items(), n);
            let users: Vec<Vec<u32>> = (0..40u32)
                .map(|u| {
                    (0..k as u32)
                        .filter(|c| (c * 7 + u) % 5 == 0)
                        .collect::<Vec<u32>>()
                })
                .collect();
            let mut sc = super::super::Scratch::new(n);
            let (mut a, mut b) = (vec![0.0; k], vec![0.0; n]);
            let refs: Vec<Vec<u32>> = users
                .iter()
                .map(|u| u.iter().map(|&c| chosen[c as usize]).collect())
                .collect();
            let slices: Vec<&[u32]> = refs.iter().map(|v| v.as_slice()).collect();
            let mut block = vec![0.0; slices.len() * n];
            big.score_block(&slices, &mut block, &mut sc);
            for (ui, u) in users.iter().enumerate() {
                small.score_into(u, &mut a, &mut sc);
                // The same history with two unchosen items added.
                let mut full = refs[ui].clone();
                full.extend([1, 2]);
                full.sort_unstable();
                big.score_into(&full, &mut b, &mut sc);
                for j in 0..n {
                    // An unchosen item has no weights: it scores 0, except that dense EASE
                    // subtracts the self term (x·B − x) from every item of the history, chosen
                    // or not (SANSA's embedded factors carry it for the chosen items only).
                    let unchosen = if method == Method::Ease && full.contains(&(j as u32)) {
                        -1.0
                    } else {
                        0.0
                    };
                    let want = chosen.binary_search(&(j as u32)).map_or(unchosen, |c| a[c]);
                    assert_eq!(
                        b[j].to_bits(),
                        want.to_bits(),
                        "{method:?} user {ui} item {j}"
                    );
                    let want_block = chosen.binary_search(&(j as u32)).map_or(0.0, |c| a[c]);
                    assert_eq!(block[ui * n + j].to_bits(), want_block.to_bits());
                }
            }
            assert!(a.iter().any(|&v| v != 0.0));
        }
    }

    /// A fit on an item set through `fit_private_with_items`: K items chosen, the model spans the
    /// catalogue, λ is raised to the floor of K items (not n), the entry states the summed ε.
    #[test]
    fn a_fit_on_an_item_set_records_both_stages() {
        let rows: Vec<Vec<u32>> = (0..600u32)
            .map(|u| {
                (0..12)
                    .map(|t| (u * 7 + t * t * 3) % 40)
                    .chain([40 + u % 160])
                    .collect::<std::collections::BTreeSet<u32>>()
                    .into_iter()
                    .collect()
            })
            .collect();
        let x = csr(&rows, 200);
        let mech = GramMechanism::new(8.0, 1e-8, 10, false, NoiseSource::InsecureSeed(3))
            .unwrap()
            .with_shift(2.0)
            .unwrap();
        for method in [Method::Ease, Method::Exact] {
            let params = ModelParams::new(method, 10.0, 0.2).unwrap();
            let (f, sel) =
                fit_private_with_items(&x, &params, &mech, Some((40, 0.1)), 1, &|_| {}).unwrap();
            let sel = sel.unwrap();
            assert_eq!(sel.items.len(), 40);
            assert_eq!(sel.noisy_counts.len(), 200);
            // The 40 frequent items (counts ≥ 10 users each, vs ≤ 4 for the rest) are chosen.
            assert_eq!(sel.items, (0..40).collect::<Vec<u32>>());
            assert_eq!(f.model.n_items(), 200);
            let s = ItemSetMechanism::new(&mech, 40, 0.1).unwrap();
            assert_eq!(
                f.l2_used,
                2.0 * super::super::dp::pd_floor(s.gram.sigma, 40)
            );
            let p = &f.privacy;
            assert!((p.epsilon.unwrap() - 8.0).abs() < 1e-3, "{p:?}");
            assert!(p.mechanism.contains("the top 40 of 200 items"), "{p:?}");
            assert_eq!(f.report.stages[0].0, "item set");
            let (g, none) = fit_private_with_items(&x, &params, &mech, None, 1, &|_| {}).unwrap();
            assert!(none.is_none());
            assert_eq!(g.l2_used, 2.0 * super::super::dp::pd_floor(mech.sigma, 200));
        }
    }
}
