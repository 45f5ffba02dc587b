//! The maximum of the K recorded values of random stopping, drawn without the K values
//! (docs/mechanisms.md, "Sampling the maximum directly").
//!
//! One recorded value is a uniform candidate a plus its noise: the mixture with survival
//! `S(v)/k`, `S(v) = Σ_a S_a((v − q_a)/s_a)`. Given the level t (the survival probability of one
//! recorded value at the maximum, drawn by the caller from the stopping law), the maximum V
//! solves `S(V) = k·t`, and the released candidate is the one whose noise density at V is drawn
//! in proportion. This module solves for V and returns the densities.
//!
//! Cost: a few passes over the candidates, each one exponential per candidate. The pass is
//! written so that it vectorises — a branch-free exponential, the sums in four fixed lanes —
//! and runs with AVX-512 or AVX2 when the processor has them (AVX-512 made `rs` about a quarter
//! faster than AVX2 on the Zen 4 machine of the benchmarks). The result is bit-for-bit the same
//! with either or neither: every operation is a correctly rounded IEEE operation in a fixed order
//! (no fused multiply-add), so a seed gives the same selections on every x86-64 machine.

/// The noise of one recorded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoiseShape {
    /// Two-sided Laplace: survival ½e^{−z} for z ≥ 0, 1 − ½e^{z} below; density ½e^{−|z|}/s.
    Laplace,
    /// One-sided exponential: survival e^{−z} for z ≥ 0, 1 below; density e^{−z}/s for z ≥ 0.
    Exponential,
}

impl NoiseShape {
    /// The standardised quantile c(p): `S_a(q_a + s_a·c(p)) = p` for every candidate, p in (0, 1].
    fn quantile(self, p: f64) -> f64 {
        match self {
            NoiseShape::Laplace if p <= 0.5 => -(2.0 * p).ln(),
            NoiseShape::Laplace => (2.0 * (1.0 - p)).ln(),
            NoiseShape::Exponential => -p.ln(),
        }
    }
}

/// Largest number of passes of [`solve`]. A third-order step converges in a handful; bisection
/// steps, the safeguard, can need about 60 on a wide bracket.
const MAX_PASSES: usize = 200;

/// A candidate whose standardised distance below the lowest possible maximum exceeds
/// `ln(k/(k·t)) + PRUNE_MARGIN` holds less than e^{−60} of the tail sum everywhere the maximum
/// can lie, and a density below e^{−60} times the largest: it is left out.
const PRUNE_MARGIN: f64 = 60.0;

/// Relative accuracy of the tail sum at the returned V: `|S(V) − k·t| ≤ TOLERANCE·k·t`.
const TOLERANCE: f64 = 1e-12;

/// Whether the tail sum `surv` is within [`TOLERANCE`] of `target` (= k·t).
fn settled(surv: f64, target: f64) -> bool {
    (surv - target).abs() <= TOLERANCE * target
}

/// e^y for y ≤ 0 (0 below −708), relative error below 3e-16: Cody–Waite reduction by ln 2, the
/// Taylor polynomial of degree 13 on |r| ≤ ln2/2, and the power of two assembled from bits.
/// Branch-free, so that the pass vectorises.
#[inline(always)]
fn exp_nonpositive(y: f64) -> f64 {
    // 1.5·2^52: adding it rounds to an integer held in the low bits of the sum.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // ln 2 split so that n·LN2_HI is exact for |n| < 2^11 (fdlibm's constants).
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    let yc = y.max(-708.0);
    let shifted = yc * std::f64::consts::LOG2_E + SHIFT;
    let n = shifted - SHIFT;
    let r = (yc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0;
    for c in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    let bits = (shifted.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let scale = f64::from_bits(((bits + 1023) << 52) as u64);
    if y < -708.0 {
        0.0
    } else {
        p * scale
    }
}

/// Sums of one pass at v: the tail sum S and the sums giving its first three derivatives.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    /// Σ S_a.
    surv: f64,
    /// Σ f_a (so S' = −Σ f_a).
    dens: f64,
    /// Σ sign(z_a)·f_a/s_a (S'' = Σ sign·f/s).
    dens1: f64,
    /// Σ f_a/s_a² (S''' = −Σ f/s²).
    dens2: f64,
}

/// Per-candidate results of one pass.
#[derive(Debug, Clone, Default)]
struct Buffers {
    surv: Vec<f64>,
    dens: Vec<f64>,
    d1: Vec<f64>,
    d2: Vec<f64>,
}

impl Buffers {
    #[cfg(test)]
    fn new(n: usize) -> Buffers {
        let mut b = Buffers::default();
        b.fit(n);
        b
    }

    /// Makes every buffer `n` long (a pass overwrites all `n` entries; nothing is cleared).
    fn fit(&mut self, n: usize) {
        for v in [&mut self.surv, &mut self.dens, &mut self.d1, &mut self.d2] {
            v.resize(n, 0.0);
        }
    }
}

/// The solver's scratch space, reused from solve to solve so that a selection allocates nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Work {
    buf: Buffers,
    active: Active,
}

/// Sums `cols` in four fixed lanes (lane l takes the elements ≡ l mod 4, the remainder goes to
/// lane 0), then the lanes pairwise: a fixed order, so every build gives the same bits.
#[inline(always)]
fn lane_sums<const N: usize>(cols: [&[f64]; N]) -> [f64; N] {
    let mut lanes = [[0.0f64; 4]; N];
    let len = cols[0].len();
    let n = len / 4 * 4;
    for (c, col) in cols.iter().enumerate() {
        for chunk in col[..n].chunks_exact(4) {
            for l in 0..4 {
                lanes[c][l] += chunk[l];
            }
        }
        for &x in &col[n..len] {
            lanes[c][0] += x;
        }
    }
    lanes.map(|l| (l[0] + l[1]) + (l[2] + l[3]))
}

/// One pass at v over the active candidates (scores `q`, inverse scales `inv`): writes every
/// survival, density, density·(±1/s) and density/s² into `buf`, then sums them.
#[inline(always)]
fn pass_body(shape: NoiseShape, v: f64, q: &[f64], inv: &[f64], buf: &mut Buffers) -> Sums {
    let laplace = shape == NoiseShape::Laplace;
    let (half, below) = if laplace { (0.5, 1.0) } else { (1.0, 0.0) };
    let Buffers { surv, dens, d1, d2 } = buf;
    for (((((s, d), x1), x2), &qa), &ia) in surv
        .iter_mut()
        .zip(dens.iter_mut())
        .zip(d1.iter_mut())
        .zip(d2.iter_mut())
        .zip(q)
        .zip(inv)
    {
        let z = (v - qa) * ia;
        let e = half * exp_nonpositive(-z.abs());
        let above = z >= 0.0;
        // Laplace below q_a: survival 1 − ½e^{z}, density ½e^{z}/s. Exponential: 1 and 0.
        *s = if above { e } else { 1.0 - below * e };
        let f = if above { e } else { below * e } * ia;
        *d = f;
        *x1 = if above { f * ia } else { -(f * ia) };
        *x2 = f * ia * ia;
    }
    let [surv, dens, dens1, dens2] = lane_sums([surv, dens, d1, d2]);
    Sums {
        surv,
        dens,
        dens1,
        dens2,
    }
}

crate::simd::widest! {
    /// [`pass_body`] with the widest vector instructions the processor has (same bits).
    fn pass(shape: NoiseShape, v: f64, q: &[f64], inv: &[f64], buf: &mut Buffers) -> Sums
        = pass_body, avx512: pass_avx512, avx2: pass_avx2
}

/// The maximum V and the noise densities there.
#[derive(Debug, Clone)]
pub(crate) struct Solution<'a> {
    /// The maximum V.
    pub v: f64,
    /// The candidates that may be released (the others' densities are below e^{−60} of the
    /// largest).
    pub active: &'a [u32],
    /// Their noise densities at V.
    pub dens: &'a [f64],
    /// Σ of `dens`.
    pub total: f64,
}

/// The candidates a solve runs over, compacted so that a pass reads contiguous memory.
#[derive(Debug, Clone, Default)]
struct Active {
    idx: Vec<u32>,
    q: Vec<f64>,
    inv: Vec<f64>,
    /// The scales s = 1/inv.
    s: Vec<f64>,
    /// The largest of `inv`.
    inv_max: f64,
}

impl Active {
    /// Candidates within `cut` standardised units above `lo` (the others are pruned).
    fn new(q: &[f64], inv: &[f64], lo: f64, cut: f64) -> Active {
        let mut act = Active::default();
        act.refill(q, inv, lo, cut);
        act
    }

    /// [`Active::new`] into the existing storage.
    fn refill(&mut self, q: &[f64], inv: &[f64], lo: f64, cut: f64) {
        let act = self;
        for v in [&mut act.q, &mut act.inv, &mut act.s] {
            v.clear();
            v.reserve(q.len());
        }
        act.idx.clear();
        act.idx.reserve(q.len());
        act.inv_max = 0.0;
        if q.iter().zip(inv).all(|(&qa, &ia)| (lo - qa) * ia <= cut) {
            // Nothing is pruned (the usual case): whole copies, which vectorise.
            act.idx.extend(0..q.len() as u32);
            act.q.extend_from_slice(q);
            act.inv.extend_from_slice(inv);
            act.s.extend(inv.iter().map(|&ia| 1.0 / ia));
            act.inv_max = inv.iter().fold(0.0, |m: f64, &ia| m.max(ia));
            return;
        }
        for (a, (&qa, &ia)) in q.iter().zip(inv).enumerate() {
            if (lo - qa) * ia <= cut {
                act.idx.push(a as u32);
                act.q.push(qa);
                act.inv.push(ia);
                act.s.push(1.0 / ia);
                act.inv_max = act.inv_max.max(ia);
            }
        }
    }
}

/// The bracket `[lo, hi]` of V at level t: every S_a ≤ t at hi; at lo every S_a ≥ t or
/// (k·t < 1) one S_a ≥ k·t.
fn bracket(shape: NoiseShape, q: &[f64], s: &[f64], t: f64) -> (f64, f64) {
    let target = q.len() as f64 * t;
    let ct = shape.quantile(t);
    let c_one = (target < 1.0).then(|| shape.quantile(target));
    let (mut lo, mut hi, mut lo_one) = (f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
    for (&qa, &sa) in q.iter().zip(s) {
        let x = qa + sa * ct;
        lo = lo.min(x);
        hi = hi.max(x);
        if let Some(c1) = c_one {
            lo_one = lo_one.max(qa + sa * c1);
        }
    }
    (lo.max(lo_one).min(hi), hi)
}

/// The pruning cut at level t (see [`PRUNE_MARGIN`]).
fn prune_cut(t: f64) -> f64 {
    (1.0 / t).ln().max(0.0) + PRUNE_MARGIN
}

/// The third-order step towards `S = target` from the sums of one pass (series reversion of
/// `g + g1·δ + g2·δ²/2 + g3·δ³/6 = 0` for `g = ln S − ln target` and its derivatives), and the
/// Newton step.
fn steps(sums: &Sums, ln_target: f64) -> (f64, f64) {
    let Sums {
        surv: s0,
        dens: f0,
        dens1,
        dens2,
    } = *sums;
    let g = s0.ln() - ln_target;
    let g1 = -f0 / s0;
    let g2 = dens1 / s0 - g1 * g1;
    let g3 = -dens2 / s0 + 3.0 * f0 * dens1 / (s0 * s0) + 2.0 * g1 * g1 * g1;
    let a = -g / g1;
    let third =
        a - g2 / (2.0 * g1) * a * a + (g2 * g2 / (2.0 * g1 * g1) - g3 / (6.0 * g1)) * a * a * a;
    (third, a)
}

/// Safeguarded iteration from v in the bracket `[lo, hi]`: passes until `S(v)` is within
/// [`TOLERANCE`] of k·t or no float is left strictly inside the bracket. Returns V and the sum of
/// the densities there, which are left in `buf.dens`.
fn iterate(
    shape: NoiseShape,
    act: &Active,
    buf: &mut Buffers,
    target: f64,
    (mut lo, mut hi): (f64, f64),
    mut v: f64,
) -> Option<(f64, f64)> {
    let ln_target = target.ln();
    buf.fit(act.idx.len());
    let mut sums = pass(shape, v, &act.q, &act.inv, buf);
    for _ in 0..MAX_PASSES {
        if settled(sums.surv, target) {
            break;
        }
        if sums.surv > target {
            lo = v;
        } else {
            hi = v;
        }
        let (third, newton) = steps(&sums, ln_target);
        let ok = |x: f64| sums.dens > 0.0 && x > lo && x < hi;
        let next = if ok(v + third) {
            v + third
        } else if ok(v + newton) {
            v + newton
        } else {
            lo + 0.5 * (hi - lo)
        };
        // No float strictly inside the bracket: V is found to the last bit.
        if !(next > lo && next < hi) {
            break;
        }
        // A short step: the densities there follow from this pass's without exponentials
        // ([`correct`]); if they already meet the tolerance, no further pass is needed.
        if next == v + third {
            if let Some((s1, total)) = correct(shape, v, third, act, buf) {
                if settled(s1, target) && total > 0.0 && total.is_finite() {
                    return Some((next, total));
                }
            }
        }
        v = next;
        sums = pass(shape, v, &act.q, &act.inv, buf);
    }
    (sums.dens > 0.0 && sums.dens.is_finite()).then_some((v, sums.dens))
}

/// V with `S(V) = k·t` for the candidates `(q, s, inv = 1/s)` and the level t in (0, 1), and
/// the noise density of every candidate at V. `guess` is where the search starts when it lies
/// in the bracket. `None` if the densities vanish (they cannot for finite inputs; the caller
/// then uses the draw-by-draw loop).
pub(crate) fn solve<'w>(
    shape: NoiseShape,
    q: &[f64],
    s: &[f64],
    inv: &[f64],
    t: f64,
    guess: Option<f64>,
    work: &'w mut Work,
) -> Option<Solution<'w>> {
    let (lo, hi) = bracket(shape, q, s, t);
    let Work { buf, active } = work;
    active.refill(q, inv, lo, prune_cut(t));
    let v = match guess {
        Some(g) if g > lo && g < hi => g,
        _ => lo,
    };
    let (v, total) = iterate(shape, active, buf, q.len() as f64 * t, (lo, hi), v)?;
    Some(Solution {
        v,
        active: &active.idx,
        dens: &buf.dens,
        total,
    })
}

/// Taylor coefficients of e^{−x} from x^13 down to x^1: c_n = (−1)^n / n!.
const EXP_NEG_COEFFS: [f64; 13] = [
    -1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    -1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    -1.0 / 362_880.0,
    1.0 / 40_320.0,
    -1.0 / 5_040.0,
    1.0 / 720.0,
    -1.0 / 120.0,
    1.0 / 24.0,
    -1.0 / 6.0,
    0.5,
    -1.0,
];

/// e^{−x} by its Taylor polynomial of degree `DEG` (1 ≤ DEG ≤ 13), Horner's scheme.
#[inline(always)]
fn exp_neg_taylor<const DEG: usize>(x: f64) -> f64 {
    let mut p = 0.0;
    for &c in &EXP_NEG_COEFFS[13 - DEG..] {
        p = p * x + c;
    }
    p * x + 1.0
}

/// The degree the correction uses for moves up to each radius: the truncation error
/// `x^{n+1}/(n+1)!` stays below 1e-19 (4: 1e-4; 7: 5e-3; 10: 0.05; 13: 0.25).
const TAYLOR_DEGREES: [(f64, usize); 4] = [(1e-4, 4), (5e-3, 7), (0.05, 10), (0.25, 13)];

/// The densities at v + δ from those at v, without exponentials: the density of a candidate
/// that stays on the same side of its centre is multiplied by e^{∓δ/s_a}, by a Taylor polynomial
/// of degree `DEG` chosen by the caller for the largest move. Returns the new Σ S_a and Σ f_a, or
/// `None` when a candidate crosses its centre.
#[inline(always)]
fn correct_body<const DEG: usize>(
    shape: NoiseShape,
    v: f64,
    delta: f64,
    act: &Active,
    buf: &mut Buffers,
) -> Option<(f64, f64)> {
    let below = if shape == NoiseShape::Laplace {
        1.0
    } else {
        0.0
    };
    let next = v + delta;
    let mut bad = 0u64;
    let Buffers { surv, dens, .. } = buf;
    for ((((d, s), &qa), &ia), &sa) in dens
        .iter_mut()
        .zip(surv.iter_mut())
        .zip(&act.q)
        .zip(&act.inv)
        .zip(&act.s)
    {
        let above = v >= qa;
        let x = if above { delta * ia } else { -(delta * ia) };
        let f = *d * exp_neg_taylor::<DEG>(x);
        *d = f;
        // Survival from the density: s·f above the centre; below, 1 − s·f (Laplace) or 1.
        let tail = f * sa;
        *s = if above { tail } else { 1.0 - below * tail };
        bad |= u64::from(above != (next >= qa));
    }
    if bad != 0 {
        return None;
    }
    let [s1, f1] = lane_sums([surv, dens]);
    Some((s1, f1))
}

crate::simd::widest! {
    /// [`correct_body`] with the widest vector instructions the processor has (same bits).
    fn correct_deg<const DEG: usize>(
        shape: NoiseShape,
        v: f64,
        delta: f64,
        act: &Active,
        buf: &mut Buffers,
    ) -> Option<(f64, f64)> = correct_body, avx512: correct_avx512, avx2: correct_avx2
}

/// [`correct_body`] with the lowest degree of [`TAYLOR_DEGREES`] for the largest move
/// |δ|·max 1/s; `None` beyond the largest radius (0.25) too.
fn correct(
    shape: NoiseShape,
    v: f64,
    delta: f64,
    act: &Active,
    buf: &mut Buffers,
) -> Option<(f64, f64)> {
    let largest = delta.abs() * act.inv_max;
    let degree = TAYLOR_DEGREES
        .iter()
        .find(|&&(radius, _)| largest <= radius)?
        .1;
    match degree {
        4 => correct_deg::<4>(shape, v, delta, act, buf),
        7 => correct_deg::<7>(shape, v, delta, act, buf),
        10 => correct_deg::<10>(shape, v, delta, act, buf),
        _ => correct_deg::<13>(shape, v, delta, act, buf),
    }
}

/// Nodes of the guide: levels at these quantiles of the uniform that draws the level.
const GUIDE_QUANTILES: [f64; 6] = [0.02, 0.2, 0.4, 0.6, 0.8, 0.98];

/// Pass-and-step rounds of a guided solve before the safeguarded search takes over.
const GUIDED_ROUNDS: usize = 3;

/// Levels down to e^{−GUIDE_COVER} times the smallest node level use the guide's candidate set.
const GUIDE_COVER: f64 = 10.0;

/// A solver for one problem that is sampled many times (docs/mechanisms.md, "Sampling the
/// maximum directly"). The maximum at a few levels, solved once, and the slope dV/d ln t there
/// give each later solve its starting point (cubic Hermite interpolation in ln t between nodes,
/// the end node's tangent beyond them), and one candidate set, pruned once, serves every level
/// the nodes cover. From that start one pass and one third-order step usually reach the
/// tolerance; the densities at the new point then follow from those of the pass by a short
/// Taylor polynomial (no exponentials), and the tolerance is checked on the corrected sums.
/// The guide decides where the search starts, not the equation it solves.
#[derive(Debug, Clone)]
pub(crate) struct Guide {
    shape: NoiseShape,
    /// (ln t, V, dV/d ln t), ln t decreasing (V increasing).
    nodes: Vec<(f64, f64, f64)>,
    /// The candidates for levels in `[t_min, t_max]`.
    active: Active,
    t_min: f64,
    t_max: f64,
}

impl Guide {
    /// Solves at the levels `level(u)` of [`GUIDE_QUANTILES`]; `None` if a solve fails.
    pub(crate) fn new(
        shape: NoiseShape,
        q: &[f64],
        s: &[f64],
        inv: &[f64],
        level: impl Fn(f64) -> f64,
        work: &mut Work,
    ) -> Option<Guide> {
        let mut guide = Guide {
            shape,
            nodes: Vec::with_capacity(GUIDE_QUANTILES.len()),
            active: Active::default(),
            t_min: f64::INFINITY,
            t_max: 0.0,
        };
        for u in GUIDE_QUANTILES {
            let t = level(u);
            let sol = solve(shape, q, s, inv, t, guide.guess(t), work)?;
            // At the root S = k·t and d ln S/dV = −F/S, so dV/d ln t = −k·t / F.
            let slope = -(q.len() as f64 * t) / sol.total;
            guide.nodes.push((t.ln(), sol.v, slope));
            guide.nodes.sort_by(|a, b| b.0.total_cmp(&a.0));
            guide.t_min = guide.t_min.min(t);
            guide.t_max = guide.t_max.max(t);
        }
        // Every level in [t_min·e^{−GUIDE_COVER}, t_max] has its maximum at or above the
        // bracket's lower end at t_max and needs no larger cut than the one at the lowest level.
        let (lo, _) = bracket(shape, q, s, guide.t_max);
        guide.t_min *= (-GUIDE_COVER).exp();
        guide.active = Active::new(q, inv, lo, prune_cut(guide.t_min));
        Some(guide)
    }

    /// The starting point for level t.
    fn guess(&self, t: f64) -> Option<f64> {
        let (first, last) = (self.nodes.first()?, self.nodes.last()?);
        let x = t.ln();
        if x >= first.0 {
            return Some(first.1 + first.2 * (x - first.0));
        }
        if x <= last.0 {
            return Some(last.1 + last.2 * (x - last.0));
        }
        let i = self.nodes.partition_point(|n| n.0 > x);
        let ((x1, v1, d1), (x0, v0, d0)) = (self.nodes[i], self.nodes[i - 1]);
        // Cubic Hermite on [x1, x0] (x1 < x < x0).
        let h = x0 - x1;
        let r = (x - x1) / h;
        let (r2, r3) = (r * r, r * r * r);
        Some(
            (2.0 * r3 - 3.0 * r2 + 1.0) * v1
                + (r3 - 2.0 * r2 + r) * h * d1
                + (-2.0 * r3 + 3.0 * r2) * v0
                + (r3 - r2) * h * d0,
        )
    }

    /// [`solve`] for this guide's problem at level t.
    pub(crate) fn solve<'a>(
        &'a self,
        q: &[f64],
        s: &[f64],
        inv: &[f64],
        t: f64,
        work: &'a mut Work,
    ) -> Option<Solution<'a>> {
        let guess = self.guess(t);
        let (Some(v), true) = (guess, t >= self.t_min && t <= self.t_max) else {
            return solve(self.shape, q, s, inv, t, guess, work);
        };
        let act = &self.active;
        let target = q.len() as f64 * t;
        let buf = &mut work.buf;
        buf.fit(act.idx.len());
        let mut v = v;
        let mut found = None;
        for _ in 0..GUIDED_ROUNDS {
            let sums = pass(self.shape, v, &act.q, &act.inv, buf);
            if !(sums.dens > 0.0 && sums.dens.is_finite()) {
                break;
            }
            if settled(sums.surv, target) {
                found = Some((v, sums.dens));
                break;
            }
            let (third, _) = steps(&sums, target.ln());
            if !third.is_finite() {
                break;
            }
            if let Some((s1, total)) = correct(self.shape, v, third, act, buf) {
                if settled(s1, target) && total > 0.0 {
                    found = Some((v + third, total));
                    break;
                }
            }
            v += third;
        }
        match found {
            Some((v, total)) => Some(Solution {
                v,
                active: &act.idx,
                dens: &work.buf.dens,
                total,
            }),
            // The guided step did not settle it: the safeguarded search, from the guess.
            None => solve(self.shape, q, s, inv, t, guess, work),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_branch_free_exponential_is_accurate_and_underflows_to_zero() {
        let mut worst: f64 = 0.0;
        for i in 0..200_000 {
            let y = -(i as f64) * 3.54e-3 - 1e-7 * (i % 7) as f64;
            let (a, b) = (exp_nonpositive(y), y.exp());
            worst = worst.max(((a - b) / b).abs());
        }
        assert!(worst < 4e-16, "relative error {worst:e}");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-709.0), 0.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
        // Power: the degree-5 polynomial is visibly worse at the end of the reduced range.
        let r: f64 = -0.34;
        let p5 = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r / 120.0))));
        assert!(((p5 - r.exp()) / r.exp()).abs() > 1e-6);
    }

    #[test]
    fn the_taylor_factor_is_accurate_on_its_radius() {
        let mut worst: f64 = 0.0;
        for i in -1000..=1000 {
            let x = 0.25 * i as f64 / 1000.0;
            let b = (-x).exp();
            let a = match TAYLOR_DEGREES.iter().find(|r| x.abs() <= r.0).unwrap().1 {
                4 => exp_neg_taylor::<4>(x),
                7 => exp_neg_taylor::<7>(x),
                10 => exp_neg_taylor::<10>(x),
                _ => exp_neg_taylor::<13>(x),
            };
            worst = worst.max(((a - b) / b).abs());
        }
        assert!(worst < 4e-16, "relative error {worst:e}");
        // Power: a too-low degree is visibly worse at the end of a range.
        assert!((exp_neg_taylor::<2>(1e-4) - (-1e-4f64).exp()).abs() > 1e-14);
        assert!((exp_neg_taylor::<9>(0.25) - (-0.25f64).exp()).abs() > 1e-14);
    }

    /// Every build of the pass and of the correction this processor can run gives the bits of
    /// the baseline build (the unit tests run on the benchmark machine, which has AVX-512 and
    /// AVX2; on another machine the missing builds are skipped and named).
    #[test]
    fn the_pass_is_the_same_with_avx512_avx2_and_without() {
        let n = 37;
        let q: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let inv: Vec<f64> = (0..n)
            .map(|i| 1.0 / (0.05 + (i % 5) as f64 * 0.3))
            .collect();
        type PassFn = fn(NoiseShape, f64, &[f64], &[f64], &mut Buffers) -> Sums;
        type CorrectFn = fn(NoiseShape, f64, f64, &Active, &mut Buffers) -> Option<(f64, f64)>;
        let mut builds: Vec<(&str, PassFn, CorrectFn)> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY (both): the processor has AVX-512F (checked just above).
                builds.push((
                    "avx512",
                    |sh, v, q, i, b| unsafe { pass_avx512(sh, v, q, i, b) },
                    |sh, v, d, a, b| unsafe { correct_avx512::<7>(sh, v, d, a, b) },
                ));
            } else {
                eprintln!("AVX-512F not available: its builds are not compared");
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY (both): the processor has AVX2 (checked just above).
                builds.push((
                    "avx2",
                    |sh, v, q, i, b| unsafe { pass_avx2(sh, v, q, i, b) },
                    |sh, v, d, a, b| unsafe { correct_avx2::<7>(sh, v, d, a, b) },
                ));
            } else {
                eprintln!("AVX2 not available: its builds are not compared");
            }
        }
        let act = Active::new(&q, &inv, f64::NEG_INFINITY, f64::INFINITY);
        for shape in [NoiseShape::Laplace, NoiseShape::Exponential] {
            for v in [-1.0, 0.1, 0.9, 3.0] {
                let mut base = Buffers::new(n);
                let b = pass_body(shape, v, &q, &inv, &mut base);
                let mut base_c = base.clone();
                let bc = correct_body::<7>(shape, v, 1e-4, &act, &mut base_c);
                let bits = |r: Option<(f64, f64)>| r.map(|(s, f)| (s.to_bits(), f.to_bits()));
                for (name, build, correct_build) in &builds {
                    let mut buf = Buffers::new(n);
                    let a = build(shape, v, &q, &inv, &mut buf);
                    assert_eq!(buf.dens, base.dens, "{name}: densities");
                    assert_eq!(buf.surv, base.surv, "{name}: survivals");
                    for (x, y) in [
                        (a.surv, b.surv),
                        (a.dens, b.dens),
                        (a.dens1, b.dens1),
                        (a.dens2, b.dens2),
                    ] {
                        assert_eq!(x.to_bits(), y.to_bits(), "{name}: sums");
                    }
                    let mut c = base.clone();
                    let ac = correct_build(shape, v, 1e-4, &act, &mut c);
                    assert_eq!(bits(ac), bits(bc), "{name}: correction");
                    assert_eq!(c.dens, base_c.dens, "{name}: corrected densities");
                }
                // The dispatching correction against its baseline build.
                let mut c = base.clone();
                let ac = correct(shape, v, 1e-4, &act, &mut c);
                assert_eq!(bits(ac), bits(bc), "correction");
                assert_eq!(c.dens, base_c.dens, "corrected densities");
            }
        }
    }

    #[test]
    fn the_solved_maximum_has_the_requested_tail_sum() {
        let q = [0.0, 0.5, 1.0, 1.2, 2.0, -3.0];
        let s = [1.0, 2.0, 0.5, 1.0, 1.5, 1e-6];
        let inv: Vec<f64> = s.iter().map(|s| 1.0 / s).collect();
        for shape in [NoiseShape::Laplace, NoiseShape::Exponential] {
            for t in [1e-9, 1e-4, 0.01, 0.3, 0.6, 0.97] {
                let mut work = Work::default();
                let sol = solve(shape, &q, &s, &inv, t, None, &mut work).expect("densities");
                let (active, dens) = (sol.active, sol.dens);
                assert_eq!(active.len(), dens.len());
                // Recompute S(V) from the densities' definition: find V by bisection here.
                let tail = |v: f64| -> f64 {
                    q.iter()
                        .zip(&s)
                        .map(|(&qa, &sa)| {
                            let z = (v - qa) / sa;
                            match (shape, z >= 0.0) {
                                (NoiseShape::Laplace, true) => 0.5 * (-z).exp(),
                                (NoiseShape::Laplace, false) => 1.0 - 0.5 * z.exp(),
                                (NoiseShape::Exponential, true) => (-z).exp(),
                                (NoiseShape::Exponential, false) => 1.0,
                            }
                        })
                        .sum()
                };
                let (mut lo, mut hi) = (-100.0, 100.0);
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if tail(mid) > 6.0 * t {
                        lo = mid
                    } else {
                        hi = mid
                    }
                }
                // The densities returned are those at the bisection's V.
                let v = 0.5 * (lo + hi);
                for (&a, &d) in active.iter().zip(dens) {
                    let a = a as usize;
                    let z = (v - q[a]) / s[a];
                    let want = match shape {
                        NoiseShape::Laplace => 0.5 * (-z.abs()).exp() / s[a],
                        NoiseShape::Exponential if z >= 0.0 => (-z).exp() / s[a],
                        NoiseShape::Exponential => 0.0,
                    };
                    let err = (d - want).abs();
                    assert!(
                        err <= 1e-8 * want,
                        "{shape:?} t={t}: density of {a} is {d}, bisection gives {want}"
                    );
                }
            }
        }
    }
}
