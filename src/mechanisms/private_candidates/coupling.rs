//! The coupling bound behind the estimated sparse vector (docs/sparse-vector.md, "The coupling
//! lemma"): how often the smoothed log-odds of m runs of an ε₀-DP query move by more than Δ
//! between neighbouring data sets, under the best coupling recsel uses.
//!
//! A query's m runs are summarised by S, the number of runs scoring at least the query's
//! threshold: S ~ Bin(m, p) on D and S' ~ Bin(m, p') on D', with p and p' ε₀-close (both are
//! probabilities of one event of an ε₀-DP algorithm). The estimate is the smoothed log-odds
//! `G(S) = ln((S + c)/(m − S + c))`. Couple the runs through shared uniforms u_1..u_m
//! (S = #{u_j < p}, S' = #{u_j < p'}): for p ≤ p', S' = A + B with A = S and B the number of
//! u_j in [p, p'), and G(S') − G(S) ≥ 0 grows with p' and shrinks with p. So for p in a cell
//! [p_a, p_b] the failure `P(G(S') − G(S) > Δ)` is at most the same event with S built from p_a
//! and S' from the largest p' ε₀-close to p_b — a number computed exactly from binomial laws.
//! The supremum over cells is a rigorous bound on the supremum over all ε₀-close pairs (the other
//! orientation, p' < p, is the same computation with the data sets exchanged).

use statrs::function::beta::beta_reg;
use statrs::function::gamma::ln_gamma;

/// The smoothed log-odds `G(s) = ln((s + c)/(m − s + c))` of s runs above the threshold out of m.
#[inline]
pub(crate) fn smoothed_log_odds(s: u64, m: u64, c: f64) -> f64 {
    ((s as f64 + c) / ((m - s) as f64 + c)).ln()
}

/// `P(Bin(n, q) ≥ b)`.
fn binomial_sf(n: u64, q: f64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else if b > n || q <= 0.0 {
        0.0
    } else if q >= 1.0 {
        1.0
    } else {
        // The regularised incomplete beta: P(Bin(n, q) ≥ b) = I_q(b, n − b + 1).
        beta_reg(b as f64, (n - b + 1) as f64, q)
    }
}

/// `P(Bin(m, p) = a)`, exact at p = 0 and p = 1.
pub(crate) fn binomial_pmf(m: u64, p: f64, a: u64) -> f64 {
    if p <= 0.0 {
        return f64::from(u8::from(a == 0));
    }
    if p >= 1.0 {
        return f64::from(u8::from(a == m));
    }
    let (mf, af) = (m as f64, a as f64);
    (ln_gamma(mf + 1.0) - ln_gamma(af + 1.0) - ln_gamma(mf - af + 1.0)
        + af * p.ln()
        + (mf - af) * (-p).ln_1p())
    .exp()
}

/// The largest p' that is ε₀-close to p from above: `min(e^{ε₀} p, 1 − e^{−ε₀}(1 − p))`.
pub(crate) fn upper_neighbour(p: f64, eps0: f64) -> f64 {
    (eps0.exp() * p)
        .min(1.0 - (-eps0).exp() * (1.0 - p))
        .min(1.0)
}

/// Half-width of the grid of cells in log-odds, and its step: cells [σ(x), σ(x + h)] for x from
/// −W to W, plus the end cells [0, σ(−W)] and [σ(W), 1] (σ the logistic function).
const HALF_WIDTH: f64 = 20.0;
const STEP: f64 = 0.05;
/// Binomial terms smaller than this are left out of the sums and their mass added to the failure
/// (so the bound stays an upper bound).
const NEGLIGIBLE: f64 = 1e-30;

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// β₁ of docs/sparse-vector.md: an upper bound on `P(|G(S) − G(S')| > Δ)` under the shared-
/// uniform coupling, over every ε₀-close pair of percentiles. `m ≥ 1`, `c > 0`, `delta > 0`.
pub(crate) fn coupling_failure(m: u64, c: f64, eps0: f64, delta: f64) -> f64 {
    // For each a, the smallest b with G(a + b) − G(a) > Δ (m − a + 1: none).
    let g: Vec<f64> = (0..=m).map(|s| smoothed_log_odds(s, m, c)).collect();
    // g is increasing, so a binary search finds the first index above g[a] + Δ.
    let first_fail: Vec<u64> = (0..=m as usize)
        .map(|a| {
            let above = g[a..].partition_point(|&x| x - g[a] <= delta);
            above as u64
        })
        .collect();
    let mut edges = vec![0.0];
    let cells = (2.0 * HALF_WIDTH / STEP).round() as i64;
    for i in 0..=cells {
        edges.push(logistic(-HALF_WIDTH + i as f64 * STEP));
    }
    edges.push(1.0);
    edges
        .windows(2)
        .map(|w| cell_failure(m, w[0], upper_neighbour(w[1], eps0), &first_fail))
        .fold(0.0, f64::max)
}

/// The failure bound of one cell: S from p_a, S' from p2 ≥ p_a.
fn cell_failure(m: u64, pa: f64, p2: f64, first_fail: &[u64]) -> f64 {
    let q = if pa < 1.0 {
        ((p2 - pa) / (1.0 - pa)).clamp(0.0, 1.0)
    } else {
        0.0
    };
    // Walk outwards from the mode of Bin(m, p_a) until the terms are negligible.
    let mode = ((m as f64 + 1.0) * pa).floor().min(m as f64) as u64;
    let mut total_mass = 0.0;
    let mut fail = 0.0;
    let mut visit = |a: u64| -> bool {
        let w = binomial_pmf(m, pa, a);
        if w < NEGLIGIBLE && a != mode {
            return false;
        }
        total_mass += w;
        fail += w * binomial_sf(m - a, q, first_fail[a as usize]);
        true
    };
    visit(mode);
    let mut a = mode;
    while a < m {
        a += 1;
        if !visit(a) {
            break;
        }
    }
    let mut a = mode;
    while a > 0 {
        a -= 1;
        if !visit(a) {
            break;
        }
    }
    (fail + (1.0 - total_mass).max(0.0)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound against a brute-force sum over the joint law of (A, B) at a few pairs: it is an
    /// upper bound of every pair's failure and is attained up to the cell width.
    #[test]
    fn the_bound_covers_brute_force_failures() {
        let (m, c, eps0, delta) = (40u64, 1.0, 0.5, 1.4);
        let bound = coupling_failure(m, c, eps0, delta);
        let mut worst = 0.0f64;
        for i in 1..400 {
            let p = i as f64 / 400.0;
            let p2 = upper_neighbour(p, eps0);
            // Brute force: A ~ Bin(m, p), B | A ~ Bin(m − A, (p2 − p)/(1 − p)).
            let q = (p2 - p) / (1.0 - p);
            let mut f = 0.0;
            for a in 0..=m {
                for b in 0..=(m - a) {
                    if smoothed_log_odds(a + b, m, c) - smoothed_log_odds(a, m, c) > delta {
                        f += binomial_pmf(m, p, a) * binomial_pmf(m - a, q, b);
                    }
                }
            }
            assert!(f <= bound * (1.0 + 1e-9) + 1e-15, "p {p}: {f} > {bound}");
            worst = worst.max(f);
        }
        assert!(worst > 0.5 * bound, "worst {worst}, bound {bound}");
    }

    #[test]
    fn more_runs_or_more_slack_fail_less_often() {
        let a = coupling_failure(100, 1.0, 0.5, 1.5);
        let b = coupling_failure(400, 1.0, 0.5, 1.5);
        let c = coupling_failure(400, 1.0, 0.5, 1.8);
        assert!(a > b && b > c && c > 0.0, "{a} {b} {c}");
    }
}
