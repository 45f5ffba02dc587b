//! krr's exact law on a user's pool, the part of it the tuner evaluates per user: the argmax
//! set of the clipped scores (with a prior's offsets) and, per pool size, how many held-out
//! items it holds (docs/utility.md, "Tuning").

/// The argmax set of values seen one at a time, as far as krr's law needs it: how many tie for
/// the largest and how many of those are held out.
struct ArgmaxSet {
    best: f64,
    tied: u32,
    tied_hits: u32,
}

impl ArgmaxSet {
    fn new() -> Self {
        ArgmaxSet {
            best: f64::NEG_INFINITY,
            tied: 0,
            tied_hits: 0,
        }
    }

    fn push(&mut self, v: f64, hit: bool) {
        if v > self.best {
            (self.best, self.tied, self.tied_hits) = (v, 1, u32::from(hit));
        } else if v == self.best {
            self.tied += 1;
            self.tied_hits += u32::from(hit);
        }
    }

    /// The share of held-out items in the set (NaN while it is empty).
    fn share(&self) -> f64 {
        f64::from(self.tied_hits) / f64::from(self.tied)
    }
}

/// For one user and a pool in ranking order (`(clipped score q, ℓ, held out)` per item): at each
/// pool size of `sizes` (ascending), `(c, a)` with `c` the held-out items among the first N items
/// and `a` the share of held-out items in the argmax set of `q` over them.
pub fn prefix_stats(pool: &[(f64, f64, bool)], sizes: &[usize], out: &mut Vec<(f64, f64)>) {
    let (mut set, mut c) = (ArgmaxSet::new(), 0u32);
    let mut next = 0;
    for (i, &(q, _, hit)) in pool.iter().enumerate() {
        c += u32::from(hit);
        set.push(q, hit);
        while next < sizes.len() && sizes[next] == i + 1 {
            out.push((f64::from(c), set.share()));
            next += 1;
        }
    }
}

/// The share of held-out items in the argmax set of `q + scale·ℓ` over `pool` (`(q, ℓ, held
/// out)` per item), ties uniform: krr's `a` with a prior whose offsets are `scale·ℓ`.
pub fn argmax_share(pool: &[(f64, f64, bool)], scale: f64) -> f64 {
    match argmax_counts(pool, scale) {
        (0, _) => 0.0,
        (tied, hits) => f64::from(hits) / f64::from(tied),
    }
}

/// The size of the argmax set of `q + scale·ℓ` over `pool` and how many held-out items it holds.
pub fn argmax_counts(pool: &[(f64, f64, bool)], scale: f64) -> (u32, u32) {
    let mut set = ArgmaxSet::new();
    for &(q, l, hit) in pool {
        set.push(q + scale * l, hit);
    }
    (set.tied, set.tied_hits)
}
