//! Generalised exponential mechanism and its modification (docs/mechanisms.md, `gem` and `mgem`).
//!
//! GEM (Raskhodnikova & Smith 2015): with `t = 2 ln(k/β)/ε`, shift every score by its sensitivity,
//! `s_a = q_a − tΔ_a`, normalise pairwise,
//!
//! ```text
//! q'_a = min_{a'} (s_a − s_{a'}) / (Δ_a + Δ_{a'})      (so q'_a ≤ 0 and max_a q'_a = 0),
//! ```
//!
//! and run `rnm` on q' with sensitivity 1. mGEM (seed 001 §IV-D) is the same with `t = −2 ln(k/β)/ε`:
//! it favours candidates with *large* sensitivity instead of small. Both are ε-DP.
//!
//! # Exact O(k log k) transformed scores
//! `−q'_a = max_{a'} (s_{a'} − s_a) / (Δ_{a'} − (−Δ_a))` is the steepest slope from the point
//! `P_a = (−Δ_a, s_a)` to the point set `{Q_b = (Δ_b, s_b)}`. Every `P_a` lies strictly left of
//! every `Q_b` (Δ > 0), so the steepest slope is attained at a vertex of the upper convex hull of the
//! Q's, and along that hull the slope from `P_a` rises and then falls: a binary search on the sign of
//! `orient(P_a, v_i, v_{i+1})` finds the tangent vertex. Hull construction and tangent search use
//! Shewchuk's exact orientation predicate, so the chosen vertex is the exact maximiser for the given
//! floating-point points; the value is then computed with the same expression as the O(k²) oracle
//! [`transformed_scores_naive`], and the two agree to a few ulps. Cost: O(k log k) to prepare;
//! then O(k) per selection, or, after [`Mechanism::prepare_many`], `rnm`'s thinning sampler on q'.
//!
//! # Secure path (`docs/secure.md`)
//! On the grid (integer scores `Q_a`, integer sensitivities `D_a`) with the public shift rounded
//! to `T = round(t·2^8)` (any public t keeps the guarantee), `S_a = 2^8·Q_a − T·D_a` are integers
//! and the same hull and tangent search run on the integer points `(D_b, S_b)` with exact 128-bit
//! orientation tests ([`transformed_scores_exact`]). The transformed score `q'_a = min_b (S_a −
//! S_b)/(2^8(D_a + D_b))` is an exact rational with sensitivity 1; it is rounded down onto the
//! 2^−20 grid, `Q''_a = ⌊2^20·q'_a⌋`, whose sensitivity is exactly 2^20 units — 1 is a multiple of
//! the grid step, so this rounding costs nothing. Then permute-and-flip with exact acceptances
//! (the law of `rnm`) with sensitivity 2^20 units and ε'.

use robust::{orient2d, Coord};

use crate::error::{Error, Result};
use crate::mechanisms::rnm::ExpNoisyMax;
use crate::mechanisms::secure::{permute_and_flip, ExpWeights, SecurePermuteFlip, SecurePrepared};
use crate::mechanisms::{
    check_epsilon, check_open_unit, Bound, Grid, Mechanism, ParamSpec, Prepared, Problem,
    SecureEpsilon,
};
use crate::numerics::exact::bernoulli_exp_neg;
use crate::rng::SecureRng;

/// Failure probability β of `gem`, `mgem` and `cgem`: the threshold is t = ±2 ln(k/β)/ε.
pub const BETA: ParamSpec = ParamSpec::real_in(
    "beta",
    "Failure probability of GEM: threshold t = 2 ln(k/beta)/eps",
    0.05,
    Bound::Open(0.0),
    Bound::Open(1.0),
);

/// Which shift: GEM (`t > 0`) or modified GEM (`t < 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemVariant {
    /// `t = 2 ln(k/β)/ε`.
    Gem,
    /// `t = −2 ln(k/β)/ε`.
    Modified,
}

/// GEM or mGEM with validated ε and β.
#[derive(Debug, Clone)]
pub struct Gem {
    variant: GemVariant,
    epsilon: f64,
    beta: f64,
}

impl Gem {
    /// Validates ε (finite, > 0) and β (in (0, 1)).
    pub fn new(variant: GemVariant, epsilon: f64, beta: f64) -> Result<Self> {
        Ok(Gem {
            variant,
            epsilon: check_epsilon(epsilon)?,
            beta: check_open_unit("beta", beta)?,
        })
    }

    /// The shift t for k candidates.
    pub fn shift(&self, k: usize) -> f64 {
        shift(self.variant, self.epsilon, self.beta, k)
    }
}

/// The shift `±2 ln(k/β)/ε`.
pub fn shift(variant: GemVariant, epsilon: f64, beta: f64, k: usize) -> f64 {
    let t = 2.0 * (k as f64 / beta).ln() / epsilon;
    match variant {
        GemVariant::Gem => t,
        GemVariant::Modified => -t,
    }
}

/// The transformed scores q' by the O(k²) definition. The test oracle of [`transformed_scores`].
pub fn transformed_scores_naive(scores: &[f64], sens: &[f64], t: f64) -> Vec<f64> {
    let s: Vec<f64> = scores.iter().zip(sens).map(|(q, d)| q - t * d).collect();
    (0..s.len())
        .map(|a| {
            (0..s.len())
                .map(|b| (s[a] - s[b]) / (sens[a] + sens[b]))
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

pub(crate) fn coord(x: f64, y: f64) -> Coord<f64> {
    Coord { x, y }
}

/// Sign of the orientation of (a, b, c): > 0 counter-clockwise, < 0 clockwise, 0 collinear —
/// exact. The plain floating-point determinant decides whenever it exceeds Shewchuk's error bound
/// (almost always); otherwise the adaptive exact predicate does.
#[inline(always)]
fn orient(a: Coord<f64>, b: Coord<f64>, c: Coord<f64>) -> f64 {
    const ERRBOUND: f64 = (3.0 + 16.0 * f64::EPSILON / 2.0) * f64::EPSILON / 2.0;
    let left = (a.x - c.x) * (b.y - c.y);
    let right = (a.y - c.y) * (b.x - c.x);
    let det = left - right;
    if det.abs() > ERRBOUND * (left.abs() + right.abs()) {
        det
    } else {
        orient2d(a, b, c)
    }
}

/// The transformed scores q' in O(k log k) (module docs). Sensitivities must be finite and > 0.
pub fn transformed_scores(scores: &[f64], sens: &[f64], t: f64) -> Vec<f64> {
    transformed_scores_ordered(scores, sens, t, None)
}

/// [`transformed_scores`], with the candidates' order by ascending sensitivity when known
/// (`Problem::sens_order`): the hull is then built in one pass, without a sort. The same hull,
/// hence the same values.
pub(crate) fn transformed_scores_ordered(
    scores: &[f64],
    sens: &[f64],
    t: f64,
    order: Option<&[u32]>,
) -> Vec<f64> {
    let s: Vec<f64> = scores.iter().zip(sens).map(|(q, d)| q - t * d).collect();
    let hull = match order {
        Some(order) => upper_hull_chain(
            order
                .iter()
                .map(|&b| coord(sens[b as usize], s[b as usize])),
        ),
        None => upper_hull(sens, &s),
    };
    (0..s.len())
        .map(|a| tangent_value(&hull, sens[a], s[a]))
        .collect()
}

/// The transformed score `q'_a` of the candidate with sensitivity `sens_a` and shifted score
/// `s_a`, from the upper hull of every candidate's point `(Δ_b, s_b)`: the slope from `(−Δ_a,
/// s_a)` to its tangent vertex, at most 0.
#[inline]
pub(crate) fn tangent_value(hull: &[Coord<f64>], sens_a: f64, s_a: f64) -> f64 {
    let p = coord(-sens_a, s_a);
    // First edge (v_i, v_{i+1}) along which the slope from P stops rising: a linear scan on
    // small hulls (one mispredicted branch), a binary search on large ones.
    let lo = if hull.len() <= 16 {
        let mut i = 0;
        while i + 1 < hull.len() && orient(p, hull[i], hull[i + 1]) > 0.0 {
            i += 1;
        }
        i
    } else {
        let (mut lo, mut hi) = (0usize, hull.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if orient(p, hull[mid], hull[mid + 1]) > 0.0 {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let v = hull[lo];
    ((s_a - v.y) / (sens_a + v.x)).min(0.0)
}

/// Upper convex hull of the points `(x_b, y_b)` (x > 0), left to right (Andrew's monotone chain).
/// Collinear middle points are dropped: along a segment the slope from a point to the left is
/// monotone, so the maximum is at an end.
pub(crate) fn upper_hull(x: &[f64], y: &[f64]) -> Vec<Coord<f64>> {
    // Akl–Toussaint filter: the leftmost (highest among those), topmost and rightmost points are
    // hull vertices, and a point strictly below the chain through them is not; on typical inputs
    // this leaves a small fraction of the points to sort.
    let (mut l, mut t, mut r) = (0, 0, 0);
    for i in 1..x.len() {
        if x[i] < x[l] || (x[i] == x[l] && y[i] > y[l]) {
            l = i;
        }
        if y[i] > y[t] || (y[i] == y[t] && x[i] < x[t]) {
            t = i;
        }
        if x[i] > x[r] || (x[i] == x[r] && y[i] > y[r]) {
            r = i;
        }
    }
    let (pl, pt, pr) = (coord(x[l], y[l]), coord(x[t], y[t]), coord(x[r], y[r]));
    let mut pts: Vec<Coord<f64>> = x
        .iter()
        .zip(y)
        .map(|(&x, &y)| coord(x, y))
        .filter(|&p| {
            if p.x <= pt.x {
                orient(pl, pt, p) >= 0.0
            } else {
                orient(pt, pr, p) >= 0.0
            }
        })
        .collect();
    // Positive finite floats order like their bit patterns: an integer-key sort is the fastest.
    pts.sort_unstable_by_key(|p| p.x.to_bits());
    upper_hull_chain(pts.into_iter())
}

/// The upper hull of points given in ascending x (Andrew's monotone chain; equal abscissae in
/// any order).
pub(crate) fn upper_hull_chain(pts: impl Iterator<Item = Coord<f64>>) -> Vec<Coord<f64>> {
    let mut hull: Vec<Coord<f64>> = Vec::with_capacity(64);
    for p in pts {
        if let Some(last) = hull.last() {
            if last.x == p.x {
                // Same abscissa: only the higher point can be a vertex.
                if p.y <= last.y {
                    continue;
                }
                hull.pop();
            }
        }
        // Pop the middle point unless the chain turns strictly right (clockwise) at it.
        while hull.len() >= 2 && orient(hull[hull.len() - 2], hull[hull.len() - 1], p) >= 0.0 {
            hull.pop();
        }
        hull.push(p);
    }
    hull
}

/// The public shift on the 2^−8 grid of the secure path.
pub const SHIFT_BITS: u32 = 8;
/// The secure transformed scores are multiples of 2^−20 (sensitivity 2^20 units).
pub const TRANSFORM_BITS: u32 = 20;
/// Secure transformed scores are clamped below at −2^60 units (acceptance probability below
/// e^−128 at every ε' on the grid; clamping never increases a difference).
const TRANSFORM_FLOOR: i128 = -(1i128 << 60);

pub(crate) fn overflow() -> Error {
    Error::Invalid(
        "secure GEM: scores, sensitivities and the shift span too many binary orders of magnitude \
         for exact 128-bit arithmetic"
            .into(),
    )
}

/// Exact integer orientation sign of (a, b, c): > 0 counter-clockwise. `None` on overflow.
fn orient_exact(a: (i128, i128), b: (i128, i128), c: (i128, i128)) -> Option<i32> {
    let l = (b.0 - a.0).checked_mul(c.1.checked_sub(a.1)?)?;
    let r = (b.1.checked_sub(a.1)?).checked_mul(c.0 - a.0)?;
    Some(l.cmp(&r) as i32)
}

/// The integer points `S_a = 2^8·Q_a − T·D_a` of the secure transform.
fn shifted_exact(q: &[i64], d: &[u64], t_num: i64) -> Result<Vec<i128>> {
    q.iter()
        .zip(d)
        .map(|(&q, &d)| match i64::try_from(d) {
            // |T·D| < 2^126 and |2^8·Q| < 2^71: neither the product nor the difference overflows.
            Ok(d) => Ok((i128::from(q) << SHIFT_BITS) - i128::from(t_num) * i128::from(d)),
            Err(_) => i128::from(t_num)
                .checked_mul(i128::from(d))
                .and_then(|td| (i128::from(q) << SHIFT_BITS).checked_sub(td))
                .ok_or_else(overflow),
        })
        .collect()
}

/// `⌊2^20 (S_a − S_b) / (2^8 (D_a + D_b))⌋`, clamped below at −2^60.
fn rounded_ratio(sa: i128, sb: i128, da: u64, db: u64) -> Result<i128> {
    let diff = sa - sb;
    let den = i128::from(da) + i128::from(db);
    // Small operands (the usual case): the same floor in 64-bit arithmetic.
    if let (Ok(diff), Ok(den)) = (i64::try_from(diff), i64::try_from(den)) {
        if diff.unsigned_abs() < 1 << 50 {
            let num = diff << (TRANSFORM_BITS - SHIFT_BITS);
            return Ok(i128::from(num.div_euclid(den)).max(TRANSFORM_FLOOR));
        }
    }
    let num = diff
        .checked_mul(1i128 << (TRANSFORM_BITS - SHIFT_BITS))
        .ok_or_else(overflow)?;
    Ok(num.div_euclid(den).max(TRANSFORM_FLOOR))
}

/// Points whose coordinates are below 2^61 in magnitude: every difference of two coordinates
/// fits in an `i64` and every orientation product in an `i128`, so [`orient_small`] is exact.
pub(crate) const SMALL: i128 = 1 << 61;

/// [`orient_exact`] for points whose coordinates are below [`SMALL`] in magnitude: the same sign,
/// from two 64×64-bit products that cannot overflow.
#[inline(always)]
pub(crate) fn orient_small(a: (i128, i128), b: (i128, i128), c: (i128, i128)) -> i32 {
    let wide = |x: i128| i128::from(x as i64);
    let l = wide(b.0 - a.0) * wide(c.1 - a.1);
    let r = wide(b.1 - a.1) * wide(c.0 - a.0);
    l.cmp(&r) as i32
}

/// The secure transformed scores `Q''_a = ⌊2^20 q'_a⌋ ≤ 0` by the O(k²) definition, in exact
/// integer arithmetic: the test oracle of [`transformed_scores_exact`]. `t_num` = round(t·2^8).
pub fn transformed_scores_exact_naive(q: &[i64], d: &[u64], t_num: i64) -> Result<Vec<i64>> {
    let s = shifted_exact(q, d, t_num)?;
    (0..s.len())
        .map(|a| {
            let mut m = i128::MAX;
            for b in 0..s.len() {
                m = m.min(rounded_ratio(s[a], s[b], d[a], d[b])?);
            }
            Ok(m.min(0) as i64)
        })
        .collect()
}

/// The secure transformed scores in O(k log k): the upper hull of the integer points
/// `(D_b, S_b)` and a binary tangent search from `(−D_a, S_a)`, every orientation test exact in
/// 128-bit integers (an error, never a wrong answer, if a product would overflow). Equals
/// [`transformed_scores_exact_naive`].
pub fn transformed_scores_exact(q: &[i64], d: &[u64], t_num: i64) -> Result<Vec<i64>> {
    transformed_scores_exact_ordered(q, d, t_num, None)
}

/// [`transformed_scores_exact`], with the candidates' order by ascending sensitivity when known
/// (the grid's `D_a = ⌈Δ_a/u⌉` keeps that order): no sort. The same hull, hence the same values.
pub(crate) fn transformed_scores_exact_ordered(
    q: &[i64],
    d: &[u64],
    t_num: i64,
    order: Option<&[u32]>,
) -> Result<Vec<i64>> {
    let s = shifted_exact(q, d, t_num)?;
    if all_small(&s, d) {
        exact_transform::<true>(&s, d, order)
    } else {
        exact_transform::<false>(&s, d, order)
    }
}

/// The hull and tangent search of [`transformed_scores_exact_ordered`] on the points `S`; with
/// `SMALL_PTS` every coordinate is below [`SMALL`] in magnitude and the orientations are computed
/// by [`orient_small`] (the same signs as [`orient_exact`], which never overflows there).
fn exact_transform<const SMALL_PTS: bool>(
    s: &[i128],
    d: &[u64],
    order: Option<&[u32]>,
) -> Result<Vec<i64>> {
    let hull = exact_hull::<SMALL_PTS>(s, d, order)?;
    (0..s.len())
        .map(|a| exact_query::<SMALL_PTS>(s, d, &hull, a))
        .collect()
}

/// Whether every coordinate of the points `(D_b, S_b)` and `(−D_a, S_a)` is below [`SMALL`].
fn all_small(s: &[i128], d: &[u64]) -> bool {
    s.iter().all(|v| v.unsigned_abs() < SMALL as u128) && d.iter().all(|&v| v < 1 << 61)
}

#[inline(always)]
fn orient_pts<const SMALL_PTS: bool>(
    a: (i128, i128),
    b: (i128, i128),
    c: (i128, i128),
) -> Result<i32> {
    if SMALL_PTS {
        Ok(orient_small(a, b, c))
    } else {
        orient_exact(a, b, c).ok_or_else(overflow)
    }
}

/// The upper hull of the integer points `(D_b, S_b)`, left to right (Andrew's monotone chain; the
/// points in `order` when it sorts them by ascending `D`, else sorted here).
fn exact_hull<const SMALL_PTS: bool>(
    s: &[i128],
    d: &[u64],
    order: Option<&[u32]>,
) -> Result<Vec<(i128, i128)>> {
    let orient = orient_pts::<SMALL_PTS>;
    let point = |b: usize| (i128::from(d[b]), s[b]);
    let mut hull: Vec<(i128, i128)> = Vec::with_capacity(64);
    let mut push = |p: (i128, i128)| -> Result<()> {
        if let Some(&last) = hull.last() {
            if last.0 == p.0 {
                // Same abscissa: only the higher point can be a vertex.
                if p.1 <= last.1 {
                    return Ok(());
                }
                hull.pop();
            }
        }
        while hull.len() >= 2 {
            if orient(hull[hull.len() - 2], hull[hull.len() - 1], p)? >= 0 {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
        Ok(())
    };
    match order {
        Some(order) => order.iter().try_for_each(|&b| push(point(b as usize)))?,
        None => {
            let mut pts: Vec<(i128, i128)> = (0..d.len()).map(point).collect();
            pts.sort_unstable();
            pts.into_iter().try_for_each(&mut push)?;
        }
    }
    Ok(hull)
}

/// `Q''_a`: the rounded slope from `(−D_a, S_a)` to its tangent vertex of `hull`.
#[inline]
fn exact_query<const SMALL_PTS: bool>(
    s: &[i128],
    d: &[u64],
    hull: &[(i128, i128)],
    a: usize,
) -> Result<i64> {
    exact_query_at::<SMALL_PTS>(s[a], d[a], hull)
}

/// `Q''` of the point `(D, S)` = (`da`, `sa`): the rounded slope from `(−D, S)` to its tangent
/// vertex of `hull`.
#[inline]
pub(crate) fn exact_query_at<const SMALL_PTS: bool>(
    sa: i128,
    da: u64,
    hull: &[(i128, i128)],
) -> Result<i64> {
    let orient = orient_pts::<SMALL_PTS>;
    let p = (-i128::from(da), sa);
    // The first edge (v_i, v_{i+1}) along which the slope from P stops rising: the slopes rise
    // then fall along the hull, so a linear scan (one mispredicted branch) on small hulls and a
    // binary search on large ones find the same vertex.
    let lo = if SMALL_PTS && hull.len() <= 16 {
        let mut i = 0;
        while i + 1 < hull.len() && orient(p, hull[i], hull[i + 1])? > 0 {
            i += 1;
        }
        i
    } else {
        let (mut lo, mut hi) = (0usize, hull.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if orient(p, hull[mid], hull[mid + 1])? > 0 {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let v = hull[lo];
    let m = rounded_ratio(sa, v.1, da, v.0 as u64)?;
    Ok(m.min(0) as i64)
}

/// GEM's secure selection: permute-and-flip with exact acceptances on the transformed scores.
pub(crate) enum SecureGem {
    /// Every transformed score computed up front.
    Eager(SecurePermuteFlip),
    /// Coordinates below [`SMALL`]: a candidate's transformed score is computed when
    /// permute-and-flip proposes it, and most never are.
    Lazy(LazyGem),
}

impl SecurePrepared for SecureGem {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        match self {
            SecureGem::Eager(p) => p.sample(rng),
            SecureGem::Lazy(p) => p.sample(rng),
        }
    }
}

/// [`SecurePermuteFlip`] on the transformed scores, each computed when first needed: the same
/// weights, the same draws, the same pick. The largest transformed score is exactly 0 (the
/// candidate of largest `S_a` has every ratio ≥ 0, and no score is above 0), so the weight of `a`
/// is `exp(−ε'·(0 − Q''_a)/2^21)` whatever the other scores are.
pub(crate) struct LazyGem {
    s: Vec<i128>,
    d: Vec<u64>,
    hull: Vec<(i128, i128)>,
    eps: u128,
    den: u128,
}

impl LazyGem {
    /// The sampler of the points `(D_b, S_b)`, every coordinate below [`SMALL`], and their hull.
    fn new(s: Vec<i128>, d: Vec<u64>, hull: Vec<(i128, i128)>, eps: SecureEpsilon) -> Self {
        debug_assert!(all_small(&s, &d));
        LazyGem {
            s,
            d,
            hull,
            eps: u128::from(eps.num),
            den: ExpWeights::den(1 << TRANSFORM_BITS),
        }
    }
}

impl SecurePrepared for LazyGem {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        permute_and_flip(self.s.len(), rng, |a, rng| {
            let x = exact_query::<true>(&self.s, &self.d, &self.hull, a)
                .expect("below 2^61 no orientation product or ratio overflows");
            bernoulli_exp_neg(rng, self.eps * (-i128::from(x)) as u128, self.den)
        })
    }
}

/// GEM's secure precomputation for `variant` at the grid ε `eps` (shared with `cgem`); `epsilon`
/// is the float ε that defines the public shift t.
pub(crate) fn prepare_gem_secure(
    variant: GemVariant,
    epsilon: f64,
    eps: SecureEpsilon,
    beta: f64,
    problem: &Problem<'_>,
) -> Result<SecureGem> {
    let grid = Grid::new(problem);
    let t = shift(variant, epsilon, beta, problem.len());
    let t_scaled = (t * f64::from(1u32 << SHIFT_BITS)).round();
    if t_scaled.abs() > 2f64.powi(62) {
        return Err(overflow());
    }
    let order = problem.sens_order();
    let s = shifted_exact(&grid.q, &grid.d, t_scaled as i64)?;
    if all_small(&s, &grid.d) {
        let hull = exact_hull::<true>(&s, &grid.d, order)?;
        return Ok(SecureGem::Lazy(LazyGem::new(s, grid.d, hull, eps)));
    }
    let transformed = exact_transform::<false>(&s, &grid.d, order)?;
    Ok(SecureGem::Eager(SecurePermuteFlip(ExpWeights::new(
        &transformed,
        1u64 << TRANSFORM_BITS,
        eps,
    ))))
}

/// GEM's selection: `rnm` with sensitivity 1 on the transformed scores.
pub(crate) type PreparedGem = ExpNoisyMax;

/// GEM's precomputation for `variant` at `epsilon` (shared with `cgem`).
pub(crate) fn prepare_gem(
    variant: GemVariant,
    epsilon: f64,
    beta: f64,
    problem: &Problem<'_>,
    many: bool,
) -> PreparedGem {
    let t = shift(variant, epsilon, beta, problem.len());
    let transformed = transformed_scores_ordered(
        problem.scores(),
        problem.sensitivities(),
        t,
        problem.sens_order(),
    );
    ExpNoisyMax::new(transformed, 2.0 / epsilon, many)
}

impl Mechanism for Gem {
    fn name(&self) -> &'static str {
        match self.variant {
            GemVariant::Gem => "gem",
            GemVariant::Modified => "mgem",
        }
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(prepare_gem(
            self.variant,
            self.epsilon,
            self.beta,
            problem,
            false,
        ))
    }

    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(prepare_gem(
            self.variant,
            self.epsilon,
            self.beta,
            problem,
            true,
        ))
    }

    fn secure_epsilon(&self) -> Result<f64> {
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let eps = SecureEpsilon::new(self.epsilon)?;
        Ok(Box::new(prepare_gem_secure(
            self.variant,
            self.epsilon,
            eps,
            self.beta,
            problem,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sensitivities_give_normalised_gaps() {
        let q = [0.3, -1.0, 2.0, 2.0];
        let d = [0.5; 4];
        for t in [-3.0, 0.0, 7.0] {
            let fast = transformed_scores(&q, &d, t);
            for (a, v) in fast.iter().enumerate() {
                assert!((v - (q[a] - 2.0) / 1.0).abs() < 1e-12, "t={t} a={a}: {v}");
            }
        }
    }

    /// The hull from a known sensitivity order gives the same values as the sorted one, float
    /// and exact, on problems with many tied sensitivities and near-collinear points.
    #[test]
    fn ordered_hull_equals_sorted() {
        let mut x = 88172645463325252u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1000) as f64 / 1000.0
        };
        for k in [1, 2, 7, 300] {
            let sens: Vec<f64> = (0..k).map(|_| 0.1 + (next() * 8.0).floor() / 8.0).collect();
            let scores: Vec<f64> = sens.iter().map(|d| 3.0 * d + 0.01 * next()).collect();
            let mut order: Vec<u32> = (0..k as u32).collect();
            order.sort_by(|&a, &b| {
                sens[a as usize]
                    .total_cmp(&sens[b as usize])
                    .then(b.cmp(&a))
            });
            for t in [-25.0, -3.0, 0.0, 2.0] {
                let want = transformed_scores(&scores, &sens, t);
                let got = transformed_scores_ordered(&scores, &sens, t, Some(&order));
                assert_eq!(want, got, "k {k} t {t}");
            }
            let q: Vec<i64> = scores.iter().map(|v| (v * 4096.0) as i64).collect();
            let d: Vec<u64> = sens.iter().map(|v| (v * 4096.0).ceil() as u64).collect();
            for t in [-6400, 0, 512] {
                let want = transformed_scores_exact(&q, &d, t).unwrap();
                let got = transformed_scores_exact_ordered(&q, &d, t, Some(&order)).unwrap();
                assert_eq!(want, got, "k {k} t {t}");
            }
        }
    }

    /// The exact transform equals the O(k²) oracle on small coordinates (64-bit orientation
    /// products and divisions, linear tangent scans), on coordinates beyond 2^61 (the checked
    /// 128-bit path) and across the 2^50 boundary of the 64-bit division, on hulls of a few and of
    /// many vertices.
    #[test]
    fn exact_transform_equals_the_naive_definition_at_every_magnitude() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut big, mut many_vertices) = (0, 0);
        for case in 0..240 {
            let k = [1, 3, 17, 60, 300][case % 5];
            let q_bits = [20, 40, 49, 52, 61][(case / 5) % 5];
            let d_bits = [1, 20, 40][(case / 25) % 3];
            let concave = case % 2 == 0;
            let d: Vec<u64> = (0..k).map(|_| 1 + next() % (1 << d_bits)).collect();
            let q: Vec<i64> = d
                .iter()
                .map(|&di| {
                    let noise = (next() % (1 << q_bits)) as i64 - (1 << (q_bits - 1));
                    if concave {
                        // Scores concave in the sensitivity: most points are hull vertices.
                        let u = di as f64 / (1u64 << d_bits) as f64;
                        ((u * (1.0 - u)) * 2f64.powi(q_bits)) as i64 + noise / 1024
                    } else {
                        noise
                    }
                })
                .collect();
            for t in [-6544, 0, 300] {
                let want = transformed_scores_exact_naive(&q, &d, t).unwrap();
                assert_eq!(
                    transformed_scores_exact(&q, &d, t).unwrap(),
                    want,
                    "case {case} t {t}"
                );
                let mut order: Vec<u32> = (0..k as u32).collect();
                order.sort_by_key(|&a| (d[a as usize], std::cmp::Reverse(a)));
                let got = transformed_scores_exact_ordered(&q, &d, t, Some(&order)).unwrap();
                assert_eq!(got, want, "case {case} t {t} ordered");
                let s = shifted_exact(&q, &d, t).unwrap();
                big += usize::from(s.iter().any(|v| v.unsigned_abs() >= SMALL as u128));
                many_vertices += usize::from(concave && k == 300 && d_bits > 1);
            }
        }
        assert!(
            big > 10 && many_vertices > 10,
            "both paths exercised: {big} {many_vertices}"
        );
    }

    /// The lazy sampler picks what permute-and-flip on every transformed score picks, from the
    /// same draws (the generator is left in the same state), on problems with few and many hull
    /// vertices; the same comparison at another ε differs (power).
    #[test]
    fn lazy_gem_samples_as_the_eager_weights() {
        let mut x = 0x0bad_5eed_1234_5678u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let eps = SecureEpsilon::new(1.0).unwrap();
        let other = SecureEpsilon::new(0.5).unwrap();
        let mut differs = 0;
        for case in 0..40 {
            let k = [1, 2, 30, 400][case % 4];
            let d: Vec<u64> = (0..k).map(|_| 1 + next() % (1 << 20)).collect();
            let q: Vec<i64> = d
                .iter()
                .map(|&di| {
                    let u = di as f64 / (1u64 << 20) as f64;
                    let bump = if case % 2 == 0 { u * (1.0 - u) } else { 0.0 };
                    ((bump * 2f64.powi(24)) as i64) + (next() % (1 << 22)) as i64
                })
                .collect();
            let t = -6544;
            let transformed = transformed_scores_exact(&q, &d, t).unwrap();
            let eager =
                |e| SecurePermuteFlip(ExpWeights::new(&transformed, 1 << TRANSFORM_BITS, e));
            let s = shifted_exact(&q, &d, t).unwrap();
            let hull = exact_hull::<true>(&s, &d, None).unwrap();
            let lazy = LazyGem::new(s, d.clone(), hull, eps);
            for seed in 0..200 {
                let mut r1 = SecureRng::from_seed_insecure(seed);
                let mut r2 = SecureRng::from_seed_insecure(seed);
                let mut r3 = SecureRng::from_seed_insecure(seed);
                let want = eager(eps).sample(&mut r1);
                assert_eq!(lazy.sample(&mut r2), want, "case {case} seed {seed}");
                assert_eq!(
                    r1.below(1 << 40),
                    r2.below(1 << 40),
                    "case {case} seed {seed}"
                );
                differs += usize::from(eager(other).sample(&mut r3) != want);
            }
        }
        assert!(differs > 100, "{differs}");
    }

    #[test]
    fn single_candidate() {
        assert_eq!(transformed_scores(&[5.0], &[2.0], 1.0), vec![0.0]);
    }
}
