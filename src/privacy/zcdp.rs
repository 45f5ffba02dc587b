//! The one conversion between zero-concentrated DP and (ε, δ)-DP (docs/training-privacy.md,
//! "Accounting"): ρ-zCDP implies (ε, δ)-DP for the ε of Canonne, Kamath and Steinke (2020,
//! Prop. 12), never more than the classical `ρ + 2√(ρ ln(1/δ))` of Bun and Steinke (2016,
//! Prop. 1.3); and its inverse, the largest ρ an (ε, δ) request allows.

/// `ln δ(ε)` of ρ-zCDP by the conversion of Canonne, Kamath and Steinke (2020, Prop. 12):
/// `δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α`. The infimum is found on a grid of
/// `ln(α−1)` refined by golden-section search (the exponent is smooth and unimodal in α).
fn log_delta_of(rho: f64, epsilon: f64) -> f64 {
    let f = |x: f64| {
        let a = 1.0 + x.exp();
        (a - 1.0) * (a * rho - epsilon) - (a - 1.0).ln() + a * (1.0 - 1.0 / a).ln()
    };
    let (lo, hi, steps) = (-25.0f64, 25.0f64, 500);
    let h = (hi - lo) / steps as f64;
    let best = (0..=steps)
        .map(|k| lo + k as f64 * h)
        .min_by(|a, b| f(*a).total_cmp(&f(*b)))
        .unwrap_or(0.0);
    let (mut a, mut b) = (best - h, best + h);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..80 {
        let (c, d) = (b - g * (b - a), a + g * (b - a));
        if f(c) < f(d) {
            b = d;
        } else {
            a = c;
        }
    }
    f(best).min(f((a + b) / 2.0)).min(0.0)
}

/// ε of ρ-zCDP at δ: the smallest ε whose δ(ε) by the Canonne–Kamath–Steinke conversion is at
/// most δ (never more than the classical `ρ + 2√(ρ ln(1/δ))`, which bounds the search). This is
/// the one place the crate turns zCDP into (ε, δ): the DP fit, the item-set fit and the
/// ledger's accountant all call it.
pub fn zcdp_epsilon(rho: f64, delta: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    let target = delta.ln();
    let (mut lo, mut hi) = (0.0f64, rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt());
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if log_delta_of(rho, mid) <= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The largest ρ whose [`zcdp_epsilon`] at δ is at most ε (bisection, rounded down): the ρ a
/// Gaussian release may spend for an (ε, δ) request.
pub fn max_zcdp_rho(epsilon: f64, delta: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, epsilon);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if zcdp_epsilon(mid, delta) <= epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{ContinuousCDF, Normal};

    /// The exact (ε, δ) curve of the Gaussian mechanism with μ = Δ/σ (Balle–Wang 2018): every
    /// valid conversion of its ρ = μ²/2 gives at least this ε.
    fn gaussian_epsilon(mu: f64, delta: f64) -> f64 {
        let phi = Normal::new(0.0, 1.0).unwrap();
        let d = |e: f64| phi.cdf(-e / mu + mu / 2.0) - e.exp() * phi.cdf(-e / mu - mu / 2.0);
        let (mut lo, mut hi) = (0.0, 100.0);
        for _ in 0..100 {
            let m = 0.5 * (lo + hi);
            if d(m) > delta {
                lo = m
            } else {
                hi = m
            }
        }
        hi
    }

    /// The conversion lies between the exact Gaussian curve (below it would be unsound) and the
    /// classical ρ + 2√(ρ ln 1/δ); ρ of (ε, δ) inverts it.
    #[test]
    fn zcdp_conversion_is_sound_and_tighter_than_the_classical_one() {
        for &(rho, delta) in &[
            (0.01, 1e-8),
            (0.1, 1e-5),
            (0.5, 1e-6),
            (2.0, 1e-10),
            (8.0, 1e-6),
        ] {
            let e = zcdp_epsilon(rho, delta);
            let classical = rho + 2.0 * (rho * (1.0f64 / delta).ln()).sqrt();
            let exact = gaussian_epsilon((2.0f64 * rho).sqrt(), delta);
            assert!(e <= classical, "ρ={rho}: {e} > classical {classical}");
            assert!(e >= exact, "ρ={rho}: {e} below the Gaussian curve {exact}");
            assert!(
                e < 0.97 * classical,
                "ρ={rho}: {e} not tighter than {classical}"
            );
            let r = max_zcdp_rho(e, delta);
            assert!(
                (r - rho).abs() < 1e-6 * rho.max(1.0),
                "ρ={rho}: inverted to {r}"
            );
        }
    }
}
