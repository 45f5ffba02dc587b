//! The item universe of a DP fit without a declared catalogue, chosen by DP partition selection
//! (docs/training-privacy.md, "The item universe"): Gaussian thresholding of weighted item counts
//! (Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially private set union", ICML
//! 2020; Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection",
//! PETS 2022; Wilkins, Kifer, Zhang, Karrer, "Exact privacy analysis of the Gaussian sparse
//! histogram mechanism", 2024).
//!
//! * **Contribution.** A training user counts at most [`MAX_COUNTED`] (L) of their items — a
//!   row longer than that keeps L chosen by the seed and the row's own items
//!   ([`cap_rows`]) — each with the weight `w(d) = √min(1, C/d)` of the item
//!   counts ([`count_weight`](super::dp_items::count_weight), on the 1/256 grid), d the items counted. The user's
//!   vector has L2 norm `√d·w(d) ≤ √C`, each entry at most 1, at most L entries.
//! * **Release.** Every item some training user counts gets its weighted count plus N(0, σ²)
//!   (on the secure path the discrete Gaussian of the integer count); the items above the
//!   threshold T are the universe, their noisy counts released with them. An item no training
//!   user counts is never released.
//! * **Guarantee.** Adding a user u changes the counts of the items others count by an L2 vector
//!   of norm ≤ √C: on those items the release is the Gaussian mechanism followed by a
//!   threshold, ρ₁-zCDP with ρ₁ = C/(2σ²). The items only u counts (at most L of them, weights
//!   w ≤ 1) appear only if one of their noisy counts passes T: conditioned on none doing so the
//!   two outputs are ρ₁-close, so the release is δ_T-approximately ρ₁-zCDP (Bun–Steinke 2016,
//!   Def. 8.1) with `δ_T = max_{1≤d≤L} 1 − (1 − Q((T − w(d))/σ))^d` ([`unique_failure`]); Q is the
//!   normal tail (the discrete Gaussian's sub-Gaussian tail `exp(−x²/2)` on the secure path).
//!   T is the smallest threshold with δ_T at most the requested share of δ.
//! * **Composition.** The Gram matrix is released on the universe afterwards (the universe is a
//!   function of the first output only); approximate zCDP composes by adding the ρ and the δ
//!   (Bun–Steinke 2016, Lemma 8.2): the whole fit is δ_T-approximately (ρ₁ + ρ₂)-zCDP, hence
//!   (ε, δ_T + δ′)-DP with ε = [`zcdp_epsilon`](crate::privacy::zcdp_epsilon)(ρ₁ + ρ₂, δ′). The
//!   requested (ε, δ) is met with δ_T = δ′ = δ/2 ([`DELTA_SHARE`]) and ρ₁ the share
//!   `--dp-items-share` of the ρ that (ε, δ/2) allows.
//! * **Noise streams.** Item j's noise is drawn from a stream keyed by the seed and j's *id*, not
//!   its column, so a neighbour that adds or removes items elsewhere leaves j's noise unchanged
//!   (what the whole-release audit compares).

use rand_distr::{Distribution, StandardNormal};

use super::dp::cap_rows;
use super::dp_items::{count_sensitivity, weighted_counts, COUNT_SCALE};
use crate::data::Csr;
use crate::error::{Error, Result};
use crate::numerics::exact::discrete_gaussian;
use crate::privacy::NoiseSource;
use crate::rng::{mix64, name_id, SecureRng, Streams};

/// Items counted per training user at most (L): the public bound on how many items one user can
/// bring into the universe.
pub const MAX_COUNTED: usize = 1000;

/// The share of the requested δ spent on the threshold (δ_T); the zCDP conversion gets the rest.
pub const DELTA_SHARE: f64 = 0.5;

/// The secure path's variance parameter is a rational `num / 2^10`, rounded up.
const SIGMA2_DEN: u128 = 1 << 10;

/// The seed salt of the rows' L-item cap (a different choice from the Gram matrix's cap).
const CAP_SALT: u64 = 0x756e_6976_6572_7365;

/// The upper tail `P(Z > x)` of the standard normal (`secure`: the sub-Gaussian bound
/// `exp(−x²/2)` of the discrete Gaussian, Canonne–Kamath–Steinke 2020), for x ≥ 0.
fn tail(x: f64, secure: bool) -> f64 {
    if secure {
        (-x * x / 2.0).exp().min(1.0)
    } else {
        0.5 * statrs::function::erf::erfc(x / std::f64::consts::SQRT_2)
    }
}

/// The probability that some of the items only one user counts passes the threshold `t`, at its
/// worst over the number d ≤ `max_counted` of such items (each of weight w(d) ≤ 1):
/// `max_d 1 − (1 − Q((t − w(d))/σ))^d`.
pub fn unique_failure(t: f64, sigma: f64, cap: usize, max_counted: usize, secure: bool) -> f64 {
    (1..=max_counted)
        .map(|d| {
            let w = super::dp_items::count_weight(d, cap) as f64 / COUNT_SCALE as f64;
            let q = tail(((t - w) / sigma).max(0.0), secure);
            // 1 − (1 − q)^d, accurate for tiny q.
            -((d as f64) * (-q).ln_1p()).exp_m1()
        })
        .fold(0.0, f64::max)
}

/// The DP partition selection of the item universe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionSelection {
    /// The contribution bound C (the weights' √min(1, C/d)).
    pub cap: usize,
    /// Items counted per user at most (L).
    pub max_counted: usize,
    /// ρ₁ of the count release, with the noise actually drawn.
    pub rho: f64,
    /// Standard deviation of each count's noise, in interactions.
    pub sigma: f64,
    /// The threshold T a noisy count must exceed.
    pub threshold: f64,
    /// δ_T: the probability bound of [`unique_failure`] at T.
    pub delta: f64,
    /// Exact discrete Gaussian noise (the secure path).
    pub secure: bool,
    /// The secure path's variance parameter of the integer counts, times 2^10.
    sigma2_num: u128,
    /// Where the randomness comes from.
    pub source: NoiseSource,
}

/// The released universe: the chosen columns (ascending) and their noisy counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Universe {
    /// The columns of the data whose noisy count passed the threshold, ascending.
    pub items: Vec<u32>,
    /// Their noisy weighted counts, in interactions (a DP output, released with them).
    pub noisy_counts: Vec<f64>,
}

impl PartitionSelection {
    /// The selection at zCDP ρ₁ = `rho` with contribution bound `cap`, its threshold the smallest
    /// (to 10⁻⁶ σ) whose [`unique_failure`] is at most `delta`.
    pub fn new(
        rho: f64,
        cap: usize,
        delta: f64,
        secure: bool,
        source: NoiseSource,
    ) -> Result<Self> {
        if !(rho.is_finite() && rho > 0.0) {
            return Err(Error::InvalidParameter {
                name: "partition selection ρ",
                requirement: "finite and > 0",
                value: rho,
            });
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "partition selection δ",
                requirement: "in (0, 1)",
                value: delta,
            });
        }
        let sens = count_sensitivity(cap);
        let sigma = sens / (2.0 * rho).sqrt();
        let m = COUNT_SCALE as f64;
        let (sigma, rho, sigma2_num) = if secure {
            let num = ((m * m * sigma * sigma) * SIGMA2_DEN as f64).ceil() as u128;
            let s2 = num as f64 / SIGMA2_DEN as f64 / (m * m);
            (s2.sqrt(), sens * sens / (2.0 * s2), num)
        } else {
            (sigma, rho, 0)
        };
        let fails = |t: f64| unique_failure(t, sigma, cap, MAX_COUNTED, secure) > delta;
        let (mut lo, mut hi) = (0.0f64, 1.0 + 10.0 * sigma);
        while fails(hi) {
            hi = 1.0 + 2.0 * (hi - 1.0);
        }
        while hi - lo > 1e-6 * sigma {
            let mid = 0.5 * (lo + hi);
            if fails(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(PartitionSelection {
            cap,
            max_counted: MAX_COUNTED,
            rho,
            sigma,
            threshold: hi,
            delta: unique_failure(hi, sigma, cap, MAX_COUNTED, secure),
            secure,
            sigma2_num,
            source,
        })
    }

    /// The weighted counts of `x` (units of 1/256): each row's items capped at L by `cap_seed`
    /// and the row's own items, weighted by w(d).
    pub fn counts(&self, x: &Csr, cap_seed: u64) -> Vec<u64> {
        weighted_counts(
            &cap_rows(x, self.max_counted, cap_seed ^ CAP_SALT),
            self.cap,
        )
    }

    /// Item `id`'s noise, in units of 1/256 (secure: an integer), from the stream of the seed and
    /// the id.
    fn noise(&self, seed: u64, id: &str, os: Option<&mut SecureRng>) -> Result<f64> {
        let m = COUNT_SCALE as f64;
        let key = crate::data::Fnv64::new();
        let key = {
            let mut k = key;
            k.write(id.as_bytes());
            k.finish()
        };
        if self.secure {
            let z = match os {
                Some(rng) => discrete_gaussian(rng, self.sigma2_num, SIGMA2_DEN),
                None => {
                    let mut rng = SecureRng::from_seed_insecure(mix64(seed ^ mix64(key)));
                    discrete_gaussian(&mut rng, self.sigma2_num, SIGMA2_DEN)
                }
            };
            Ok(z as f64)
        } else {
            let mut rng = Streams::new(seed).stream(name_id("dp-universe"), 0, key, 0);
            let z: f64 = StandardNormal.sample(&mut rng);
            Ok(m * self.sigma * z)
        }
    }

    /// The release on the training rows `x` whose columns have the ids `item_ids`: the items
    /// some row counts whose noisy count exceeds the threshold.
    pub fn select(&self, x: &Csr, item_ids: &[String], cap_seed: u64) -> Result<Universe> {
        assert_eq!(item_ids.len(), x.cols(), "one id per column");
        let counts = self.counts(x, cap_seed);
        let (seed, mut os) = match self.source {
            NoiseSource::Os if self.secure => (0, Some(SecureRng::from_os()?)),
            NoiseSource::Os => (rand::random::<u64>(), None),
            NoiseSource::InsecureSeed(s) => (s, None),
        };
        let m = COUNT_SCALE as f64;
        let mut u = Universe {
            items: Vec::new(),
            noisy_counts: Vec::new(),
        };
        for (j, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let noisy = (c as f64 + self.noise(seed, &item_ids[j], os.as_mut())?) / m;
            if noisy > self.threshold {
                u.items.push(j as u32);
                u.noisy_counts.push(noisy);
            }
        }
        Ok(u)
    }

    /// The sentence of the privacy report that states this release.
    pub fn describe(&self, kept: usize) -> String {
        let noise = if self.secure {
            "exact discrete Gaussian"
        } else {
            "Gaussian"
        };
        format!(
            "item universe by DP partition selection: {noise} σ={:.4} on each item's weighted \
             count (each user counts at most {} items, item weight √min(1, C/d), L2 sensitivity \
             √C={:.4}), items above T={:.2} kept ({kept} items), zCDP ρ={:.6}, δ_T={:.2e} (the \
             probability that an item only one user has passes T)",
            self.sigma,
            self.max_counted,
            count_sensitivity(self.cap),
            self.threshold,
            self.rho,
            self.delta
        )
    }
}

/// A DP fit whose items are released by [`PartitionSelection`] (the module's doc): the universe
/// of `train` (columns with ids `item_ids`) at the share `share` of the ρ of `total` (a
/// mechanism built at δ′ = (1 − [`DELTA_SHARE`])·δ), then the Gram matrix on the universe — or,
/// with `items` = K, on the K universe items of largest noisy count (a function of the same
/// release, embedded back into the universe) — with the rest of ρ. The model's items are the
/// universe's (its size, never the data's, sets λ's floor); the privacy entry states the whole
/// fit at (ε, `delta_total`).
#[allow(clippy::too_many_arguments)]
pub fn fit_private_on_universe(
    train: &Csr,
    item_ids: &[String],
    params: &super::ModelParams,
    total: &super::dp::GramMechanism,
    delta_total: f64,
    items: Option<usize>,
    share: f64,
    cap_seed: u64,
    progress: &dyn Fn(&str),
) -> Result<UniverseFit> {
    use super::dp_items::{embed, restrict_columns, top_items, ItemSelection};
    if !(share > 0.0 && share < 1.0) {
        return Err(Error::InvalidParameter {
            name: "dp-items-share",
            requirement: "in (0, 1)",
            value: share,
        });
    }
    if items == Some(0) {
        return Err(Error::InvalidParameter {
            name: "dp-items",
            requirement: ">= 1",
            value: 0.0,
        });
    }
    let t = std::time::Instant::now();
    progress("DP partition selection of the item universe");
    let selection = PartitionSelection::new(
        share * total.rho,
        total.cap,
        delta_total * DELTA_SHARE,
        total.secure,
        total.source,
    )?;
    let universe = selection.select(train, item_ids, cap_seed)?;
    let n = universe.items.len();
    if n == 0 {
        return Err(Error::Invalid(format!(
            "no item passed the DP partition selection's threshold ({:.1} weighted users) at this \
             ε: give a public catalogue (--catalogue) or a larger --dp-epsilon",
            selection.threshold
        )));
    }
    let on_universe = restrict_columns(train, &universe.items);
    let gram = total.with_sigma_scaled(1.0 / (1.0 - share).sqrt());
    let universe_s = t.elapsed().as_secs_f64();
    let (mut f, chosen) = match items {
        Some(k) => {
            let chosen = top_items(&universe.noisy_counts, k);
            let restricted = restrict_columns(&on_universe, &chosen);
            drop(on_universe);
            let mut f = super::dp::fit_private(&restricted, params, &gram, cap_seed, progress)?;
            f.model = embed(f.model, &chosen, n)?;
            f.by_shift = super::dp_items::embed_each(f.by_shift, &chosen, n)?;
            (f, Some(chosen))
        }
        None => {
            if !super::dp_items::dense_fit_fits(params, n) {
                return Err(Error::Invalid(format!(
                    "the DP partition selection released {n} items, whose dense noisy Gram matrix \
                     does not fit in the available memory: give --dp-items K to fit on the K of \
                     them with the largest noisy counts (docs/training-privacy.md)"
                )));
            }
            (
                super::dp::fit_private(&on_universe, params, &gram, cap_seed, progress)?,
                None,
            )
        }
    };
    f.report
        .stages
        .insert(0, ("item universe".into(), universe_s));
    let rho = selection.rho + gram.rho;
    let epsilon = crate::privacy::zcdp_epsilon(rho, total.delta);
    let fitted = match &chosen {
        Some(c) => format!(
            "; the top {} of its {n} items by noisy count fitted",
            c.len()
        ),
        None => String::new(),
    };
    f.privacy = crate::privacy::PopulationPrivacy {
        epsilon: Some(epsilon),
        delta: delta_total,
        mechanism: format!(
            "two stages, δ_T-approximately ρ-zCDP with ρ={rho:.6} = {:.6} + {:.6} and \
             δ_T={:.2e}; (ε, δ) = (ε of ρ at δ′={:.2e} by Canonne–Kamath–Steinke, δ_T + δ′): \
             (1) {}{fitted}; (2) {}",
            selection.rho,
            gram.rho,
            selection.delta,
            total.delta,
            selection.describe(n),
            f.privacy.mechanism
        ),
        note: format!(
            "{}; the item counts that release the universe: {:.0}% of ρ",
            f.privacy.note,
            100.0 * share
        ),
        ..f.privacy
    };
    let selection_out = chosen.map(|items| ItemSelection {
        items,
        noisy_counts: universe.noisy_counts.clone(),
    });
    Ok(UniverseFit {
        fit: f,
        universe,
        selection: selection_out,
        partition: selection,
    })
}

/// A DP fit on a released universe.
#[derive(Debug)]
pub struct UniverseFit {
    /// The fit, its model on the universe's items, its privacy entry the whole fit's.
    pub fit: super::dp::PrivateFit,
    /// The released universe (columns of the data) and its noisy counts.
    pub universe: Universe,
    /// With `--dp-items`: the chosen universe items (indices into the universe).
    pub selection: Option<super::dp_items::ItemSelection>,
    /// The partition selection that released it.
    pub partition: PartitionSelection,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::csr_from_rows as csr;

    /// T meets the requested δ_T and is the smallest that does (to the bisection's tolerance):
    /// at T − 10⁻³σ the bound is exceeded.
    #[test]
    fn the_threshold_is_the_smallest_that_meets_delta() {
        for secure in [false, true] {
            let p = PartitionSelection::new(0.01, 20, 5e-9, secure, NoiseSource::InsecureSeed(1))
                .unwrap();
            assert!(p.delta <= 5e-9, "{}", p.delta);
            let below = unique_failure(
                p.threshold - 1e-3 * p.sigma,
                p.sigma,
                20,
                MAX_COUNTED,
                secure,
            );
            assert!(below > 5e-9, "secure={secure}: {below}");
            assert!(p.threshold > 6.0 * p.sigma, "{} {}", p.threshold, p.sigma);
        }
    }

    /// Items no row counts are never released; an item counted by many rows is; the noise of an
    /// item follows its id, not its column.
    #[test]
    fn only_counted_items_can_pass() {
        let p =
            PartitionSelection::new(50.0, 4, 1e-6, false, NoiseSource::InsecureSeed(3)).unwrap();
        let rows: Vec<Vec<u32>> = (0..200).map(|u| vec![0, 2, (u % 2) as u32 + 3]).collect();
        let x = csr(&rows, 6);
        let ids: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        let u = p.select(&x, &ids, 0).unwrap();
        assert_eq!(u.items, vec![0, 2, 3, 4]);
        // The same items under other column positions get the same noisy counts.
        let moved: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| r.iter().map(|&j| 5 - j).collect())
            .collect();
        let rev: Vec<String> = ids.iter().rev().cloned().collect();
        let v = p.select(&csr(&moved, 6), &rev, 0).unwrap();
        assert_eq!(v.items, vec![1, 2, 3, 5]);
        let mut a = u.noisy_counts.clone();
        let mut b = v.noisy_counts.clone();
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        assert_eq!(a, b);
    }

    /// `n` users over 30 shared items (user u has the items ≡ u, u+1, u+3 mod 30 and three
    /// more), and, with `unique`, one more user whose only item is item 30.
    fn shared(n: u32, unique: bool) -> (Csr, Vec<String>) {
        let mut rows: Vec<Vec<u32>> = (0..n)
            .map(|u| {
                let mut r: Vec<u32> = [0, 1, 3, 7, 12, 20].iter().map(|k| (u + k) % 30).collect();
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect();
        if unique {
            rows.push(vec![30]);
        }
        let ids = (0..31).map(|j| format!("i{j}")).collect();
        (csr(&rows, 31), ids)
    }

    /// The defaults of `recsel fit --dp-epsilon ε` (δ = 1e-8, C = 20, share 0.1, weight bound):
    /// the whole-fit mechanism at δ′ = δ/2 and the selection at 10% of its ρ.
    fn default_selection(
        epsilon: f64,
        seed: u64,
    ) -> (super::super::dp::GramMechanism, PartitionSelection) {
        let total = super::super::dp::GramMechanism::new(
            epsilon,
            1e-8 * (1.0 - DELTA_SHARE),
            20,
            false,
            NoiseSource::InsecureSeed(seed),
        )
        .unwrap()
        .with_shift(3.0)
        .unwrap();
        let p =
            PartitionSelection::new(0.1 * total.rho, 20, 1e-8 * DELTA_SHARE, false, total.source)
                .unwrap();
        (total, p)
    }

    /// An item only one user has is released with probability at most Q((T − 1)/σ) ≤ δ_T =
    /// 5·10⁻⁹ at the defaults, at every ε (computed); over 200 noise draws it never is, while
    /// the shared items are. Power: the data's own universe (every item some row has: the rule
    /// of a fit without DP) contains it every time, and the same selection without its
    /// threshold releases it in most draws.
    #[test]
    fn an_item_only_one_user_has_is_not_released() {
        let (x, ids) = shared(3000, true);
        for epsilon in [1.0, 8.0] {
            let (_, p) = default_selection(epsilon, 0);
            let q = tail((p.threshold - 1.0) / p.sigma, false);
            assert!(
                q <= p.delta && p.delta <= 5e-9,
                "ε={epsilon}: {q} {}",
                p.delta
            );
            let mut loose = p;
            loose.threshold = 0.0;
            let mut leaked = 0;
            for seed in 0..200 {
                let p = PartitionSelection {
                    source: NoiseSource::InsecureSeed(seed),
                    ..p
                };
                let u = p.select(&x, &ids, 1).unwrap();
                assert!(!u.items.contains(&30), "ε={epsilon} seed {seed}");
                if epsilon == 8.0 {
                    assert_eq!(u.items, (0..30).collect::<Vec<u32>>(), "seed {seed}");
                }
                let l = PartitionSelection {
                    source: NoiseSource::InsecureSeed(seed),
                    ..loose
                };
                leaked += usize::from(l.select(&x, &ids, 1).unwrap().items.contains(&30));
            }
            assert!(
                leaked > 60,
                "ε={epsilon}: without a threshold leaked {leaked}/200"
            );
        }
        let data_items: Vec<u32> = (0..31).filter(|&j| x.indices().contains(&j)).collect();
        assert!(
            data_items.contains(&30),
            "the data-derived universe has the unique item"
        );
    }

    /// λ of a DP fit on a released universe is the floor of the universe's size: D and D with a
    /// user whose only item is unique (31 columns against 30 under the data's rule) give the
    /// same universe, the same λ and the same weights (same noise seed); the data's n would
    /// have moved λ.
    #[test]
    fn lambda_depends_only_on_the_released_universe() {
        let params = super::super::ModelParams::new(super::super::Method::Ease, 10.0, 1.0).unwrap();
        let (total, _) = default_selection(8.0, 4);
        let fit = |unique: bool, cols: usize| {
            let (x, ids) = shared(3000, unique);
            let x =
                super::super::dp_items::restrict_columns(&x, &(0..cols as u32).collect::<Vec<_>>());
            fit_private_on_universe(
                &x,
                &ids[..cols],
                &params,
                &total,
                1e-8,
                None,
                0.1,
                1,
                &|_| {},
            )
            .unwrap()
        };
        let (a, b) = (fit(false, 30), fit(true, 31));
        assert_eq!(a.universe.items, b.universe.items);
        assert_eq!(a.fit.l2_used, b.fit.l2_used);
        let gram = total.with_sigma_scaled(1.0 / 0.9f64.sqrt());
        assert_eq!(a.fit.l2_used, gram.l2_used(10.0, a.universe.items.len()));
        assert_ne!(
            gram.l2_used(10.0, 30),
            gram.l2_used(10.0, 31),
            "the data's n moves λ"
        );
        let (super::super::Model::Ease(ma), super::super::Model::Ease(mb)) =
            (&a.fit.model, &b.fit.model)
        else {
            panic!("EASE")
        };
        assert_eq!(ma.n, 30);
        assert_eq!(ma.b, mb.b, "the unique user adds nothing on the universe");
        assert_eq!(a.fit.privacy, b.fit.privacy);
        // The whole fit meets the requested (ε, δ): ε of ρ₁ + ρ₂ at δ/2, and δ.
        let eps = a.fit.privacy.epsilon.unwrap();
        assert!((eps - 8.0).abs() < 1e-6, "{eps}");
        assert_eq!(a.fit.privacy.delta, 1e-8);
    }
}
