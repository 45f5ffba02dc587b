//! Differentially private training of the item-item models (docs/training-privacy.md): the Gram
//! matrix `XᵀX` of the training users, each user's contribution bounded by a cap on the
//! interactions kept, released with Gaussian noise on its upper triangle (mirrored), and EASE or
//! SANSA fitted from the noisy matrix alone — every weight is then post-processing of one
//! Gaussian release.
//!
//! * **Unit**: one training user, added or removed. Their contribution is bounded by one of two
//!   [`ContributionBound`]s, both functions of that user's own row only (so another user's
//!   presence never changes them): `weight` (the default) keeps every interaction and counts the
//!   user's row `q_u ≤ min(1, Δ/√(n_u(n_u+1)/2))` times ([`user_weight`]); `sample` keeps at
//!   most `cap` (C) interactions, chosen by the seed and the user's items ([`cap_rows`]).
//! * **Sensitivity**: a user with c kept items adds their weight (1 when sampled) to the
//!   c(c+1)/2 entries (i ≤ j) of the upper triangle, diagonal included, of the pairs of their
//!   items, and nothing else: the L2 distance of the two triangles is `q·sqrt(c(c+1)/2) ≤
//!   Δ = sqrt(C(C+1)/2)`.
//! * **Accounting**: i.i.d. N(0, σ²) on each of the n(n+1)/2 entries is ρ-zCDP with
//!   ρ = Δ²/(2σ²) (Bun–Steinke 2016); with `secure`, the discrete Gaussian of variance parameter
//!   σ² on the integer counts is ρ-zCDP with the same ρ (Canonne–Kamath–Steinke 2020, Thm 14);
//!   weighted, the integer sums `S·G` (weights on the grid 1/S, S = 2^14) get the discrete
//!   Gaussian of variance parameter (Sσ)² before the division by S: sensitivity SΔ, same ρ.
//!   (ε, δ) comes from ρ by [`zcdp_epsilon`], the one conversion of the crate; σ from Δ and ρ,
//!   its secure grid and the noise source are [`Gaussian`] and [`NoiseSource`] (`privacy`).
//! * **Positive definiteness**: the noise matrix N has ‖N‖ ≤ σ(2√n + 2√ln(10⁹)) except with
//!   probability 10⁻⁹ ([`pd_floor`]), so `XᵀX + N + λI` with λ at least that floor is positive
//!   definite: λ is raised to the floor when it is smaller (the floor depends on σ and the
//!   number of items only, not on the data).

use faer::Mat;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use std::borrow::Cow;

use super::gram::{gram_dense, gram_dense_weighted, DenseGramEdit, ItemUsers};
use super::{ease, sansa, DenseScalar, FitReport, Method, Model, ModelParams, UmrConfig};
use crate::data::Csr;
use crate::error::{Error, Result};
use crate::numerics::exact::discrete_gaussian;
use crate::privacy::{
    contribution_weight, max_zcdp_rho, variance_on_grid, zcdp_epsilon, Gaussian, NoiseSource,
    Population, PopulationPrivacy, SIGMA2_DEN,
};
use crate::rng::{mix64, name_id, SecureRng, Streams};

/// The per-user weights are multiples of 1/S, S = 2^`WEIGHT_BITS`: the weighted Gram matrix
/// times S is an integer matrix (the secure path's noise is added to it), its sums exact in f64
/// while users · S < 2^53 (checked by the Gram pass).
pub const WEIGHT_BITS: u32 = 14;
const WEIGHT_SCALE: u64 = 1 << WEIGHT_BITS;

/// How one training user's contribution to the Gram matrix is bounded (docs/training-privacy.md,
/// "The unit and the contribution bound"). Both give the L2 sensitivity √(C(C+1)/2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContributionBound {
    /// Every interaction kept, the user's row weighted by [`user_weight`].
    Weight,
    /// At most C interactions kept ([`cap_rows`]).
    Sample,
}

impl ContributionBound {
    /// The default of `--dp-bound`: the bound with the better measured utility
    /// (docs/results.md, "DP training").
    pub const DEFAULT: ContributionBound = ContributionBound::Weight;

    /// The option's value.
    pub fn name(self) -> &'static str {
        match self {
            ContributionBound::Weight => "weight",
            ContributionBound::Sample => "sample",
        }
    }

    /// From the option's value.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "weight" => Ok(ContributionBound::Weight),
            "sample" => Ok(ContributionBound::Sample),
            other => Err(Error::Invalid(format!(
                "dp-bound must be weight or sample, not {other:?}"
            ))),
        }
    }
}

/// The integer weight W (the user's row counts W/S, S = 2^[`WEIGHT_BITS`]) of a user with `n`
/// interactions under the cap C: the largest W ≤ S with `(W/S)² · n(n+1)/2 ≤ C(C+1)/2`, i.e.
/// `⌊S · min(1, Δ/√(n(n+1)/2))⌋` computed on integers, so the user moves the upper triangle by
/// `(W/S)·√(n(n+1)/2) ≤ Δ` exactly (no rounding can push it over): [`contribution_weight`].
pub fn user_weight(n: usize, cap: usize) -> u16 {
    let (n, c) = (n as u128, cap as u128);
    contribution_weight(WEIGHT_SCALE, n * (n + 1), c * (c + 1)) as u16
}

/// [`user_weight`] of every row of `x`.
pub fn user_weights(x: &Csr, cap: usize) -> Vec<u16> {
    let ip = x.indptr();
    let p = ip.raw_storage();
    (0..x.rows())
        .into_par_iter()
        .map(|u| user_weight(p[u + 1] - p[u], cap))
        .collect()
}

/// Failure probability of the positive-definiteness bound of [`pd_floor`].
const PD_FAILURE: f64 = 1e-9;

/// L2 sensitivity of the upper triangle (diagonal included) of `XᵀX` for binary X under adding
/// or removing one user with at most `cap` items: `sqrt(C(C+1)/2)`.
pub fn gram_sensitivity(cap: usize) -> f64 {
    let c = cap as f64;
    (c * (c + 1.0) / 2.0).sqrt()
}

/// A shift that makes `XᵀX + N + shift·I` positive definite except with probability 10⁻⁹, for
/// the symmetric noise N of i.i.d. N(0, σ²) entries on `n` items: E λ_max(N) ≤ 2σ√n (N is
/// dominated by the Gaussian orthogonal ensemble of the same off-diagonal scale), and λ_max is
/// √2σ-Lipschitz in the standard normal entries, so it exceeds its mean by r with probability at
/// most exp(−r²/(4σ²)); r = 2σ√ln(10⁹). `XᵀX` is positive semidefinite.
pub fn pd_floor(sigma: f64, n: usize) -> f64 {
    sigma * (2.0 * (n as f64).sqrt() + 2.0 * (1.0 / PD_FAILURE).ln().sqrt())
}

/// At most `cap` items of every row of `x`: rows with more keep the `cap` items of smallest
/// priority `mix64(key ^ mix64(item))`, where the key mixes `seed` with a hash of the row's own
/// items. The choice depends on the seed and that user's items only — never on another user or
/// on the row's position — so the contribution bound holds for neighbouring data sets.
pub fn cap_rows(x: &Csr, cap: usize, seed: u64) -> Csr {
    let ip = x.indptr();
    let ptr = ip.raw_storage();
    let xi = x.indices();
    let rows: Vec<Vec<u32>> = (0..x.rows())
        .into_par_iter()
        .map(|u| {
            let items = &xi[ptr[u]..ptr[u + 1]];
            if items.len() <= cap {
                return items.to_vec();
            }
            let key = items.iter().fold(mix64(seed ^ 0x0064_7063_6170), |h, &i| {
                mix64(h ^ u64::from(i))
            });
            let mut by: Vec<(u64, u32)> = items
                .iter()
                .map(|&i| (mix64(key ^ mix64(u64::from(i) + 1)), i))
                .collect();
            by.select_nth_unstable(cap - 1);
            let mut kept: Vec<u32> = by[..cap].iter().map(|p| p.1).collect();
            kept.sort_unstable();
            kept
        })
        .collect();
    let mut indptr = Vec::with_capacity(rows.len() + 1);
    indptr.push(0usize);
    let mut indices = Vec::new();
    for r in &rows {
        indices.extend_from_slice(r);
        indptr.push(indices.len());
    }
    let data = vec![1.0f32; indices.len()];
    Csr::new((x.rows(), x.cols()), indptr, indices, data)
}

/// Shifts a grid may hold at most.
pub const MAX_SHIFTS: usize = 8;

/// The shifts of `--dp-shift-grid` (docs/training-privacy.md, "A private choice of the shift"):
/// public inputs, at most [`MAX_SHIFTS`], kept inline so the mechanism stays `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ShiftGrid {
    values: [f64; MAX_SHIFTS],
    len: usize,
}

/// The Gaussian mechanism on the Gram matrix: its calibration and its noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GramMechanism {
    /// Interactions kept per user (C), or, weighted, the number whose contribution a user's
    /// weighted row may not exceed.
    pub cap: usize,
    /// How a user's contribution is bounded.
    pub bound: ContributionBound,
    /// δ of the guarantee.
    pub delta: f64,
    /// ρ of the zCDP guarantee, with the noise actually drawn.
    pub rho: f64,
    /// Standard deviation of each entry's noise (the secure path: √ of its rational σ²).
    pub sigma: f64,
    /// Exact discrete Gaussian noise (the secure path) instead of floating-point Gaussian noise.
    pub secure: bool,
    /// λ is at least this multiple (≥ 1) of [`pd_floor`].
    pub shift: f64,
    /// A grid of shifts, every one fitted from the one noisy matrix ([`ShiftGrid`]; empty: the
    /// one `shift`).
    pub grid: ShiftGrid,
    /// The secure path's σ² · 2^10 (rounded up).
    sigma2_num: u128,
    /// Where the randomness comes from.
    pub source: NoiseSource,
}

impl GramMechanism {
    /// The mechanism for (ε, δ)-DP with the contribution of `cap` interactions per user (the
    /// default [`ContributionBound`]; [`GramMechanism::with_bound`] changes it): ρ =
    /// [`max_zcdp_rho`], σ = Δ/√(2ρ). On the secure path σ² is rounded up onto the 2^−10 grid and
    /// ρ recomputed from it (never above the requested one): [`Gaussian::calibrate`].
    pub fn new(
        epsilon: f64,
        delta: f64,
        cap: usize,
        secure: bool,
        source: NoiseSource,
    ) -> Result<Self> {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(Error::InvalidParameter {
                name: "dp-epsilon",
                requirement: "finite and > 0",
                value: epsilon,
            });
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "dp-delta",
                requirement: "in (0, 1)",
                value: delta,
            });
        }
        if cap == 0 {
            return Err(Error::InvalidParameter {
                name: "dp-cap",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        if secure && source == NoiseSource::Os {
            // Fail here, not inside the parallel fill, when the OS has no entropy.
            SecureRng::from_os()?;
        }
        let Gaussian {
            sigma,
            rho,
            sigma2_num,
        } = Gaussian::calibrate(
            gram_sensitivity(cap),
            max_zcdp_rho(epsilon, delta),
            secure,
            1.0,
        );
        Ok(GramMechanism {
            cap,
            bound: ContributionBound::DEFAULT,
            delta,
            rho,
            sigma,
            secure,
            sigma2_num,
            source,
            shift: 1.0,
            grid: ShiftGrid::default(),
        })
    }

    /// The same mechanism with λ at least `shift` (≥ 1) times the positive-definite floor.
    pub fn with_shift(self, shift: f64) -> Result<Self> {
        if !(shift.is_finite() && shift >= 1.0) {
            return Err(Error::InvalidParameter {
                name: "dp-shift",
                requirement: "finite and >= 1 (below 1 the noisy matrix may be indefinite)",
                value: shift,
            });
        }
        Ok(GramMechanism {
            shift,
            grid: ShiftGrid::default(),
            ..self
        })
    }

    /// The same mechanism fitting every shift of `grid` (2 to [`MAX_SHIFTS`] distinct values,
    /// each ≥ 1) from the one noisy matrix — post-processing of one release, no extra ε — the
    /// first being the fit's own [`GramMechanism::shift`] until a choice replaces it.
    pub fn with_shift_grid(self, grid: &[f64]) -> Result<Self> {
        if !(2..=MAX_SHIFTS).contains(&grid.len()) {
            return Err(Error::Invalid(format!(
                "dp-shift-grid takes 2 to {MAX_SHIFTS} shifts, got {}",
                grid.len()
            )));
        }
        let mut values = [0.0; MAX_SHIFTS];
        for (k, &s) in grid.iter().enumerate() {
            self.with_shift(s)?;
            if grid[..k].contains(&s) {
                return Err(Error::Invalid(format!(
                    "dp-shift-grid lists the shift {s} twice"
                )));
            }
            values[k] = s;
        }
        Ok(GramMechanism {
            shift: grid[0],
            grid: ShiftGrid {
                values,
                len: grid.len(),
            },
            ..self
        })
    }

    /// The shifts a fit under this mechanism fits: the grid, or the one shift.
    pub fn shifts(&self) -> Vec<f64> {
        if self.grid.len == 0 {
            vec![self.shift]
        } else {
            self.grid.values[..self.grid.len].to_vec()
        }
    }

    /// The same mechanism with the contribution bound `bound` (same sensitivity, same noise).
    pub fn with_bound(self, bound: ContributionBound) -> Self {
        GramMechanism { bound, ..self }
    }

    /// λ a fit with the requested `l2` on `n` items uses: at least `shift` × [`pd_floor`].
    pub fn l2_used(&self, l2: f64, n: usize) -> f64 {
        l2.max(self.shift * pd_floor(self.sigma, n))
    }

    /// The same mechanism with σ multiplied by `factor` (ρ and the guarantee follow): the audit's
    /// deliberately mis-calibrated release.
    pub fn with_sigma_scaled(self, factor: f64) -> Self {
        let sigma = self.sigma * factor;
        let num = variance_on_grid(sigma * sigma);
        let sens = gram_sensitivity(self.cap);
        GramMechanism {
            sigma,
            rho: sens * sens / (2.0 * sigma * sigma),
            sigma2_num: num,
            ..self
        }
    }

    /// The same mechanism drawing from `source`.
    pub fn with_source(self, source: NoiseSource) -> Self {
        GramMechanism { source, ..self }
    }

    /// ε of the guarantee at its δ.
    pub fn epsilon(&self) -> f64 {
        zcdp_epsilon(self.rho, self.delta)
    }

    /// The training users' entry of the release's privacy report.
    pub fn privacy(&self, l2_used: f64) -> PopulationPrivacy {
        self.privacy_of(format!(
            "λ used {:.2} (at least {} × the positive-definite floor)",
            l2_used, self.shift
        ))
    }

    /// The training users' entry of a fit of every shift of the grid (λ `l2s`, in the grid's
    /// order): the same guarantee — every fit is post-processing of the one noisy matrix — whichever
    /// of them is kept.
    pub fn privacy_of_grid(&self, l2s: &[f64]) -> PopulationPrivacy {
        let shifts = self.shifts();
        let each: Vec<String> = shifts
            .iter()
            .zip(l2s)
            .map(|(k, l)| format!("{l:.2} at K={k}"))
            .collect();
        self.privacy_of(format!(
            "λ used one of {} (λ at least K × the positive-definite floor; every K of the grid \
             fitted from this one noisy matrix, post-processing), the one kept chosen privately \
             on the calibration users (part `{}`)",
            each.join(", "),
            crate::privacy::report::SHIFT_CHOICE
        ))
    }

    fn privacy_of(&self, lambda: String) -> PopulationPrivacy {
        let noise = if self.secure {
            "exact discrete Gaussian"
        } else {
            "Gaussian"
        };
        let (unit, gram, bound) = match self.bound {
            ContributionBound::Sample => (
                format!("user (at most {} interactions kept)", self.cap),
                "Gram matrix",
                "contribution bound `sample`: at most C interactions kept per user".to_string(),
            ),
            ContributionBound::Weight => (
                format!(
                    "user (all interactions, weighted to the contribution of {})",
                    self.cap
                ),
                "user-weighted Gram matrix",
                format!(
                    "contribution bound `weight`: user u's row counts \
                     min(1, √(C(C+1)/2)/√(n_u(n_u+1)/2)) rounded down to a multiple of 2^-{WEIGHT_BITS}"
                ),
            ),
        };
        PopulationPrivacy {
            population: Population::Training,
            unit,
            epsilon: Some(self.epsilon()),
            delta: self.delta,
            mechanism: format!(
                "{noise} on the {gram} (zCDP ρ={:.6}; ε from ρ by Canonne–Kamath–Steinke)",
                self.rho
            ),
            note: format!(
                "{bound}; σ={:.4} per entry of the upper triangle incl. diagonal, L2 sensitivity \
                 √(C(C+1)/2)={:.4} for C={}; {lambda}",
                self.sigma,
                gram_sensitivity(self.cap),
                self.cap,
            ),
        }
    }

    /// Column j's generator of the floating-point path.
    fn fast_stream(&self, seed: u64, j: usize) -> crate::rng::Rng {
        Streams::new(seed).stream(name_id("dp-gram"), 0, j as u64, 0)
    }
}

/// The noise of one release: the mechanism and, for the floating-point path, the seed of its
/// streams (from the OS unless the source is a test seed).
#[derive(Debug, Clone, Copy)]
pub struct GramNoise {
    mech: GramMechanism,
    seed: u64,
}

impl GramNoise {
    /// One draw's noise; `GramNoise::apply` adds it.
    pub fn new(mech: GramMechanism) -> Self {
        GramNoise {
            mech,
            seed: mech.source.fast_seed(),
        }
    }
}

impl GramNoise {
    /// Column j's noise, one draw per entry of `col` in order, each handed to `add`: σ·Z on the
    /// floating-point path; on the secure path the discrete Gaussian of variance parameter σ²
    /// (`scaled`: (Sσ)², S = 2^[`WEIGHT_BITS`], for the integer weighted sums `S·G`).
    fn each_noise<V>(&self, j: usize, col: &mut [V], scaled: bool, add: impl Fn(&mut V, f64)) {
        let m_ = &self.mech;
        if m_.secure {
            let mut rng = m_
                .source
                .secure_rng(|s| mix64(s ^ mix64(j as u64 + 1)))
                .expect("OS entropy (checked when the mechanism was made)");
            // (Sσ)² = S² · num / 2^10 = num · 2^(2·WEIGHT_BITS − 10), an integer.
            let (num, den) = if scaled {
                (m_.sigma2_num << (2 * WEIGHT_BITS - 10), 1)
            } else {
                (m_.sigma2_num, SIGMA2_DEN)
            };
            for v in col {
                add(v, discrete_gaussian(&mut rng, num, den) as f64);
            }
        } else {
            let mut rng = m_.fast_stream(self.seed, j);
            for v in col {
                let z: f64 = StandardNormal.sample(&mut rng);
                add(v, m_.sigma * z);
            }
        }
    }

    /// Rows j.. of column j of a weighted release: `col` holds the exact integer sums `S·G` on
    /// entry and the noisy `G` on return — on the secure path the integer discrete Gaussian of
    /// (Sσ)² is added before the division by S (exact in f64), on the floating-point path
    /// N(0, σ²) after it.
    fn weighted_column(&self, j: usize, col: &mut [f64]) {
        let s = WEIGHT_SCALE as f64;
        if self.mech.secure {
            self.each_noise(j, col, true, |v, z| *v += z);
            col.iter_mut().for_each(|v| *v /= s);
        } else {
            col.iter_mut().for_each(|v| *v /= s);
            self.each_noise(j, col, false, |v, z| *v += z);
        }
    }

    /// Adds this release's noise to the noise-free release `m` (lower triangle, [`clean_gram`]
    /// of the same mechanism), exactly as the fit does: the audit's path.
    pub fn add_to_release(&self, mut m: faer::MatMut<'_, f64>) {
        match self.mech.bound {
            ContributionBound::Sample => self.apply(m),
            ContributionBound::Weight => {
                let s = WEIGHT_SCALE as f64;
                m.as_mut()
                    .par_col_iter_mut()
                    .enumerate()
                    .for_each(|(j, col)| {
                        let col = super::col_slice_mut(col);
                        col[j..].iter_mut().for_each(|v| *v *= s);
                        self.weighted_column(j, &mut col[j..]);
                    });
            }
        }
    }
}

impl DenseGramEdit for GramNoise {
    /// Adds N(0, σ²) (or the discrete Gaussian) to every entry i ≥ j, one independent stream per
    /// column.
    fn apply<T: DenseScalar>(&self, m: faer::MatMut<'_, T>) {
        m.par_col_iter_mut().enumerate().for_each(|(j, col)| {
            let col = super::col_slice_mut(col);
            self.each_noise(j, &mut col[j..], false, |v, z| *v += T::from_f64(z));
        });
    }
}

/// The DP fit's release as an edit of the dense Gram pass: the noise, and with the `weight`
/// bound the users' weights (the Gram pass then sums the weighted rows and adds the noise to
/// each column while its sums are exact).
pub struct GramRelease {
    noise: GramNoise,
    weights: Option<Vec<u16>>,
}

impl GramRelease {
    /// The release of the rows `x` (already capped for the `sample` bound) under `mech`.
    pub fn new(x: &Csr, mech: &GramMechanism) -> Self {
        let weights = match mech.bound {
            ContributionBound::Weight => Some(user_weights(x, mech.cap)),
            ContributionBound::Sample => None,
        };
        GramRelease {
            noise: GramNoise::new(*mech),
            weights,
        }
    }
}

impl DenseGramEdit for GramRelease {
    fn apply<T: DenseScalar>(&self, m: faer::MatMut<'_, T>) {
        self.noise.apply(m)
    }

    fn item_users(&self, x: &Csr) -> ItemUsers {
        match &self.weights {
            Some(w) => ItemUsers::weighted(x, w),
            None => ItemUsers::new(x),
        }
    }

    fn gram<T: DenseScalar>(&self, x: &Csr, users: ItemUsers, mut m: faer::MatMut<'_, T>) {
        if self.weights.is_some() {
            gram_dense_weighted(&users, m, |j, col| self.noise.weighted_column(j, col));
        } else {
            gram_dense(x, &users, m.as_mut());
            drop(users);
            self.noise.apply(m);
        }
    }
}

/// The rows a release under `mech` reads: `x` capped ([`cap_rows`]) for the `sample` bound, `x`
/// itself for `weight`.
fn release_rows<'a>(x: &'a Csr, mech: &GramMechanism, cap_seed: u64) -> Cow<'a, Csr> {
    match mech.bound {
        ContributionBound::Sample => Cow::Owned(cap_rows(x, mech.cap, cap_seed)),
        ContributionBound::Weight => Cow::Borrowed(x),
    }
}

/// The noise-free release of `x` under `mech` (lower triangle, dense f64): the capped `XᵀX`, or
/// the user-weighted `Σ_u q_u x_u x_uᵀ`. What the audit compares releases with.
pub fn clean_gram(x: &Csr, mech: &GramMechanism, cap_seed: u64) -> Mat<f64> {
    let rows = release_rows(x, mech, cap_seed);
    let n = x.cols();
    let mut g = Mat::<f64>::zeros(n, n);
    match mech.bound {
        ContributionBound::Sample => gram_dense(&rows, &ItemUsers::new(&rows), g.as_mut()),
        ContributionBound::Weight => {
            let t = ItemUsers::weighted(&rows, &user_weights(&rows, mech.cap));
            let s = WEIGHT_SCALE as f64;
            gram_dense_weighted(&t, g.as_mut(), |_, col| {
                col.iter_mut().for_each(|v| *v /= s)
            });
        }
    }
    g
}

/// The noisy lower triangle (diagonal included) of the capped or user-weighted `XᵀX` as a dense
/// f64 matrix, the strict upper triangle zero: what the DP fit releases to itself. `cap_seed`
/// chooses the kept interactions of the `sample` bound ([`cap_rows`]).
pub fn noisy_gram(x: &Csr, mech: &GramMechanism, cap_seed: u64) -> Mat<f64> {
    let rows = release_rows(x, mech, cap_seed);
    let n = x.cols();
    let mut g = Mat::<f64>::zeros(n, n);
    let release = GramRelease::new(&rows, mech);
    release.gram(&rows, release.item_users(&rows), g.as_mut());
    g
}

/// One fit of a shift grid: the shift, its λ and the model.
#[derive(Debug, Clone)]
pub struct ShiftFit {
    /// The shift K (λ at least K × [`pd_floor`]).
    pub shift: f64,
    /// λ used.
    pub l2_used: f64,
    /// The model (post-processing of the one noisy Gram matrix).
    pub model: Model,
}

/// The noisy Gram matrix kept once and copied into every fit of a shift grid: each fit is
/// post-processing of the same release.
struct Replay<'a>(&'a Mat<f64>);

impl DenseGramEdit for Replay<'_> {
    fn apply<T: DenseScalar>(&self, _m: faer::MatMut<'_, T>) {}

    fn gram<T: DenseScalar>(&self, _x: &Csr, users: ItemUsers, mut m: faer::MatMut<'_, T>) {
        drop(users);
        let g = self.0;
        m.as_mut()
            .par_col_iter_mut()
            .enumerate()
            .for_each(|(j, col)| {
                let col = super::col_slice_mut(col);
                for (i, v) in col.iter_mut().enumerate().skip(j) {
                    *v = T::from_f64(g[(i, j)]);
                }
            });
    }
}

/// A DP fit: the model, what it cost, the training users' privacy and the λ used.
#[derive(Debug)]
pub struct PrivateFit {
    /// The model (post-processing of the noisy Gram matrix).
    pub model: Model,
    /// Stages and their seconds.
    pub report: FitReport,
    /// The training users' entry for `model.json`.
    pub privacy: PopulationPrivacy,
    /// λ used: the requested one, raised to `shift` × [`pd_floor`] when smaller.
    pub l2_used: f64,
    /// With a shift grid ([`GramMechanism::with_shift_grid`]), every fit of the grid in its
    /// order, the first being `model` (empty without a grid).
    pub by_shift: Vec<ShiftFit>,
}

/// Fits EASE or SANSA (`exact`, dense path) on the noisy Gram matrix of the capped or
/// user-weighted training rows. `icf` and `popular` are refused (the noisy Gram matrix is dense: ICF's sparse
/// factorisation has nothing to keep sparse; the popularity of a DP release is its noisy
/// diagonal). Fails when the dense matrix does not fit in memory (docs/training-privacy.md,
/// "Large catalogues").
pub fn fit_private(
    train: &Csr,
    params: &ModelParams,
    mech: &GramMechanism,
    cap_seed: u64,
    progress: &dyn Fn(&str),
) -> Result<PrivateFit> {
    let n = train.cols();
    let shifts = mech.shifts();
    let l2s: Vec<f64> = shifts
        .iter()
        .map(|&k| params.l2.max(k * pd_floor(mech.sigma, n)))
        .collect();
    let l2_used = l2s[0];
    let mut report = FitReport::default();
    report.start_cpu_clock();
    let t = std::time::Instant::now();
    progress(match mech.bound {
        ContributionBound::Sample => "capping each user's interactions",
        ContributionBound::Weight => "weighting each user's interactions",
    });
    let capped = release_rows(train, mech, cap_seed);
    let noise = GramRelease::new(&capped, mech);
    report.stage("cap", t);
    if let m @ (Method::Icf | Method::Popular) = params.method {
        return Err(Error::Invalid(format!(
            "a DP fit takes --method ease or exact, not {}: the noisy Gram matrix is dense",
            m.name()
        )));
    }
    if params.method == Method::Ease {
        ease::check_fits(n)?;
    }
    let umr = UmrConfig {
        scans: params.umr_scans,
        finetune_steps: params.umr_finetune_steps,
        ..UmrConfig::default()
    };
    if shifts.len() == 1 {
        let model = match params.method {
            Method::Ease => {
                progress("noisy Gram matrix XᵀX + N");
                let t = std::time::Instant::now();
                let mut g = Mat::<f64>::zeros(n, n);
                noise.gram(&capped, noise.item_users(&capped), g.as_mut());
                report.stage("gram", t);
                progress("dense EASE inverse");
                let t = std::time::Instant::now();
                let m = ease::fit_ease_dense(g, l2_used)?;
                report.stage("inverse", t);
                Model::Ease(m)
            }
            _ => Model::Sansa(sansa::fit_sansa_dense_edited(
                &capped,
                l2_used,
                params.density,
                umr,
                params.precision,
                &noise,
                &mut report,
                progress,
            )?),
        };
        return Ok(PrivateFit {
            model,
            report,
            privacy: mech.privacy(l2_used),
            l2_used,
            by_shift: Vec::new(),
        });
    }
    // A grid: the noisy matrix is released once, and every shift fitted from a copy of it.
    progress("noisy Gram matrix XᵀX + N (once for every shift of the grid)");
    let t = std::time::Instant::now();
    let mut g = Mat::<f64>::zeros(n, n);
    noise.gram(&capped, noise.item_users(&capped), g.as_mut());
    report.stage("gram", t);
    let mut by_shift = Vec::with_capacity(shifts.len());
    for (&shift, &l2) in shifts.iter().zip(&l2s) {
        progress(&format!("fit at shift {shift} (λ = {l2:.1})"));
        let model = match params.method {
            Method::Ease => {
                let t = std::time::Instant::now();
                let m = ease::fit_ease_dense(g.clone(), l2)?;
                report.stage("inverse", t);
                Model::Ease(m)
            }
            _ => Model::Sansa(sansa::fit_sansa_dense_edited(
                &capped,
                l2,
                params.density,
                umr,
                params.precision,
                &Replay(&g),
                &mut report,
                progress,
            )?),
        };
        by_shift.push(ShiftFit {
            shift,
            l2_used: l2,
            model,
        });
    }
    Ok(PrivateFit {
        model: by_shift[0].model.clone(),
        report,
        privacy: mech.privacy_of_grid(&l2s),
        l2_used,
        by_shift,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::data::csr_from_rows as csr;

    /// The kept items are a subset of at most C of the row's, chosen by the row's own items: a
    /// user's choice does not move when other users come or go.
    #[test]
    fn the_cap_depends_on_the_user_alone() {
        let a = vec![0u32, 2, 3, 5, 7, 8, 9];
        let b = vec![1u32, 2, 4];
        let x = csr(&[a.clone(), b.clone()], 10);
        let y = csr(&[b.clone(), vec![0, 1, 2, 3, 4, 5, 6], a.clone()], 10);
        let (cx, cy) = (cap_rows(&x, 4, 9), cap_rows(&y, 4, 9));
        let row = |m: &Csr, u| crate::data::row_items(m, u).to_vec();
        assert_eq!(row(&cx, 0), row(&cy, 2));
        assert_eq!(row(&cx, 1), b);
        assert_eq!(row(&cx, 0).len(), 4);
        assert!(row(&cx, 0).iter().all(|i| a.contains(i)));
        // Another seed keeps other items (for some seed).
        assert!((0..20).any(|s| row(&cap_rows(&x, 4, s), 0) != row(&cx, 0)));
    }

    /// Adding one user changes the capped upper triangle by exactly √(c(c+1)/2) in L2, c = min(C,
    /// their items), and never more than the sensitivity.
    #[test]
    fn one_user_moves_the_gram_matrix_by_at_most_the_sensitivity() {
        let base = vec![vec![0u32, 1, 2], vec![1, 3, 4, 5, 6, 7], vec![2, 5]];
        for extra in [vec![0u32, 1, 2, 3, 4, 5, 6, 7], vec![3u32, 6], vec![4u32]] {
            let mut with = base.clone();
            with.push(extra.clone());
            let g = |rows: &[Vec<u32>]| {
                let c = cap_rows(&csr(rows, 8), 5, 3);
                let mut m = Mat::<f64>::zeros(8, 8);
                gram_dense(&c, &ItemUsers::new(&c), m.as_mut());
                m
            };
            let (g0, g1) = (g(&base), g(&with));
            let sq: f64 = (0..8)
                .flat_map(|j| (j..8).map(move |i| (i, j)))
                .map(|(i, j)| (g1[(i, j)] - g0[(i, j)]).powi(2))
                .sum();
            let c = extra.len().min(5) as f64;
            assert!((sq.sqrt() - (c * (c + 1.0) / 2.0).sqrt()).abs() < 1e-12);
            assert!(sq.sqrt() <= gram_sensitivity(5) + 1e-12);
        }
    }

    /// The noise has the calibrated σ (mean and variance of 200 × 201 / 2 entries within five
    /// standard errors), lands on the lower triangle only, and on the secure path is integer.
    #[test]
    fn the_noise_has_the_calibrated_scale() {
        let x = csr(&[vec![0, 1], vec![1, 2], (0..10).collect()], 200);
        let both = [ContributionBound::Sample, ContributionBound::Weight];
        for (secure, bound) in [false, true].into_iter().flat_map(|s| both.map(|b| (s, b))) {
            let mech = GramMechanism::new(2.0, 1e-6, 4, secure, NoiseSource::InsecureSeed(5))
                .unwrap()
                .with_bound(bound);
            let g = noisy_gram(&x, &mech, 1);
            let clean = clean_gram(&x, &mech, 1);
            let mut v = Vec::new();
            for j in 0..200 {
                for i in 0..200 {
                    let z = g[(i, j)] - clean[(i, j)];
                    if i < j {
                        assert_eq!(z, 0.0);
                    } else {
                        v.push(z);
                        // Integer noise, on the weighted path on the grid 1/S.
                        let z_s = match bound {
                            ContributionBound::Sample => z,
                            ContributionBound::Weight => z * WEIGHT_SCALE as f64,
                        };
                        if secure {
                            assert_eq!(z_s, z_s.round());
                        }
                    }
                }
            }
            let m = v.len() as f64;
            let mean = v.iter().sum::<f64>() / m;
            let var = v.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / m;
            let s2 = mech.sigma * mech.sigma;
            assert!(
                mean.abs() < 5.0 * (s2 / m).sqrt(),
                "secure={secure}: mean {mean}"
            );
            assert!(
                (var / s2 - 1.0).abs() < 5.0 * (2.0 / m).sqrt(),
                "secure={secure}: variance {var} against σ² {s2}"
            );
            // Same seed, same release; the cap's seed is its own.
            assert_eq!(noisy_gram(&x, &mech, 1), g);
            // The audit's path (noise added to the noise-free release) is the fit's, bit for bit.
            let mut a = clean.clone();
            GramNoise::new(mech).add_to_release(a.as_mut());
            assert_eq!(a, g, "secure={secure} {bound:?}");
            // The sample bound is the capped Gram matrix plus the noise, nothing else.
            if bound == ContributionBound::Sample {
                let c = cap_rows(&x, 4, 1);
                let mut m = Mat::<f64>::zeros(200, 200);
                gram_dense(&c, &ItemUsers::new(&c), m.as_mut());
                GramNoise::new(mech).apply(m.as_mut());
                assert_eq!(m, g);
            }
        }
    }

    /// The integer weight keeps a user's L2 contribution `(W/S)·√(n(n+1)/2)` at most Δ exactly
    /// (integer arithmetic) and is the largest that does, at the edge n = C, C + 1 and for large
    /// n; and the weighted Gram matrices of neighbours differ by exactly that (in units of 1/S,
    /// sums of squares of integers, exact in f64).
    #[test]
    fn a_weighted_user_moves_the_gram_matrix_by_at_most_the_sensitivity() {
        let s = u128::from(WEIGHT_SCALE);
        for cap in [1usize, 3, 20] {
            let bound = s * s * (cap * (cap + 1)) as u128;
            for n in [1, cap, cap + 1, cap + 2, 2 * cap, 200, 17_769, 2_000_000] {
                let w = u128::from(user_weight(n, cap));
                let l = (n * (n + 1)) as u128;
                assert!(w * w * l <= bound, "C={cap} n={n}: W={w} too large");
                assert!(
                    w == s || (w + 1) * (w + 1) * l > bound,
                    "C={cap} n={n}: W={w} not largest"
                );
                assert_eq!(w == s, n <= cap, "C={cap} n={n}: W={w}");
                assert!(w >= 1 || n > 1000, "C={cap} n={n}: weight 0");
            }
        }
        let cap = 3;
        let base = vec![vec![0u32, 1, 2], vec![1, 3, 4, 5, 6, 7], vec![2, 5]];
        let mech = GramMechanism::new(1.0, 1e-8, cap, false, NoiseSource::InsecureSeed(0)).unwrap();
        for n in [cap, cap + 1, 8, 300] {
            let items = 300;
            let mut with = base.clone();
            with.push((0..n as u32).collect());
            let (g0, g1) = (
                clean_gram(&csr(&base, items), &mech, 3),
                clean_gram(&csr(&with, items), &mech, 3),
            );
            let sq: f64 = (0..items)
                .flat_map(|j| (j..items).map(move |i| (i, j)))
                .map(|(i, j)| ((g1[(i, j)] - g0[(i, j)]) * WEIGHT_SCALE as f64).powi(2))
                .sum();
            let w = f64::from(user_weight(n, cap));
            let (nf, c, sf) = (n as f64, cap as f64, WEIGHT_SCALE as f64);
            assert_eq!(sq, w * w * nf * (nf + 1.0) / 2.0, "n={n}");
            assert!(sq <= sf * sf * c * (c + 1.0) / 2.0, "n={n}: {sq}");
        }
    }

    /// The floor makes noise alone (the worst case: XᵀX = 0) positive definite, and 0.9 × 2σ√n
    /// (inside the edge of the noise's spectrum) does not: the shift is of the right size.
    #[test]
    fn the_floor_keeps_the_noisy_gram_positive_definite() {
        let n = 300;
        let x = csr(&[], n);
        for seed in 0..5 {
            let mech =
                GramMechanism::new(1.0, 1e-8, 20, false, NoiseSource::InsecureSeed(seed)).unwrap();
            let g = noisy_gram(&x, &mech, 0);
            let llt = |shift: f64| {
                let mut m = g.clone();
                for j in 0..n {
                    for i in j + 1..n {
                        m[(j, i)] = m[(i, j)];
                    }
                    m[(j, j)] += shift;
                }
                m.llt(faer::Side::Lower).is_ok()
            };
            let floor = pd_floor(mech.sigma, n);
            assert!(llt(floor), "seed {seed}: not PD at the floor");
            let edge = 2.0 * mech.sigma * (n as f64).sqrt();
            assert!(!llt(0.9 * edge), "seed {seed}: PD at 0.9 × 2σ√n");
        }
    }

    /// A DP fit of EASE and SANSA on a small synthetic data set: the model fits, λ is raised to
    /// the floor, and the privacy entry states the claim.
    #[test]
    fn private_fits_record_their_guarantee() {
        let rows: Vec<Vec<u32>> = (0..400u32)
            .map(|u| {
                (0..12)
                    .map(|k| (u * 7 + k * k * 3) % 60)
                    .collect::<std::collections::BTreeSet<u32>>()
                    .into_iter()
                    .collect()
            })
            .collect();
        let x = csr(&rows, 60);
        let mech = GramMechanism::new(8.0, 1e-8, 10, false, NoiseSource::InsecureSeed(3))
            .unwrap()
            .with_shift(2.0)
            .unwrap();
        let both = [ContributionBound::Sample, ContributionBound::Weight];
        for (method, bound) in [Method::Ease, Method::Exact]
            .into_iter()
            .flat_map(|m| both.map(|b| (m, b)))
        {
            let mech = mech.with_bound(bound);
            let params = ModelParams::new(method, 10.0, 0.2).unwrap();
            let f = fit_private(&x, &params, &mech, 1, &|_| {}).unwrap();
            assert_eq!(f.model.n_items(), 60);
            assert_eq!(f.l2_used, 2.0 * pd_floor(mech.sigma, 60));
            assert!(f.l2_used > 10.0);
            let p = &f.privacy;
            assert_eq!(p.population, Population::Training);
            assert!((p.epsilon.unwrap() - 8.0).abs() < 1e-6);
            assert_eq!(p.delta, 1e-8);
            match bound {
                ContributionBound::Sample => {
                    assert_eq!(p.unit, "user (at most 10 interactions kept)");
                    assert!(p.mechanism.contains("Gaussian on the Gram matrix (zCDP ρ="));
                    assert!(p.note.starts_with("contribution bound `sample`"));
                }
                ContributionBound::Weight => {
                    assert_eq!(
                        p.unit,
                        "user (all interactions, weighted to the contribution of 10)"
                    );
                    assert!(p
                        .mechanism
                        .contains("Gaussian on the user-weighted Gram matrix (zCDP ρ="));
                    assert!(p.note.starts_with("contribution bound `weight`"));
                }
            }
        }
        assert!(mech.with_shift(0.9).is_err());
        let icf = ModelParams::new(Method::Icf, 10.0, 0.2).unwrap();
        assert!(fit_private(&x, &icf, &mech, 1, &|_| {}).is_err());
    }
}
