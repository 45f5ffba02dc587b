//! Small compressed-column matrix used inside the fitting pipeline (Gram matrix, Cholesky factor,
//! approximate inverse). Row indices are `u32`, values `f64`; columns are sorted by row.

// Index loops mirror the matrix formulas of SPEC §6 (column j, row i).
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

/// Square sparse matrix in compressed-column form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseCols {
    /// Dimension (square).
    pub n: usize,
    /// Start of each column in `row` / `val`; length `n + 1`.
    pub col_ptr: Vec<usize>,
    /// Row index of each entry.
    pub row: Vec<u32>,
    /// Value of each entry.
    pub val: Vec<f64>,
}

impl SparseCols {
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Rows and values of column `j`.
    pub fn col(&self, j: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.col_ptr[j], self.col_ptr[j + 1]);
        (&self.row[a..b], &self.val[a..b])
    }

    /// Builds a matrix from per-column (sorted) entry lists.
    pub fn from_columns(n: usize, cols: Vec<(Vec<u32>, Vec<f64>)>) -> Self {
        let nnz = cols.iter().map(|c| c.0.len()).sum();
        let mut m = SparseCols {
            n,
            col_ptr: Vec::with_capacity(n + 1),
            row: Vec::with_capacity(nnz),
            val: Vec::with_capacity(nnz),
        };
        m.col_ptr.push(0);
        for (r, v) in cols {
            m.row.extend_from_slice(&r);
            m.val.extend_from_slice(&v);
            m.col_ptr.push(m.row.len());
        }
        m
    }

    /// The full symmetric matrix from its lower triangle (diagonal included once).
    pub fn symmetric_from_lower(&self) -> SparseCols {
        let n = self.n;
        let mut count = vec![0usize; n];
        for j in 0..n {
            let (rows, _) = self.col(j);
            for &i in rows {
                count[j] += 1;
                if i as usize != j {
                    count[i as usize] += 1;
                }
            }
        }
        let mut col_ptr = vec![0usize; n + 1];
        for j in 0..n {
            col_ptr[j + 1] = col_ptr[j] + count[j];
        }
        let nnz = col_ptr[n];
        let mut row = vec![0u32; nnz];
        let mut val = vec![0.0f64; nnz];
        let mut next = col_ptr.clone();
        // Upper part of column i (rows j < i) comes from row i of the lower triangle, visited in
        // increasing j, so every column stays sorted when the upper entries are placed first.
        for j in 0..n {
            let (rows, vals) = self.col(j);
            for (&i, &v) in rows.iter().zip(vals) {
                let i = i as usize;
                if i != j {
                    row[next[i]] = j as u32;
                    val[next[i]] = v;
                    next[i] += 1;
                }
            }
        }
        for j in 0..n {
            let (rows, vals) = self.col(j);
            for (&i, &v) in rows.iter().zip(vals) {
                row[next[j]] = i;
                val[next[j]] = v;
                next[j] += 1;
            }
        }
        SparseCols {
            n,
            col_ptr,
            row,
            val,
        }
    }

    /// Symmetric permutation of a full symmetric matrix, keeping the lower triangle:
    /// `B[a, b] = A[fwd[a], fwd[b]]` for `a ≥ b`.
    pub fn permuted_lower(&self, fwd: &[usize], inv: &[usize]) -> SparseCols {
        let n = self.n;
        let cols: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .map(|b| {
                let (rows, vals) = self.col(fwd[b]);
                let mut e: Vec<(u32, f64)> = rows
                    .iter()
                    .zip(vals)
                    .filter_map(|(&i, &v)| {
                        let a = inv[i as usize];
                        (a >= b).then_some((a as u32, v))
                    })
                    .collect();
                e.sort_unstable_by_key(|x| x.0);
                e.into_iter().unzip()
            })
            .collect();
        SparseCols::from_columns(n, cols)
    }

    /// Symmetric permutation of a symmetric matrix given by its lower triangle, keeping the lower
    /// triangle: `B[a, b] = A[fwd[a], fwd[b]]` for `a ≥ b`, with `inv` the inverse of `fwd`.
    /// Consumes `self` so that only one copy of the entries is alive besides the result.
    pub fn permute_lower(self, inv: &[usize]) -> SparseCols {
        let n = self.n;
        let place = |i: usize, j: usize| {
            let (a, b) = (inv[i], inv[j]);
            if a >= b {
                (a, b)
            } else {
                (b, a)
            }
        };
        let mut col_ptr = vec![0usize; n + 1];
        for j in 0..n {
            for &i in self.col(j).0 {
                col_ptr[place(i as usize, j).1 + 1] += 1;
            }
        }
        for b in 0..n {
            col_ptr[b + 1] += col_ptr[b];
        }
        let nnz = col_ptr[n];
        let mut row = vec![0u32; nnz];
        let mut val = vec![0.0f64; nnz];
        let mut next = col_ptr.clone();
        for j in 0..n {
            let (r, v) = self.col(j);
            for (&i, &x) in r.iter().zip(v) {
                let (a, b) = place(i as usize, j);
                row[next[b]] = a as u32;
                val[next[b]] = x;
                next[b] += 1;
            }
        }
        drop(self);
        // Sort every column by row.
        let mut rest_r: &mut [u32] = &mut row;
        let mut rest_v: &mut [f64] = &mut val;
        let mut chunks = Vec::with_capacity(n);
        for b in 0..n {
            let len = col_ptr[b + 1] - col_ptr[b];
            let (cr, tr) = std::mem::take(&mut rest_r).split_at_mut(len);
            let (cv, tv) = std::mem::take(&mut rest_v).split_at_mut(len);
            chunks.push((cr, cv));
            rest_r = tr;
            rest_v = tv;
        }
        chunks.into_par_iter().for_each(|(cr, cv)| {
            if !cr.windows(2).all(|w| w[0] < w[1]) {
                let mut e: Vec<(u32, f64)> = cr.iter().copied().zip(cv.iter().copied()).collect();
                e.sort_unstable_by_key(|x| x.0);
                for (k, (r, v)) in e.into_iter().enumerate() {
                    cr[k] = r;
                    cv[k] = v;
                }
            }
        });
        SparseCols {
            n,
            col_ptr,
            row,
            val,
        }
    }

    /// Squared 2-norms of the columns of the symmetric matrix whose lower triangle is `self`.
    pub fn symmetric_col_sq_norms(&self) -> Vec<f64> {
        let mut norms = vec![0.0; self.n];
        for j in 0..self.n {
            let (r, v) = self.col(j);
            for (&i, &x) in r.iter().zip(v) {
                norms[j] += x * x;
                if i as usize != j {
                    norms[i as usize] += x * x;
                }
            }
        }
        norms
    }

    /// Keeps the diagonal and the `budget` largest-magnitude off-diagonal entries (one global
    /// threshold; SANSA's pruning to the target density). Returns which columns lost entries.
    pub fn prune_global(&mut self, budget: usize) -> Vec<bool> {
        let n = self.n;
        let mut mags: Vec<f64> = (0..n)
            .flat_map(|j| {
                let (r, v) = self.col(j);
                r.iter()
                    .zip(v)
                    .filter(move |(&i, _)| i as usize != j)
                    .map(|(_, &x)| x.abs())
            })
            .collect();
        let mut changed = vec![false; n];
        if mags.len() <= budget {
            return changed;
        }
        let k = mags.len() - budget; // entries to drop
        let (_, &mut threshold, _) = mags.select_nth_unstable_by(k - 1, |a, b| a.total_cmp(b));
        // Drop everything ≤ threshold, then give back ties until the budget is met.
        let above = mags.iter().filter(|&&m| m > threshold).count();
        let mut ties_left = budget.saturating_sub(above);
        let mut out = SparseCols {
            n,
            col_ptr: vec![0],
            row: Vec::new(),
            val: Vec::new(),
        };
        for j in 0..n {
            let (r, v) = self.col(j);
            for (&i, &x) in r.iter().zip(v) {
                let keep = if i as usize == j || x.abs() > threshold {
                    true
                } else if x.abs() == threshold && ties_left > 0 {
                    ties_left -= 1;
                    true
                } else {
                    false
                };
                if keep {
                    out.row.push(i);
                    out.val.push(x);
                } else {
                    changed[j] = true;
                }
            }
            out.col_ptr.push(out.row.len());
        }
        *self = out;
        changed
    }
}

/// Dense accumulator with a list of touched positions, reused across columns.
#[derive(Debug, Clone)]
pub struct Accumulator {
    /// Values (zero outside `touched`).
    pub values: Vec<f64>,
    /// Whether a position is in `touched`.
    pub mark: Vec<bool>,
    /// Positions written since the last `clear`.
    pub touched: Vec<u32>,
}

impl Accumulator {
    /// An accumulator of dimension `n`.
    pub fn new(n: usize) -> Self {
        Accumulator {
            values: vec![0.0; n],
            mark: vec![false; n],
            touched: Vec::new(),
        }
    }
    /// Adds `v` at `i`.
    #[inline]
    pub fn add(&mut self, i: u32, v: f64) {
        let iu = i as usize;
        if !self.mark[iu] {
            self.mark[iu] = true;
            self.touched.push(i);
        }
        self.values[iu] += v;
    }
    /// Resets without collecting anything.
    pub fn clear(&mut self) {
        for &i in &self.touched {
            self.mark[i as usize] = false;
            self.values[i as usize] = 0.0;
        }
        self.touched.clear();
    }

    /// Sum of squares of the touched values, then resets (no sorting).
    pub fn drain_sq_norm(&mut self) -> f64 {
        let s = self
            .touched
            .iter()
            .map(|&i| self.values[i as usize].powi(2))
            .sum();
        self.clear();
        s
    }

    /// Takes the touched entries (sorted by index) and resets.
    pub fn drain_sorted(&mut self) -> (Vec<u32>, Vec<f64>) {
        self.touched.sort_unstable();
        let rows = std::mem::take(&mut self.touched);
        let vals: Vec<f64> = rows
            .iter()
            .map(|&i| {
                let iu = i as usize;
                self.mark[iu] = false;
                std::mem::replace(&mut self.values[iu], 0.0)
            })
            .collect();
        (rows, vals)
    }
}
