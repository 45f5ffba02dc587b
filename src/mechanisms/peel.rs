//! Peeling GEM and the exponential mechanism without repeating a round's work (docs/lists.md).
//!
//! Peeling runs the top-1 mechanism k times, each round over the candidates not chosen yet
//! (`list.rs`). Much of a round's work is the same in every round; these samplers do it once per
//! list, update it when a round removes a candidate, and draw every round from the law — and,
//! for a seed, with the very draws — of the round they replace:
//!
//! * **GEM, fast path.** A round is `rnm` (exponential noise of scale 2/ε, the literal loop) on
//!   the transformed scores of the candidates left: the slope from `(−Δ_a, s_a)` to the upper
//!   hull of the points `(Δ_b, s_b = q_b − tΔ_b)`, t depending on how many are left. Two savings.
//!   (1) The hull is built from the few points that can be one of its vertices. The shear
//!   `(x, y) ↦ (x, y − tx)` maps the unshifted points `(Δ_b, q_b)` onto those of every t and
//!   keeps every point's height above or below a chord, and rounding moves a shifted point by at
//!   most 2.01·2^−53·(|q_b| + |t|Δ_b); so a point that lies below a chord of the unshifted hull by
//!   more than 2^−46 of the largest `|q_b| + |t|Δ_b` (far beyond twice that rounding and the
//!   rounding of the test) lies strictly below the same chord at every t of the list and is never
//!   a vertex. The hull of the other points is the hull of all, so every transformed score is the
//!   one the round computes. When a round picks an end of a chord, the hull of the points between
//!   its neighbouring vertices takes its place and only those points are certified again.
//!   (2) A candidate's transformed score q'_a is computed only when its noisy value can reach the
//!   running maximum: q'_a ≤ 0, so `q'_a + s·E_a ≤ s·E_a` in floating point too, and a noise
//!   value `s·E_a` below the maximum can neither beat nor tie it. The noise is drawn for every
//!   candidate in order, as the round draws it, so the draws, the comparisons and the pick are
//!   the same.
//! * **GEM, secure path.** On the grid the shear is exact integer arithmetic, so the vertices of
//!   the hull of the integer points do not depend on the shift: they are found once (again when
//!   a round removes one) and each round's shift is applied to them; a candidate's point and
//!   transformed score are computed when permute-and-flip proposes it, as the round's lazy sampler
//!   does. A round whose points are not all below 2^61 runs the round as before.
//! * **Both secure paths** keep the grid while the unit of the sensitivities left is unchanged
//!   (a candidate's grid values depend only on the unit) and rebuild it when it changes; `em`
//!   keeps the largest grid score and sensitivity of the candidates left, found again when a
//!   round removes a candidate that attains one, and its rejection sampler computes a proposal's
//!   weight when it proposes it.
//!
//! The unit tests check every list and the secure generator's state after it against the
//! round-by-round peeling, and `tests/lists.rs` pins lists for a seed.

use robust::Coord;

use super::gem::{
    self, coord, exact_query_at, orient_small, shift, tangent_value, upper_hull, upper_hull_chain,
    GemVariant, SHIFT_BITS, SMALL, TRANSFORM_BITS,
};
use super::secure::{permute_and_flip, ExpWeights, Grid, SecureEpsilon, SecurePrepared};
use super::{argmax_random_ties_seeing_best, Problem};
use crate::error::Result;
use crate::numerics::distributions::exp1;
use crate::numerics::exact::bernoulli_exp_neg;
use crate::rng::{Rng, SecureRng};

/// How a list's peeling runs its rounds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Peeler {
    /// The top-1 mechanism round by round ([`super::Mechanism::select_list`]).
    Rounds,
    /// GEM of this variant and β: [`gem_fast`] and [`gem_secure`].
    Gem {
        /// GEM or mGEM.
        variant: GemVariant,
        /// The failure probability β.
        beta: f64,
    },
    /// The exponential mechanism: [`em_secure`] on the secure path, round by round on the fast
    /// path.
    Exponential,
}

/// The candidates `remaining` of `problem` as a problem of their own (scores, sensitivities and,
/// when the problem has one, the sensitivity order restricted to them).
pub(crate) struct SubProblem {
    scores: Vec<f64>,
    sens: Vec<f64>,
    order: Option<Vec<u32>>,
}

impl SubProblem {
    pub(crate) fn new(problem: &Problem<'_>, remaining: &[usize]) -> Self {
        let q = problem.scores();
        let d = problem.sensitivities();
        let order = problem.sens_order().map(|order| {
            let mut position = vec![u32::MAX; problem.len()];
            for (i, &a) in remaining.iter().enumerate() {
                position[a] = i as u32;
            }
            order
                .iter()
                .map(|&a| position[a as usize])
                .filter(|&p| p != u32::MAX)
                .collect()
        });
        SubProblem {
            scores: remaining.iter().map(|&a| q[a]).collect(),
            sens: remaining.iter().map(|&a| d[a]).collect(),
            order,
        }
    }

    pub(crate) fn problem(&self) -> Problem<'_> {
        let p = Problem::new(&self.scores, &self.sens)
            .expect("candidates of a valid problem form a valid problem");
        match &self.order {
            Some(order) => p.with_sens_order(order),
            None => p,
        }
    }
}

/// The points that can be a vertex of the upper hull of `(Δ_b, q_b − tΔ_b)` at every shift t of
/// magnitude up to a bound, over the candidates left (module docs, GEM fast path).
struct HullFilter {
    /// The upper hull of the unshifted points `(Δ_b, q_b)`: the chords.
    chords: Vec<Coord<f64>>,
    /// The candidates not certified below a chord, by ascending sensitivity.
    points: Vec<usize>,
    /// How far below a chord a point is certified: 2^−46 of the largest `|q_b| + |t|Δ_b` of the
    /// candidates left when the filter was built, for every |t| up to the bound it was built for
    /// (both only shrink as the list goes on).
    margin: f64,
}

impl HullFilter {
    fn new(q: &[f64], d: &[f64], remaining: &[usize], t_max: f64) -> Self {
        let scale = remaining
            .iter()
            .map(|&b| q[b].abs() + t_max * d[b])
            .fold(0.0, f64::max);
        let margin = 64.0 * f64::EPSILON * scale;
        let xs: Vec<f64> = remaining.iter().map(|&b| d[b]).collect();
        let ys: Vec<f64> = remaining.iter().map(|&b| q[b]).collect();
        let chords = upper_hull(&xs, &ys);
        let mut points: Vec<usize> = remaining
            .iter()
            .copied()
            .filter(|&b| !below_chord(&chords, d[b], q[b], margin))
            .collect();
        points.sort_unstable_by_key(|&b| d[b].to_bits());
        HullFilter {
            chords,
            points,
            margin,
        }
    }

    /// Candidate `b` left. A point certified below a chord with `b` at an end is certified again
    /// against the hull of the points between `b`'s neighbouring vertices, which replaces `b`
    /// among the chords; the other chords and certificates are unchanged (removing a vertex
    /// changes the upper hull only between its neighbours).
    fn remove(&mut self, q: &[f64], d: &[f64], remaining: &[usize], b: usize) {
        let Some(j) = self.chords.iter().position(|v| v.x == d[b] && v.y == q[b]) else {
            self.points.retain(|&p| p != b);
            return;
        };
        let lo = if j > 0 {
            self.chords[j - 1].x
        } else {
            f64::NEG_INFINITY
        };
        let hi = self.chords.get(j + 1).map_or(f64::INFINITY, |v| v.x);
        let inside = |p: usize| lo <= d[p] && d[p] <= hi;
        let between = remaining.iter().copied().filter(|&p| inside(p));
        let xs: Vec<f64> = between.clone().map(|p| d[p]).collect();
        let ys: Vec<f64> = between.clone().map(|p| q[p]).collect();
        let local = upper_hull(&xs, &ys);
        // `local` runs from the vertex before `b` (or the leftmost point left) to the vertex
        // after it (or the rightmost point left): it replaces chords[j - 1..=j + 1].
        let from = j.saturating_sub(1);
        let to = (j + 2).min(self.chords.len());
        self.chords.splice(from..to, local);
        let (chords, margin) = (&self.chords, self.margin);
        let kept: Vec<usize> = between
            .filter(|&p| !below_chord(chords, d[p], q[p], margin))
            .collect();
        self.points.retain(|&p| !inside(p));
        self.points.extend(kept);
        self.points.sort_unstable_by_key(|&p| d[p].to_bits());
    }
}

/// Whether `(x, y)` lies below the upper hull `chords` by more than `margin` (false for a
/// margin that is not finite).
fn below_chord(chords: &[Coord<f64>], x: f64, y: f64, margin: f64) -> bool {
    let j = chords.partition_point(|v| v.x < x);
    let top = match chords.get(j) {
        Some(v) if v.x == x => v.y,
        Some(w) if j > 0 => {
            let u = chords[j - 1];
            u.y + (w.y - u.y) * ((x - u.x) / (w.x - u.x))
        }
        _ => return false,
    };
    top - y > margin
}

/// The largest |t| of the rounds of a list that has `rounds` rounds left on `m` candidates.
fn largest_shift(variant: GemVariant, epsilon: f64, beta: f64, m: usize, rounds: usize) -> f64 {
    let last = m + 1 - rounds;
    shift(variant, epsilon, beta, m)
        .abs()
        .max(shift(variant, epsilon, beta, last).abs())
}

/// Peeling GEM (`variant`) at `epsilon` per round on the fast path: the lists of the
/// round-by-round peeling (`rnm` with the literal loop on each round's transformed scores), for
/// a seed the same lists.
pub(crate) fn gem_fast(
    variant: GemVariant,
    epsilon: f64,
    beta: f64,
    problem: &Problem<'_>,
    k: usize,
    rng: &mut Rng,
) -> Vec<usize> {
    let (q, d) = (problem.scores(), problem.sensitivities());
    let k = k.min(problem.len());
    let scale = 2.0 / epsilon;
    let mut remaining: Vec<usize> = (0..problem.len()).collect();
    let mut out = Vec::with_capacity(k);
    if k == 0 {
        return out;
    }
    let t_max = largest_shift(variant, epsilon, beta, remaining.len(), k);
    let mut f = HullFilter::new(q, d, &remaining, t_max);
    loop {
        let m = remaining.len();
        let t = shift(variant, epsilon, beta, m);
        let hull = upper_hull_chain(f.points.iter().map(|&b| coord(d[b], q[b] - t * d[b])));
        let score = |a: usize| {
            let b = remaining[a];
            tangent_value(&hull, d[b], q[b] - t * d[b])
        };
        // `argmax_random_ties` over `score(a) + scale·E_a`, each score computed only when its
        // noisy value can reach the maximum (scores are ≤ 0; module docs).
        let best_index = argmax_random_ties_seeing_best(m, rng, |a, rng, best| {
            let noise = scale * exp1(rng);
            if noise < best {
                noise
            } else {
                score(a) + noise
            }
        });
        let b = remaining.remove(best_index);
        out.push(b);
        if out.len() == k {
            return out;
        }
        f.remove(q, d, &remaining, b);
    }
}

/// A grid kept across the rounds of a secure list (module docs): the grid of the unit of the
/// candidates left, and their smallest and largest sensitivity, largest grid score and largest
/// grid sensitivity.
struct KeptGrid {
    grid: Grid,
    lo: f64,
    hi: f64,
    q_max: i64,
    d_max: u64,
    /// Whether a removed candidate attained an extreme (they are found again).
    stale: bool,
}

impl KeptGrid {
    fn new(problem: &Problem<'_>) -> Self {
        let mut g = KeptGrid {
            grid: Grid::new(problem),
            lo: 0.0,
            hi: 0.0,
            q_max: 0,
            d_max: 0,
            stale: true,
        };
        g.refresh(problem, &(0..problem.len()).collect::<Vec<_>>());
        g
    }

    /// Finds the extremes of `remaining` again if stale, and rebuilds the grid if its unit
    /// changed; true when it did.
    fn refresh(&mut self, problem: &Problem<'_>, remaining: &[usize]) -> bool {
        if !self.stale {
            return false;
        }
        let d = problem.sensitivities();
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for &b in remaining {
            lo = lo.min(d[b]);
            hi = hi.max(d[b]);
        }
        let unit = Grid::unit_log2_of_range(lo, hi);
        let rebuilt = unit != self.grid.unit_log2;
        if rebuilt {
            self.grid = Grid::with_unit(problem, unit);
        }
        self.lo = lo;
        self.hi = hi;
        self.q_max = remaining.iter().map(|&b| self.grid.q[b]).max().unwrap_or(0);
        self.d_max = remaining.iter().map(|&b| self.grid.d[b]).max().unwrap_or(1);
        self.stale = false;
        rebuilt
    }

    /// Records that candidate `b` (sensitivity `sens`) left.
    fn remove(&mut self, b: usize, sens: f64) {
        self.stale |= sens == self.lo
            || sens == self.hi
            || self.grid.q[b] == self.q_max
            || self.grid.d[b] == self.d_max;
    }
}

/// Peeling the exponential mechanism at `epsilon` per round on the secure path: the lists of the
/// round-by-round peeling (rejection sampling on each round's grid), for a seeded generator the
/// same lists and the same generator state after them.
pub(crate) fn em_secure(
    epsilon: f64,
    problem: &Problem<'_>,
    k: usize,
    rng: &mut SecureRng,
) -> Result<Vec<usize>> {
    let e = u128::from(SecureEpsilon::new(epsilon)?.num);
    let k = k.min(problem.len());
    let mut remaining: Vec<usize> = (0..problem.len()).collect();
    let mut kept = KeptGrid::new(problem);
    let mut out = Vec::with_capacity(k);
    while out.len() < k {
        kept.refresh(problem, &remaining);
        let (q, q_max) = (&kept.grid.q, i128::from(kept.q_max));
        let den = ExpWeights::den(kept.d_max);
        let m = remaining.len() as u64;
        let a = loop {
            let a = rng.below(m) as usize;
            let num = e * (q_max - i128::from(q[remaining[a]])) as u128;
            if bernoulli_exp_neg(rng, num, den) {
                break a;
            }
        };
        let b = remaining.remove(a);
        kept.remove(b, problem.sensitivities()[b]);
        out.push(b);
    }
    Ok(out)
}

/// The candidates `remaining` by ascending sensitivity: `problem`'s order when it has one.
fn by_sensitivity(problem: &Problem<'_>) -> Vec<usize> {
    match problem.sens_order() {
        Some(order) => order.iter().map(|&b| b as usize).collect(),
        None => {
            let d = problem.sensitivities();
            let mut v: Vec<usize> = (0..problem.len()).collect();
            v.sort_unstable_by_key(|&b| d[b].to_bits());
            v
        }
    }
}

/// The vertices of the upper hull of the unshifted integer points `(D_b, 2^8·Q_b)` of the
/// candidates `by_d` (ascending D), by Andrew's monotone chain with the rules of the round's
/// hull: the same vertices as the round's hull of the shifted points, every coordinate below
/// [`SMALL`].
fn exact_hull_vertices(grid: &Grid, by_d: &[usize]) -> Vec<usize> {
    let pt = |b: usize| (i128::from(grid.d[b]), i128::from(grid.q[b]) << SHIFT_BITS);
    let mut hull: Vec<usize> = Vec::with_capacity(64);
    for &b in by_d {
        let p = pt(b);
        if let Some(&last) = hull.last() {
            let l = pt(last);
            if l.0 == p.0 {
                if p.1 <= l.1 {
                    continue;
                }
                hull.pop();
            }
        }
        while hull.len() >= 2
            && orient_small(pt(hull[hull.len() - 2]), pt(hull[hull.len() - 1]), p) >= 0
        {
            hull.pop();
        }
        hull.push(b);
    }
    hull
}

/// The largest `|Q_b|` and `D_b` of a grid.
fn grid_bounds(grid: &Grid) -> (u64, u64) {
    let q_abs = grid.q.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
    (q_abs, grid.d.iter().copied().max().unwrap_or(0))
}

/// Whether every point `(±D_b, 2^8·Q_b − T·D_b)` of a grid with the bounds `(q_abs, d_max)`
/// ([`grid_bounds`]), and every unshifted one, has coordinates below [`SMALL`] for the shift
/// `t_num`: the condition of the round's lazy sampler, for every candidate.
fn small_at((q_abs, d_max): (u64, u64), t_num: i64) -> bool {
    let bound = (u128::from(q_abs) << SHIFT_BITS)
        .checked_add(u128::from(t_num.unsigned_abs()) * u128::from(d_max));
    bound.is_some_and(|b| b < SMALL as u128) && u128::from(d_max) < SMALL as u128
}

/// Peeling GEM (`variant`) at `epsilon` per round on the secure path: the lists of the
/// round-by-round peeling (permute-and-flip with exact acceptances on each round's transformed
/// grid scores), for a seeded generator the same lists and the same generator state after them.
pub(crate) fn gem_secure(
    variant: GemVariant,
    epsilon: f64,
    beta: f64,
    problem: &Problem<'_>,
    k: usize,
    rng: &mut SecureRng,
) -> Result<Vec<usize>> {
    let eps = SecureEpsilon::new(epsilon)?;
    let e = u128::from(eps.num);
    let den = ExpWeights::den(1 << TRANSFORM_BITS);
    let k = k.min(problem.len());
    let mut remaining: Vec<usize> = (0..problem.len()).collect();
    let mut by_d = by_sensitivity(problem);
    let mut kept = KeptGrid::new(problem);
    let mut bounds = grid_bounds(&kept.grid);
    let mut vertices: Option<Vec<usize>> = None;
    let mut out = Vec::with_capacity(k);
    while out.len() < k {
        if kept.refresh(problem, &remaining) {
            vertices = None;
            bounds = grid_bounds(&kept.grid);
        }
        let m = remaining.len();
        let t = shift(variant, epsilon, beta, m);
        let t_scaled = (t * f64::from(1u32 << SHIFT_BITS)).round();
        let g = &kept.grid;
        let fits = t_scaled.abs() <= 2f64.powi(62) && small_at(bounds, t_scaled as i64);
        let a = if fits {
            let t_num = i128::from(t_scaled as i64);
            let shifted =
                |b: usize| (i128::from(g.q[b]) << SHIFT_BITS) - t_num * i128::from(g.d[b]);
            let hull: Vec<(i128, i128)> = vertices
                .get_or_insert_with(|| exact_hull_vertices(g, &by_d))
                .iter()
                .map(|&b| (i128::from(g.d[b]), shifted(b)))
                .collect();
            permute_and_flip(m, rng, |a, rng| {
                let b = remaining[a];
                let x = exact_query_at::<true>(shifted(b), g.d[b], &hull)
                    .expect("below 2^61 no orientation product or ratio overflows");
                bernoulli_exp_neg(rng, e * (-i128::from(x)) as u128, den)
            })
        } else {
            // Coordinates too large for the lazy sampler's 64-bit products: the round as it is.
            let sub = SubProblem::new(problem, &remaining);
            gem::prepare_gem_secure(variant, epsilon, eps, beta, &sub.problem())?.sample(rng)
        };
        let b = remaining.remove(a);
        by_d.retain(|&p| p != b);
        kept.remove(b, problem.sensitivities()[b]);
        if vertices.as_ref().is_some_and(|v| v.contains(&b)) {
            vertices = None;
        }
        out.push(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanisms::{ExponentialMechanism, Gem, Mechanism};
    use crate::rng::Streams;

    /// Problems of every shape the samplers distinguish: random scores, scores concave in the
    /// sensitivity (many hull vertices, which rounds remove), points collinear up to a few ulps
    /// (the filter's margin), tied sensitivities, sensitivities across many binary orders (the
    /// grid's unit changes as candidates leave), one candidate and a few.
    fn problems() -> Vec<(Vec<f64>, Vec<f64>)> {
        let mut x = 0x005e_ed0f_9ee1_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut out = Vec::new();
        for (case, n) in [1usize, 2, 5, 40, 400, 1500].into_iter().enumerate() {
            for shape in 0..5 {
                let d: Vec<f64> = (0..n)
                    .map(|_| match shape {
                        3 => 0.25 + (next() * 4.0).floor() / 4.0,
                        4 => 2f64.powi((next() * 50.0) as i32 - 25),
                        _ => 0.1 + 3.0 * next(),
                    })
                    .collect();
                let q = d
                    .iter()
                    .map(|&di| match shape {
                        0 | 4 => 5.0 * next() - 2.0,
                        1 => 8.0 * di * (3.2 - di) + 1e-3 * next(),
                        2 => 3.0 * di + 1e-15 * (next() - 0.5) * (case as f64 + 1.0),
                        _ => 2.0 * next() - di,
                    })
                    .collect();
                out.push((q, d));
            }
        }
        out
    }

    fn sens_order(d: &[f64]) -> Vec<u32> {
        let mut o: Vec<u32> = (0..d.len() as u32).collect();
        o.sort_by(|&a, &b| d[a as usize].total_cmp(&d[b as usize]).then(b.cmp(&a)));
        o
    }

    /// Every list equals the round-by-round peeling's for the same draws — GEM and mGEM on both
    /// paths, `em` on the secure path; with and without a sensitivity order; k below, at and
    /// above the number of candidates — and the secure generator is left in the same state.
    /// Power: the same comparison against the rounds at another ε differs.
    #[test]
    fn incremental_peeling_draws_the_round_by_round_lists() {
        let (mut lists, mut differs) = (0, 0);
        for (i, (q, d)) in problems().iter().enumerate() {
            let order = sens_order(d);
            let plain = Problem::new(q, d).unwrap();
            for problem in [plain, plain.with_sens_order(&order)] {
                for (eps, k) in [(1.0, 10), (0.05, 3), (40.0, 7), (2.0, 60)] {
                    for variant in [GemVariant::Gem, GemVariant::Modified] {
                        let gem = Gem::new(variant, eps / k as f64, 0.05).unwrap();
                        let other = Gem::new(variant, 1.7 * eps / k as f64, 0.05).unwrap();
                        for seed in 0..3u64 {
                            let stream = || Streams::new(seed).stream(i as u32, 0, 0, 0);
                            let want = gem.select_list(&problem, k, &mut stream());
                            let got =
                                gem_fast(variant, eps / k as f64, 0.05, &problem, k, &mut stream());
                            assert_eq!(got, want, "fast {variant:?} problem {i} eps {eps} k {k}");
                            differs +=
                                usize::from(other.select_list(&problem, k, &mut stream()) != want);
                            let (mut r1, mut r2) = (
                                SecureRng::from_seed_insecure(seed),
                                SecureRng::from_seed_insecure(seed),
                            );
                            let want = gem.select_list_secure(&problem, k, &mut r1).unwrap();
                            let got =
                                gem_secure(variant, eps / k as f64, 0.05, &problem, k, &mut r2)
                                    .unwrap();
                            assert_eq!(got, want, "secure {variant:?} problem {i} eps {eps} k {k}");
                            assert_eq!(r1.next_u64(), r2.next_u64());
                            lists += 2;
                        }
                    }
                    let em = ExponentialMechanism::new(eps / k as f64).unwrap();
                    for seed in 0..3u64 {
                        let (mut r1, mut r2) = (
                            SecureRng::from_seed_insecure(seed),
                            SecureRng::from_seed_insecure(seed),
                        );
                        let want = em.select_list_secure(&problem, k, &mut r1).unwrap();
                        let got = em_secure(eps / k as f64, &problem, k, &mut r2).unwrap();
                        assert_eq!(got, want, "secure em problem {i} eps {eps} k {k}");
                        assert_eq!(r1.next_u64(), r2.next_u64());
                        lists += 1;
                    }
                }
            }
        }
        assert!(lists > 2000 && differs > 150, "{lists} {differs}");
    }

    /// The filter updated candidate by candidate — chord ends mostly, then any — has the chords
    /// and kept points of a filter built afresh on the candidates left (with the same margin).
    #[test]
    fn filter_updates_equal_a_fresh_filter() {
        let mut ends_removed = 0;
        for (i, (q, d)) in problems().iter().enumerate() {
            let n = q.len();
            let mut remaining: Vec<usize> = (0..n).collect();
            let mut f = HullFilter::new(q, d, &remaining, 30.0);
            let mut x = i as u64 + 7;
            while remaining.len() > 1 && remaining.len() + 60 > n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let end = f.chords[(x >> 33) as usize % f.chords.len()];
                let pos = if x % 3 != 0 {
                    remaining
                        .iter()
                        .position(|&b| d[b] == end.x && q[b] == end.y)
                        .unwrap()
                } else {
                    (x >> 20) as usize % remaining.len()
                };
                let b = remaining.remove(pos);
                ends_removed += usize::from(f.chords.iter().any(|v| v.x == d[b] && v.y == q[b]));
                f.remove(q, d, &remaining, b);
                let fresh = HullFilter::new(q, d, &remaining, 30.0);
                let mut want: Vec<usize> = remaining
                    .iter()
                    .copied()
                    .filter(|&p| !below_chord(&fresh.chords, d[p], q[p], f.margin))
                    .collect();
                let mut got = f.points.clone();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(
                    f.chords,
                    fresh.chords,
                    "problem {i} left {}",
                    remaining.len()
                );
                assert_eq!(got, want, "problem {i} left {}", remaining.len());
            }
        }
        assert!(ends_removed > 200, "{ends_removed}");
    }

    /// A point below a chord by more than the margin is certified, one within it is kept, and a
    /// margin that is not finite certifies nothing.
    #[test]
    fn chords_certify_only_beyond_the_margin() {
        let chords = [coord(1.0, 1.0), coord(3.0, 3.0)];
        assert!(below_chord(&chords, 2.0, 1.5, 0.25));
        assert!(!below_chord(&chords, 2.0, 1.9, 0.25));
        assert!(below_chord(&chords, 1.0, 0.5, 0.25));
        assert!(!below_chord(&chords, 2.0, -9.0, f64::INFINITY));
        assert!(!below_chord(&chords, 2.0, -9.0, f64::NAN));
    }
}
