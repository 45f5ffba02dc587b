//! The privacy accounting of selection from private candidates (docs/private-candidates.md): for
//! each configuration, every (ε, δ) statement the theorems give, from ε₀ (and δ₀) of one run.
//!
//! All of it rests on one identity and one lemma (docs/private-candidates.md, "The one lemma"):
//! with the runs' outcomes totally ordered, the best of K runs is an outcome y with probability
//! `φ(G) − φ(F) = ∫_F^G φ'(z) dz`, φ the generating function of K and F, G the probabilities that
//! one run ranks below / not above y. If one run is ε₀-DP, F and G move by at most a factor e^{ε₀}
//! (and so do 1 − F, 1 − G), so the release is `ε₀ + sup ln φ'(z')/φ'(z)`-DP, the supremum over
//! ε₀-close pairs (z' ≤ e^{ε₀} z, 1 − z' ≥ e^{−ε₀}(1 − z)).

use super::Stopping;

/// One (ε, δ)-DP statement and the result it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Statement {
    /// ε of the statement.
    pub epsilon: f64,
    /// δ of the statement (0: pure ε-DP).
    pub delta: f64,
    /// The theorem, with its section (docs/private-candidates.md).
    pub source: &'static str,
}

/// `ln(1/(1 − x))` for x in [0, 1), without cancellation for small x.
fn neg_ln_1m(x: f64) -> f64 {
    -(-x).ln_1p()
}

/// ε of the best of K runs (no threshold, no hard stop) from ε₀-DP runs: the lemma's supremum
/// for each stopping law.
///
/// * Geometric(γ): φ' ∝ (1 − (1−γ)z)^−2, so 3ε₀ (Liu & Talwar, Theorem 3.2);
/// * D_{η,γ}: φ' ∝ (1 − (1−γ)z)^{−η−1}, so (2+η)ε₀ (Papernot & Steinke 2022);
/// * Poisson(μ): φ' ∝ e^{μz}, and z' − z ≤ tanh(ε₀/2) over ε₀-close pairs, so
///   ε₀ + μ·tanh(ε₀/2) (docs/private-candidates.md, "Poisson");
/// * a fixed number R of runs: Rε₀ (composition).
pub(crate) fn best_of_epsilon(stopping: &Stopping, eps0: f64) -> f64 {
    match *stopping {
        Stopping::Geometric { .. } => 3.0 * eps0,
        Stopping::TruncatedNegBinomial { eta, .. } => (2.0 + eta) * eps0,
        Stopping::Poisson { mu } => eps0 + mu * (0.5 * eps0).tanh(),
        Stopping::Fixed { runs } => runs as f64 * eps0,
    }
}

/// The largest ε₀ whose [`best_of_epsilon`] is at most `epsilon` (what a mechanism calibrated to
/// a total ε spends on one run).
pub(crate) fn best_of_eps0(stopping: &Stopping, epsilon: f64) -> f64 {
    match *stopping {
        Stopping::Geometric { .. } => epsilon / 3.0,
        Stopping::TruncatedNegBinomial { eta, .. } => epsilon / (2.0 + eta),
        Stopping::Fixed { runs } => epsilon / runs as f64,
        // ε₀ + μ tanh(ε₀/2) is increasing in ε₀: bisection, keeping the lower end (never above).
        Stopping::Poisson { .. } => {
            let (mut lo, mut hi) = (0.0, epsilon);
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if best_of_epsilon(stopping, mid) <= epsilon {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            lo
        }
    }
}

/// `1 − E[(1 − δ₀)^K]`: the probability that one of the K runs falls in the δ₀ part of an
/// (ε₀, δ₀)-DP run (the canonical decomposition, docs/private-candidates.md, "Approximate-DP
/// runs").
pub(crate) fn delta_of_runs(stopping: &Stopping, max_runs: Option<u64>, delta0: f64) -> f64 {
    if delta0 == 0.0 {
        return 0.0;
    }
    let z = 1.0 - delta0;
    let capped = |k: u64| max_runs.map_or(k, |t| k.min(t));
    let value = match *stopping {
        Stopping::Fixed { runs } => 1.0 - z.powf(capped(runs) as f64),
        Stopping::Geometric { gamma } => {
            // φ(z) = γz / (1 − (1−γ)z); with a hard stop T the mass beyond T sits at T.
            let r = (1.0 - gamma) * z;
            let head = match max_runs {
                // 1 − φ(1−δ₀) = δ₀/(γ + (1−γ)δ₀), without the cancellation.
                None => return (delta0 / (gamma + (1.0 - gamma) * delta0)).clamp(0.0, 1.0),
                Some(t) => {
                    let tf = t as f64;
                    gamma * z * (1.0 - r.powf(tf - 1.0)) / (1.0 - r)
                        + (1.0 - gamma).powf(tf - 1.0) * z.powf(tf)
                }
            };
            1.0 - head
        }
        // The other laws: the pgf summed over the support (a few thousand terms at most for the
        // parameters a run can afford), the tail beyond T counted as T runs.
        Stopping::TruncatedNegBinomial { .. } | Stopping::Poisson { .. } => {
            let law = super::Law::new(stopping).expect("validated stopping law");
            let mut phi = 0.0;
            let mut mass = 0.0;
            let mut k = 0u64;
            while mass < 1.0 - 1e-15 && k < 50_000_000 {
                let p = law.pmf(k);
                mass += p;
                phi += p * z.powf(capped(k) as f64);
                k += 1;
                if max_runs.is_some_and(|t| k > t) {
                    break;
                }
            }
            // What the loop did not reach (beyond T, or beyond its end) counts as runs at the
            // cap: (1 − δ₀)^T, or 0 without a cap.
            let rest = (1.0 - mass).max(0.0);
            phi += rest * max_runs.map_or(0.0, |t| z.powf(t as f64));
            1.0 - phi
        }
    };
    value.clamp(0.0, 1.0)
}

/// An upper bound on `P[K > T]`, the probability that the hard stop T cuts the run short.
pub(crate) fn tail_beyond(stopping: &Stopping, t: u64) -> f64 {
    let tf = t as f64;
    match *stopping {
        Stopping::Fixed { runs } => {
            if runs > t {
                1.0
            } else {
                0.0
            }
        }
        Stopping::Geometric { gamma } => (tf * (-gamma).ln_1p()).exp(),
        // pmf(k+1)/pmf(k) = (1−γ)(k+η)/(k+1): for k > T at most ρ = (1−γ)·max(1, (T+1+η)/(T+2)),
        // so the tail is at most pmf(T+1)/(1−ρ) when ρ < 1.
        Stopping::TruncatedNegBinomial { eta, gamma } => {
            let law = super::Law::new(stopping).expect("validated stopping law");
            let rho = (1.0 - gamma) * ((tf + 1.0 + eta) / (tf + 2.0)).max(1.0);
            if rho < 1.0 {
                (law.pmf(t + 1) / (1.0 - rho)).min(1.0)
            } else {
                1.0
            }
        }
        // pmf(k+1)/pmf(k) = μ/(k+1) ≤ μ/(T+2) for k > T.
        Stopping::Poisson { mu } => {
            let law = super::Law::new(stopping).expect("validated stopping law");
            let rho = mu / (tf + 2.0);
            if rho < 1.0 {
                (law.pmf(t + 1) / (1.0 - rho)).min(1.0)
            } else {
                1.0
            }
        }
    }
}

/// The extra ε of the hard-stopped geometric best-of (docs/private-candidates.md, "Hard stop,
/// pure"): `ln(1 + h*) + ln(1/(1 − (1−γ)^T))`, where `h* = max_{0≤u≤1−γ} u^{T−1}(1−u)(1−γ−u)T/γ`
/// bounds how much the cut can raise φ'_T above the geometric φ' and `1 − (1−γ)^T` how much it
/// can lower it. The maximiser is the smaller root of `(T+1)u² − (2−γ)T u + (T−1)(1−γ) = 0`.
pub(crate) fn hard_stop_extra(gamma: f64, t: u64) -> f64 {
    if gamma >= 1.0 {
        return 0.0;
    }
    let tf = t as f64;
    let c = 1.0 - gamma;
    let (a, b, cc) = (tf + 1.0, (1.0 + c) * tf, (tf - 1.0) * c);
    let disc = (b * b - 4.0 * a * cc).max(0.0);
    // The smaller root, written without cancellation: 2cc / (b + √disc).
    let u = if cc > 0.0 {
        2.0 * cc / (b + disc.sqrt())
    } else {
        0.0
    };
    let u = u.clamp(0.0, c);
    let h = if t == 1 {
        c / gamma
    } else {
        ((tf - 1.0) * u.ln()).exp() * (1.0 - u) * (c - u) * tf / gamma
    };
    h.ln_1p() + neg_ln_1m((tf * (-gamma).ln_1p()).exp())
}

/// The extra ε of the hard-stopped known-threshold selection (docs/private-candidates.md,
/// "Known threshold"): the larger of the released-candidate term `ln(1/(1 − (1−γ)^T))` and the ⊥
/// term `ln(1 + (1−γ)^T M_T / γ)`, `M_T = max_x x(1−x)^{T−1} = (1/T)(1 − 1/T)^{T−1}`.
pub(crate) fn threshold_extra(gamma: f64, t: u64) -> f64 {
    if gamma >= 1.0 {
        return 0.0;
    }
    let tf = t as f64;
    let tail = (tf * (-gamma).ln_1p()).exp();
    let m_t = if t == 1 {
        1.0
    } else {
        ((tf - 1.0) * (-1.0 / tf).ln_1p()).exp() / tf
    };
    neg_ln_1m(tail).max((tail * m_t / gamma).ln_1p())
}

/// Every statement the theorems give for one configuration (docs/private-candidates.md,
/// "Which statement applies"), strongest-δ first.
pub(crate) fn statements(
    stopping: &Stopping,
    eps0: f64,
    delta0: f64,
    threshold: bool,
    max_runs: Option<u64>,
) -> Vec<Statement> {
    let mut out = Vec::new();
    // The δ of the runs themselves (0 for pure runs), for the budget without a cap.
    let d_free = delta_of_runs(stopping, None, delta0);
    // Without a hard stop: the law's own statement.
    let (eps_free, source_free) = if threshold {
        (
            2.0 * eps0,
            "Liu & Talwar 2019, Theorem 3.1 (known threshold)",
        )
    } else {
        (
            best_of_epsilon(stopping, eps0),
            match stopping {
                Stopping::Geometric { .. } => "Liu & Talwar 2019, Theorem 3.2 (random stopping)",
                Stopping::TruncatedNegBinomial { .. } => {
                    "Papernot & Steinke 2022 (truncated negative binomial)"
                }
                Stopping::Poisson { .. } => "recsel, docs/private-candidates.md (Poisson)",
                Stopping::Fixed { .. } => "basic composition",
            },
        )
    };
    match max_runs {
        None => out.push(Statement {
            epsilon: eps_free,
            delta: d_free,
            source: source_free,
        }),
        Some(t) => {
            // Pure forms of the hard stop (geometric budgets only).
            if delta0 == 0.0 {
                if let Stopping::Geometric { gamma } = *stopping {
                    let (extra, base, source) = if threshold {
                        (
                            threshold_extra(gamma, t),
                            2.0 * eps0,
                            "Liu & Talwar 2019, Theorem 3.1(b) (known threshold, hard stop)",
                        )
                    } else {
                        (
                            hard_stop_extra(gamma, t),
                            3.0 * eps0,
                            "Liu & Talwar 2019, Theorem 3.5 (hard stop, pure)",
                        )
                    };
                    out.push(Statement {
                        epsilon: base + extra,
                        delta: 0.0,
                        source,
                    });
                }
            }
            // At most T runs: composition.
            let runs = match *stopping {
                Stopping::Fixed { runs } => runs.min(t),
                _ => t,
            };
            out.push(Statement {
                epsilon: runs as f64 * eps0,
                delta: delta_of_runs(&Stopping::Fixed { runs }, None, delta0),
                source: "basic composition (at most T runs)",
            });
            // The cut changes the output only when K > T: the free statement plus that chance
            // on both sides.
            let tail = tail_beyond(stopping, t);
            if tail < 1.0 {
                out.push(Statement {
                    epsilon: eps_free,
                    delta: (d_free + (1.0 + eps_free.exp()) * tail).min(1.0),
                    source: if threshold {
                        "Liu & Talwar 2019, Theorem 3.1(c) (known threshold, hard stop)"
                    } else {
                        "Liu & Talwar 2019, Theorem 3.4 (hard stop)"
                    },
                });
            }
        }
    }
    // Strongest δ first; among equal δ the smallest ε.
    out.sort_by(|a, b| {
        a.delta
            .total_cmp(&b.delta)
            .then(a.epsilon.total_cmp(&b.epsilon))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_stop_extra_vanishes_with_t_and_matches_a_grid_search() {
        for gamma in [0.5, 0.1, 0.01] {
            let mut last = f64::INFINITY;
            for t in [2u64, 5, 20, 100, 1000, 10_000] {
                let x = hard_stop_extra(gamma, t);
                // The closed-form maximiser against a fine grid of u.
                let (c, tf) = (1.0 - gamma, t as f64);
                let grid = (0..=200_000)
                    .map(|i| {
                        let u = c * i as f64 / 200_000.0;
                        u.powf(tf - 1.0) * (1.0 - u) * (c - u) * tf / gamma
                    })
                    .fold(0.0f64, f64::max);
                let by_grid = grid.ln_1p() + neg_ln_1m(c.powf(tf));
                assert!(x >= by_grid - 1e-12, "gamma {gamma} T {t}: {x} < {by_grid}");
                assert!(x <= by_grid + 1e-6, "gamma {gamma} T {t}: {x} >> {by_grid}");
                if gamma * tf > 3.0 {
                    assert!(x <= last + 1e-15, "not decreasing in T");
                    last = x;
                }
            }
            assert!(hard_stop_extra(gamma, 100_000) < 1e-12);
        }
    }

    #[test]
    fn the_threshold_extra_is_below_the_two_e_to_minus_gamma_t_form() {
        // The form 2e^{−γT} for T ≥ 1 + 1/(eγ) (docs/private-candidates.md).
        for gamma in [0.9, 0.5, 0.1, 0.01, 0.001] {
            let t0 = (1.0 + 1.0 / (std::f64::consts::E * gamma)).ceil() as u64;
            for t in [t0, t0 + 1, 2 * t0, 10 * t0, 100 * t0] {
                let x = threshold_extra(gamma, t);
                let form = 2.0 * (-gamma * t as f64).exp();
                assert!(x <= form, "gamma {gamma} T {t}: {x} > {form}");
            }
        }
    }

    #[test]
    fn poisson_calibration_inverts_the_bound() {
        for mu in [0.5, 3.0, 40.0] {
            let s = Stopping::Poisson { mu };
            for eps in [0.1, 1.0, 5.0] {
                let e0 = best_of_eps0(&s, eps);
                let back = best_of_epsilon(&s, e0);
                assert!(
                    back <= eps && back > eps * (1.0 - 1e-12),
                    "{mu} {eps}: {back}"
                );
            }
        }
    }
}
