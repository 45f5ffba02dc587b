//! Approximate inverse of a unit lower-triangular matrix by UMR, uniform minimal residual
//! (docs/sansa.md, step 3; Spišák et al. 2023).
//!
//! Start from `K = 2I − L` (the first Neumann terms of `L⁻¹ = (I − (I − L))⁻¹`). The residual of
//! column j is `r_j = e_j − L k_j`; a minimal-residual step `k_j += α_j r_j` with
//! `α_j = ⟨r_j, L r_j⟩ / ‖L r_j‖²` minimises `‖e_j − L(k_j + α r_j)‖`. Columns are independent, so
//! every step updates its columns in parallel. Scans update the columns whose squared residual norm
//! exceeds a threshold that decreases scan by scan; finetune steps update the worst tenth. After each
//! step K is re-sparsified to the target number of entries with one global magnitude threshold.
//! Iteration stops early when `‖R‖²_F / n < 1e-6` (1e-4 stopped too early on ml-1m with ICF:
//! Recall@20 0.175 instead of 0.188).

use rayon::prelude::*;

use super::sparse::{from_columns, prune_global, Accumulator, Cols, SparseMat};

/// UMR settings (the reference uses 3 scans and 10 finetune steps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UmrConfig {
    /// Number of threshold scans.
    pub scans: usize,
    /// Number of finetune steps on the worst columns.
    pub finetune_steps: usize,
    /// Stop when the mean squared residual column norm `‖R‖²_F / n` is below this.
    pub target_residual: f64,
}

impl Default for UmrConfig {
    fn default() -> Self {
        UmrConfig {
            scans: 3,
            finetune_steps: 10,
            target_residual: 1e-6,
        }
    }
}

/// `y = L v` for a sparse vector `v`, into the accumulator.
fn lower_times(l: &SparseMat, rows: &[u32], vals: &[f64], acc: &mut Accumulator) {
    for (&c, &v) in rows.iter().zip(vals) {
        let (lr, lv) = l.col(c as usize);
        for (&i, &x) in lr.iter().zip(lv) {
            acc.add(i, v * x);
        }
    }
}

/// Puts `L k_j − e_j` (the negated residual of column j) into `acc`, unsorted.
fn neg_residual_into(l: &SparseMat, k: &SparseMat, j: usize, acc: &mut Accumulator) {
    let (kr, kv) = k.col(j);
    lower_times(l, kr, kv, acc);
    acc.add(j as u32, -1.0);
}

/// Magnitude of the `budget`-th largest off-diagonal entry of K (0 when K has fewer).
fn global_threshold(k: &SparseMat, budget: usize) -> f64 {
    let mut mags: Vec<f64> = (0..k.cols())
        .flat_map(|j| {
            let (r, v) = k.col(j);
            r.iter()
                .zip(v)
                .filter(move |(&i, _)| i as usize != j)
                .map(|(_, &x)| x.abs())
        })
        .collect();
    if mags.len() <= budget || budget == 0 {
        return 0.0;
    }
    let idx = mags.len() - budget;
    let (_, &mut t, _) = mags.select_nth_unstable_by(idx, |a, b| a.total_cmp(b));
    t
}

/// Work space of one group of column updates.
struct Work {
    r: Accumulator,
    k: Accumulator,
    lp: Accumulator,
    /// The search directions of the group's columns that take the dense product, interleaved
    /// (`p[i·LANES + l]`), their negated residuals likewise, and `L p` likewise.
    p: Vec<f64>,
    neg_r: Vec<f64>,
    y: Vec<f64>,
}

/// Columns whose dense products [`Lower::times_dense`] computes together, reading `L` once.
const LANES: usize = 8;

/// `L` by rows beside its columns (the rows cost another copy of `L`: 19 MB at the netflix shape),
/// and how many stored entries each trailing block `L[j.., j..]` holds, for
/// [`Lower::times_dense`].
struct Lower<'a> {
    cols: &'a SparseMat,
    rows: SparseMat,
    /// `suffix[j]`: stored entries in columns `j..n`.
    suffix: Vec<usize>,
}

impl<'a> Lower<'a> {
    fn new(l: &'a SparseMat) -> Self {
        let n = l.cols();
        let mut suffix = vec![0usize; n + 1];
        for j in (0..n).rev() {
            suffix[j] = suffix[j + 1] + l.col(j).0.len();
        }
        Lower {
            cols: l,
            rows: l.to_csr(),
            suffix,
        }
    }

    /// Whether `L p` for a `p` of column `j` (rows ≥ j) is cheaper row by row over the whole
    /// trailing block than column by column over the columns of `p`. An addition scattered into
    /// the accumulator took about three times one gathered along a row (4.6 against 1.9 ns on the
    /// netflix-shaped factor, one thread); the first columns of the ordering have `p` nearly
    /// dense, and there the rows win.
    fn dense_is_cheaper(&self, j: usize, p_rows: &[u32]) -> bool {
        let scattered: usize = p_rows
            .iter()
            .map(|&c| self.cols.col(c as usize).0.len())
            .sum();
        3 * scattered > self.suffix[j]
    }

    /// `y[i·LANES + l] = Σ_c L_ic p[c·LANES + l]` for the rows `i ≥ j`, with every lane of `p`
    /// zero outside `j..n`: each row's dot products in ascending column order. A lane whose
    /// column starts after `j` has only zeros in `p` below its start; those add exact zeros to
    /// a sum that starts at +0, so its rows from its start get the bits of a product started
    /// there.
    fn times_dense(&self, j: usize, p: &[f64], y: &mut [f64]) {
        for (i, yi) in y.chunks_exact_mut(LANES).enumerate().skip(j) {
            let (c, v) = self.rows.col(i);
            let from = c.partition_point(|&c| (c as usize) < j);
            let mut s = [0.0f64; LANES];
            for (&c, &x) in c[from..].iter().zip(&v[from..]) {
                let pc: &[f64; LANES] = p[c as usize * LANES..][..LANES]
                    .try_into()
                    .expect("LANES entries per row");
                for l in 0..LANES {
                    s[l] += x * pc[l];
                }
            }
            yi.copy_from_slice(&s);
        }
    }
}

/// One minimal-residual update of the selected columns; updated columns keep their diagonal and
/// the entries at least `keep_above` in magnitude. The columns are taken in groups of [`LANES`];
/// those of a group whose `L p` is cheaper by rows share one pass over the rows of `L`.
fn update_columns(lower: &Lower, k: &SparseMat, selected: &[usize], keep_above: f64) -> SparseMat {
    let l = lower.cols;
    let n = k.cols();
    let updates: Vec<(usize, Vec<u32>, Vec<f64>)> = selected
        .par_chunks(LANES)
        .map_init(
            || Work {
                r: Accumulator::new(n),
                k: Accumulator::new(n),
                lp: Accumulator::new(n),
                p: vec![0.0; n * LANES],
                neg_r: vec![0.0; n * LANES],
                y: vec![0.0; n * LANES],
            },
            |w, group| {
                let mut done = Vec::with_capacity(group.len());
                // (column, lane, its search direction) of the columns that go by rows.
                let mut dense: Vec<(usize, usize, Vec<u32>, Vec<f64>)> = Vec::new();
                // The lowest row the dense work vectors hold anything in.
                let mut lowest = n;
                for &j in group {
                    // w.r holds −r_j = L k_j − e_j.
                    neg_residual_into(l, k, j, &mut w.r);
                    // w.k marks the pattern of k_j (a lookup per residual entry; a binary
                    // search there cost as much as the grouped products save).
                    let (kr, kv) = k.col(j);
                    for (&i, &v) in kr.iter().zip(kv) {
                        w.k.add(i, v);
                    }
                    // Search direction p: the residual restricted to the current pattern of k_j
                    // and to the entries large enough to survive re-sparsification (|r_i| ≥ τ).
                    // Entries below τ would be pruned from k_j anyway, and skipping them keeps
                    // L·p as sparse as k_j. With α = ⟨r, Lp⟩/‖Lp‖² the step still minimises
                    // ‖r − αLp‖.
                    let (pr, pv): (Vec<u32>, Vec<f64>) = w
                        .r
                        .touched()
                        .iter()
                        .map(|&i| (i, -w.r.value(i)))
                        .filter(|&(i, v)| {
                            v != 0.0
                                && (keep_above == 0.0 || w.k.is_touched(i) || v.abs() >= keep_above)
                        })
                        .unzip();
                    w.k.clear();
                    if lower.dense_is_cheaper(j, &pr) {
                        let lane = dense.len();
                        for &i in w.r.touched() {
                            w.neg_r[i as usize * LANES + lane] = w.r.value(i);
                            lowest = lowest.min(i as usize);
                        }
                        for (&i, &v) in pr.iter().zip(&pv) {
                            w.p[i as usize * LANES + lane] = v;
                        }
                        dense.push((j, lane, pr, pv));
                    } else {
                        let (mut num, mut denom) = (0.0, 0.0);
                        lower_times(l, &pr, &pv, &mut w.lp);
                        for &i in w.lp.touched() {
                            let y = w.lp.value(i);
                            num -= w.r.value(i) * y;
                            denom += y * y;
                        }
                        w.lp.clear();
                        let alpha = if denom > 0.0 { num / denom } else { 0.0 };
                        done.push(updated_column(k, j, &pr, &pv, alpha, keep_above, &mut w.k));
                    }
                    w.r.clear();
                }
                if let Some(first) = dense.iter().map(|d| d.0).min() {
                    lower.times_dense(first, &w.p, &mut w.y);
                    for (j, lane, pr, pv) in dense {
                        // The same sums, in the same ascending order, as one column alone.
                        let (mut num, mut denom) = (0.0, 0.0);
                        for i in j..n {
                            let y = w.y[i * LANES + lane];
                            num -= w.neg_r[i * LANES + lane] * y;
                            denom += y * y;
                        }
                        let alpha = if denom > 0.0 { num / denom } else { 0.0 };
                        done.push(updated_column(k, j, &pr, &pv, alpha, keep_above, &mut w.k));
                    }
                    let lowest = lowest.min(first);
                    for v in [&mut w.p, &mut w.neg_r, &mut w.y] {
                        v[lowest * LANES..].fill(0.0);
                    }
                }
                done
            },
        )
        .flatten_iter()
        .collect();
    let mut cols: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
        .map(|j| (k.col(j).0.to_vec(), k.col(j).1.to_vec()))
        .collect();
    for (j, r, v) in updates {
        cols[j] = (r, v);
    }
    from_columns(n, cols)
}

/// Column j of K after the step `k_j + α p`, keeping its diagonal and the entries at least
/// `keep_above` in magnitude, in row order. `acc` is left empty.
fn updated_column(
    k: &SparseMat,
    j: usize,
    pr: &[u32],
    pv: &[f64],
    alpha: f64,
    keep_above: f64,
    acc: &mut Accumulator,
) -> (usize, Vec<u32>, Vec<f64>) {
    let (kr, kv) = k.col(j);
    for (&i, &v) in kr.iter().zip(kv) {
        acc.add(i, v);
    }
    for (&i, &v) in pr.iter().zip(pv) {
        acc.add(i, alpha * v);
    }
    let mut kept: Vec<(u32, f64)> = acc
        .touched()
        .iter()
        .map(|&i| (i, acc.value(i)))
        .filter(|&(i, v)| i as usize == j || (v != 0.0 && v.abs() >= keep_above))
        .collect();
    acc.clear();
    kept.sort_unstable_by_key(|e| e.0);
    let (rows, vals) = kept.into_iter().unzip();
    (j, rows, vals)
}

/// Squared residual norms `‖e_j − L k_j‖²` of all columns of K.
///
/// Column by column with a reused dense accumulator, in parallel, rather than through sprs's
/// product `&l * &k` (which forms all of `LK` on one thread before any norm is taken):
/// `cargo bench --bench sparse_kernels -- residual` measures both
/// (docs/results.md, "Hand-written kernels against library paths").
pub fn residual_norms(l: &SparseMat, k: &SparseMat) -> Vec<f64> {
    (0..k.cols())
        .into_par_iter()
        .map_init(
            || Accumulator::new(k.cols()),
            |acc, j| {
                neg_residual_into(l, k, j, acc);
                acc.drain_sq_norm()
            },
        )
        .collect()
}

/// Recomputes the squared residual norms of the columns marked in `changed`.
fn update_norms(l: &SparseMat, k: &SparseMat, changed: &[bool], norms: &mut [f64]) {
    let cols: Vec<usize> = (0..k.cols()).filter(|&j| changed[j]).collect();
    let fresh: Vec<f64> = cols
        .par_iter()
        .map_init(
            || Accumulator::new(k.cols()),
            |acc, &j| {
                neg_residual_into(l, k, j, acc);
                acc.drain_sq_norm()
            },
        )
        .collect();
    for (&j, v) in cols.iter().zip(fresh) {
        norms[j] = v;
    }
}

/// One UMR step on `selected` columns, then re-sparsification; only the residual norms of columns
/// that changed are recomputed.
fn step(lower: &Lower, k: &mut SparseMat, selected: &[usize], budget: usize, norms: &mut [f64]) {
    let tau = global_threshold(k, budget);
    *k = update_columns(lower, k, selected, tau);
    let mut changed = prune_global(k, budget);
    for &j in selected {
        changed[j] = true;
    }
    update_norms(lower.cols, k, &changed, norms);
}

/// Largest `n · nnz(L)` for which the starting point is the pruned exact inverse (a few seconds
/// of sparse forward substitutions at most).
const EXACT_START_WORK: f64 = 4e9;

/// Column `j` of `L⁻¹` for a unit lower-triangular CSC `l`: forward substitution on `e_j`,
/// starting at row j and skipping zeros, so the cost is the work on the nonzeros of the result
/// only. Off-diagonal entries go to `entries`; `x` (length n, all zero) is left all zero.
///
/// Hand-written rather than sprs's `linalg::trisolve::lsolve_csc_dense_rhs`, which visits every
/// column of L for every right-hand side; `cargo bench --bench sparse_kernels -- solve` measures
/// both (docs/results.md, "Hand-written kernels against library paths").
pub fn unit_lower_solve(l: &SparseMat, j: usize, x: &mut [f64], entries: &mut Vec<(u32, f64)>) {
    let n = l.cols();
    x[j] = 1.0;
    for i in j..n {
        let xi = x[i];
        if xi != 0.0 {
            x[i] = 0.0;
            if i != j {
                entries.push((i as u32, xi));
            }
            let (r, v) = l.col(i);
            for (&row, &val) in r.iter().zip(v) {
                if row as usize != i {
                    x[row as usize] -= val * xi;
                }
            }
        }
    }
}

/// Columns of `L⁻¹` by sparse forward substitution, each cut to its `cap` largest off-diagonal
/// entries, then pruned globally to `budget`: the best sparse starting point when it is cheap (small
/// or dense item sets, where `2I − L` is a poor start and UMR scans are slow).
fn pruned_exact_inverse(l: &SparseMat, cap: usize, budget: usize) -> SparseMat {
    let n = l.cols();
    let cols: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
        .into_par_iter()
        .map_init(
            || vec![0.0f64; n],
            |x, j| {
                let mut entries = Vec::new();
                unit_lower_solve(l, j, x, &mut entries);
                if entries.len() > cap {
                    entries.select_nth_unstable_by(cap, |a, b| b.1.abs().total_cmp(&a.1.abs()));
                    entries.truncate(cap);
                }
                entries.push((j as u32, 1.0));
                entries.sort_unstable_by_key(|e| e.0);
                entries.into_iter().unzip()
            },
        )
        .collect();
    let mut k = from_columns(n, cols);
    prune_global(&mut k, budget);
    k
}

/// Approximate inverse of the unit lower-triangular `l` with at most `max_nnz` entries (diagonal
/// included). Returns K and the final mean squared residual column norm.
pub fn umr_inverse(l: &SparseMat, max_nnz: usize, cfg: UmrConfig) -> (SparseMat, f64) {
    let n = l.cols();
    let budget = max_nnz.saturating_sub(n);
    if (n as f64) * (l.nnz() as f64) <= EXACT_START_WORK {
        // Start from the pruned exact inverse; only finetune steps remain to do.
        let k = pruned_exact_inverse(l, (3 * budget / n.max(1)).max(1), budget);
        let mut norms = residual_norms(l, &k);
        return finetune(&Lower::new(l), k, budget, &mut norms, cfg);
    }
    // K = 2I − L (sprs's sparse difference).
    let mut two_i = SparseMat::eye_csc(n);
    two_i.scale(2.0);
    let mut k = &two_i - l;
    drop(two_i);
    prune_global(&mut k, budget);
    let mut norms = residual_norms(l, &k);
    let lower = Lower::new(l);
    let mut mean = norms.iter().sum::<f64>() / n.max(1) as f64;
    for s in 0..cfg.scans {
        if mean < cfg.target_residual {
            break;
        }
        // Thresholds decrease from 10× to ≈ 0.1× the target level.
        let threshold = cfg.target_residual * 10f64.powi(1 - s as i32);
        let selected: Vec<usize> = (0..n).filter(|&j| norms[j] > threshold).collect();
        if selected.is_empty() {
            continue;
        }
        step(&lower, &mut k, &selected, budget, &mut norms);
        mean = norms.iter().sum::<f64>() / n as f64;
    }
    finetune(&lower, k, budget, &mut norms, cfg)
}

/// Finetune steps on the worst tenth of the columns, until the target or stagnation.
fn finetune(
    lower: &Lower,
    mut k: SparseMat,
    budget: usize,
    norms: &mut [f64],
    cfg: UmrConfig,
) -> (SparseMat, f64) {
    let n = k.cols();
    let mut mean = norms.iter().sum::<f64>() / n.max(1) as f64;
    for _ in 0..cfg.finetune_steps {
        if mean < cfg.target_residual {
            break;
        }
        let mut sorted = norms.to_vec();
        let cut_idx = n - (n / 10).max(1);
        let (_, &mut cut, _) = sorted.select_nth_unstable_by(cut_idx, |a, b| a.total_cmp(b));
        let selected: Vec<usize> = (0..n)
            .filter(|&j| norms[j] >= cut && norms[j] > 0.0)
            .collect();
        if selected.is_empty() {
            break;
        }
        step(lower, &mut k, &selected, budget, norms);
        let before = mean;
        mean = norms.iter().sum::<f64>() / n as f64;
        // Stagnation: another finetune step would not change the result materially.
        if mean > 0.99 * before {
            break;
        }
    }
    (k, mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A unit lower-triangular CSC matrix with about `per_col` random entries below the diagonal
    /// of each column.
    fn random_unit_lower(n: usize, per_col: usize, seed: u64) -> SparseMat {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cols = (0..n)
            .map(|j| {
                let mut rows: Vec<u32> = (0..per_col)
                    .filter(|_| j + 1 < n)
                    .map(|_| rng.random_range(j as u32 + 1..n as u32))
                    .collect();
                rows.push(j as u32);
                rows.sort_unstable();
                rows.dedup();
                let vals = rows
                    .iter()
                    .map(|&i| {
                        if i as usize == j {
                            1.0
                        } else {
                            rng.random_range(-1.0..1.0)
                        }
                    })
                    .collect();
                (rows, vals)
            })
            .collect();
        from_columns(n, cols)
    }

    /// `L p` by rows (the dense path of a step) equals `L p` by columns (the sparse path) up to
    /// the order of the additions, for sparse and dense `p` and every starting column, and leaves
    /// its scratch zero.
    #[test]
    fn the_product_by_rows_equals_the_product_by_columns() {
        let n = 300;
        let l = random_unit_lower(n, 12, 3);
        let lower = Lower::new(&l);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut acc = Accumulator::new(n);
        let (mut p, mut y) = (vec![0.0; n * LANES], vec![0.0; n * LANES]);
        // Lanes of one product start at different columns (the first lane's is the smallest).
        for starts in [
            [0, 0, 1, 57, 150, 298, 299, 3],
            [57, 58, 60, 100, 200, 250, 299, 57],
        ] {
            for density in [0.02, 0.5, 1.0] {
                let mut lanes = Vec::new();
                for (lane, &j) in starts.iter().enumerate() {
                    let (mut pr, mut pv) = (Vec::new(), Vec::new());
                    for i in j..n {
                        if rng.random::<f64>() < density {
                            pr.push(i as u32);
                            pv.push(rng.random_range(-2.0..2.0));
                        }
                    }
                    for (&i, &v) in pr.iter().zip(&pv) {
                        p[i as usize * LANES + lane] = v;
                    }
                    lanes.push((j, pr, pv));
                }
                let first = starts.iter().copied().min().unwrap();
                lower.times_dense(first, &p, &mut y);
                for (lane, (j, pr, pv)) in lanes.iter().enumerate() {
                    let j = *j;
                    // Bit for bit one column alone: each row's products from column j on, added
                    // in ascending column order.
                    for i in j..n {
                        let (c, v) = lower.rows.col(i);
                        let mut s = 0.0f64;
                        for (&c, &x) in c.iter().zip(v).filter(|(&c, _)| c as usize >= j) {
                            s += x * p[c as usize * LANES + lane];
                        }
                        let got = y[i * LANES + lane];
                        assert_eq!(got.to_bits(), s.to_bits(), "lane {lane} from {j}, row {i}");
                    }
                    // And the product by columns, to rounding.
                    lower_times(&l, pr, pv, &mut acc);
                    for i in j..n {
                        let (got, want) = (y[i * LANES + lane], acc.value(i as u32));
                        assert!(
                            (got - want).abs() <= 1e-12 * (1.0 + want.abs()),
                            "lane {lane} from {j}, density {density}, row {i}: {got} against {want}"
                        );
                    }
                    acc.clear();
                }
                assert!(
                    y[..first * LANES].iter().all(|&v| v == 0.0),
                    "rows above untouched"
                );
                p.fill(0.0);
                y.fill(0.0);
            }
        }
        // The switch: a nearly dense p of the first column goes by rows, a single entry by columns.
        let all: Vec<u32> = (0..n as u32).collect();
        assert!(lower.dense_is_cheaper(0, &all));
        assert!(!lower.dense_is_cheaper(0, &[5]));
    }
}
