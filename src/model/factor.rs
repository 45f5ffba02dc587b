//! Sparse Cholesky factorizations of the (permuted) Gram matrix, docs/sansa.md, step 2.
//!
//! * [`exact_cholesky`]: faer's supernodal sparse Cholesky (pure Rust, parallel dense kernels inside
//!   supernodes), converted to our column format;
//! * [`incomplete_cholesky`]: Lin–Moré incomplete Cholesky with a per-column memory budget.
//!
//! Both return the lower factor `L` of `A = L Lᵀ` with the diagonal as the first entry of each column.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, supernodal::SupernodalLltRef, CholeskySymbolicParams,
    SymbolicCholeskyRaw, SymmetricOrdering,
};
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Par, Side};
use rayon::prelude::*;

use super::sparse::{Accumulator, Cols, SparseMat};
use super::DenseScalar;
use crate::data::split_at_bounds_mut;
use crate::{Error, Result};

/// faer's sparse types take column pointers and row indices of one index type: the boundary
/// conversion of sprs's `usize` column pointers to `u32` (once per factorisation).
fn u32_col_ptr(m: &SparseMat) -> Result<Vec<u32>> {
    if m.nnz() >= u32::MAX as usize {
        return Err(Error::Invalid(format!(
            "{} stored entries exceed the 32-bit index range",
            m.nnz()
        )));
    }
    Ok(m.indptr().raw_storage().iter().map(|&p| p as u32).collect())
}

/// The error of a Cholesky factorisation that broke down (XᵀX + λI not numerically positive
/// definite).
fn cholesky_failed(e: impl std::fmt::Debug) -> Error {
    Error::Invalid(format!(
        "Cholesky of XᵀX + λI failed ({e:?}); use a larger --l2"
    ))
}

/// Full sparse Cholesky `A = L Lᵀ` of a lower-triangular symmetric positive definite matrix (no
/// further reordering: pass an already permuted matrix). With `keep = Some(budget)` only the
/// diagonal and about `budget` off-diagonal entries largest in `|L_ij / L_jj|` (the unit factor of
/// `L D Lᵀ`) are extracted — SANSA's global pruning, done without materialising the full factor.
/// Returns the factor and the number of entries of the full factor.
pub fn exact_cholesky(a_lower: &SparseMat, keep: Option<usize>) -> Result<(SparseMat, usize)> {
    let n = a_lower.cols();
    let col_ptr = u32_col_ptr(a_lower)?;
    let sym = SymbolicSparseColMatRef::<u32>::new_checked(n, n, &col_ptr, None, a_lower.indices());
    let params = CholeskySymbolicParams {
        supernodal_flop_ratio_threshold: SupernodalThreshold::FORCE_SUPERNODAL,
        ..Default::default()
    };
    // An explicit identity permutation: with `Identity` faer reads the pattern as an upper triangle,
    // while a custom permutation honours `Side::Lower`.
    let id: Vec<u32> = (0..n as u32).collect();
    let perm = faer::perm::PermRef::new_checked(&id, &id, n);
    let symbolic =
        factorize_symbolic_cholesky(sym, Side::Lower, SymmetricOrdering::Custom(perm), params)
            .map_err(|e| Error::Invalid(format!("symbolic Cholesky failed: {e:?}")))?;
    let mut values = vec![0.0f64; symbolic.len_val()];
    let par = Par::rayon(0);
    let req = symbolic.factorize_numeric_llt_scratch::<f64>(par, Default::default());
    let mut buf = MemBuffer::new(req);
    let a = SparseColMatRef::new(sym, a_lower.data());
    symbolic
        .factorize_numeric_llt(
            &mut values,
            a,
            Side::Lower,
            LltRegularization::default(),
            par,
            MemStack::new(&mut buf),
            Default::default(),
        )
        .map_err(cholesky_failed)?;
    drop(buf);
    let SymbolicCholeskyRaw::Supernodal(sn) = symbolic.raw() else {
        return Err(Error::Invalid(
            "internal: expected a supernodal factorization".into(),
        ));
    };
    let l = SupernodalLltRef::<u32, f64>::new(sn, &values);
    let (out, full_nnz) = extract_pruned(&SupernodalColumns::new(l), keep);
    drop(values);
    Ok((out, full_nnz))
}

/// A Cholesky factor read one column at a time, so that [`extract_pruned`] can read its columns
/// in parallel.
trait FactorColumns: Sync {
    /// Number of columns.
    fn n(&self) -> usize;
    /// `L_jj`.
    fn diag(&self, j: usize) -> f64;
    /// Calls `f(i, L_ij)` for every stored entry of column j, the diagonal first.
    fn column(&self, j: usize, f: impl FnMut(u32, f64));
}

/// The columns of faer's supernodal factor: column j is column `c` of the supernode that holds
/// it, its lower-triangular block part (rows `start + c..`, the diagonal first) and then the rows
/// of the supernode's pattern.
struct SupernodalColumns<'a> {
    l: SupernodalLltRef<'a, u32, f64>,
    /// `(supernode, column within it)` of every column.
    owner: Vec<(usize, usize)>,
}

impl<'a> SupernodalColumns<'a> {
    fn new(l: SupernodalLltRef<'a, u32, f64>) -> Self {
        let mut owner = Vec::new();
        for s in 0..l.symbolic().n_supernodes() {
            owner.extend((0..l.supernode(s).val().ncols()).map(|c| (s, c)));
        }
        SupernodalColumns { l, owner }
    }
}

impl FactorColumns for SupernodalColumns<'_> {
    fn n(&self) -> usize {
        self.owner.len()
    }

    fn diag(&self, j: usize) -> f64 {
        let (s, c) = self.owner[j];
        self.l.supernode(s).val()[(c, c)]
    }

    fn column(&self, j: usize, mut f: impl FnMut(u32, f64)) {
        let (s, c) = self.owner[j];
        let node = self.l.supernode(s);
        let (start, pattern, m) = (node.start(), node.pattern(), node.val());
        let ncols = m.ncols();
        for r in c..ncols {
            f((start + r) as u32, m[(r, c)]);
        }
        for (q, &i) in pattern.iter().enumerate() {
            f(i, m[(ncols + q, c)]);
        }
    }
}

/// The lower triangle of a dense factor: the diagonal and the non-zero entries below it.
struct DenseColumns<'a, T>(faer::MatRef<'a, T>);

impl<T: DenseScalar> FactorColumns for DenseColumns<'_, T> {
    fn n(&self) -> usize {
        self.0.ncols()
    }

    fn diag(&self, j: usize) -> f64 {
        self.0[(j, j)].to_f64()
    }

    fn column(&self, j: usize, mut f: impl FnMut(u32, f64)) {
        let col = super::col_slice(self.0.col(j));
        for (i, &v) in col.iter().enumerate().skip(j) {
            let v = v.to_f64();
            if v != 0.0 || i == j {
                f(i as u32, v);
            }
        }
    }
}

/// `|v / d|` for the entries of one column (`d = L_jj`), compared without a division wherever the
/// product with the reciprocal cannot round to the other side: the quotient's bin and its
/// comparison with the threshold are those of the exact quotient, bit for bit. A division costs
/// up to fifteen times a multiplication, and there is one per entry of the factor in three of the
/// four passes of [`extract_pruned`].
#[derive(Clone, Copy)]
struct Quotient {
    d: f64,
    inv: f64,
}

impl Quotient {
    /// `fl(|v| · fl(1/|d|))` is within two units in the last place of `fl(|v / d|)` (two roundings
    /// of relative size 2⁻⁵³): positive finite doubles order like their bit patterns, so a margin
    /// of four patterns decides every comparison the approximation could get wrong.
    const MARGIN: u64 = 4;

    fn new(d: f64) -> Self {
        Quotient {
            d,
            inv: 1.0 / d.abs(),
        }
    }

    /// The exact `|v / d|`.
    #[inline]
    fn exact(self, v: f64) -> f64 {
        (v / self.d).abs()
    }

    /// The approximation's bit pattern, or `None` where it is not within the margin of the exact
    /// quotient's (zero, subnormal, infinite or not a number).
    #[inline]
    fn approx_bits(self, v: f64) -> Option<u64> {
        let q = v.abs() * self.inv;
        (q >= f64::MIN_POSITIVE * 1024.0 && q.is_finite()).then(|| q.to_bits())
    }

    /// The histogram bin of `|v / d|`: the leading 16 bits of its pattern.
    #[inline]
    fn bin(self, v: f64) -> usize {
        const LOW: u64 = (1 << 48) - 1;
        match self.approx_bits(v) {
            Some(b) if (Self::MARGIN..=LOW - Self::MARGIN).contains(&(b & LOW)) => {
                (b >> 48) as usize
            }
            _ => (self.exact(v).to_bits() >> 48) as usize,
        }
    }

    /// Whether `|v / d| ≥ t` (`t` positive and finite).
    #[inline]
    fn at_least(self, v: f64, t: f64) -> bool {
        let tb = t.to_bits();
        match self.approx_bits(v) {
            Some(b) if b >= tb.saturating_add(Self::MARGIN) => true,
            Some(b) if b.saturating_add(Self::MARGIN) < tb => false,
            _ => self.exact(v) >= t,
        }
    }
}

/// Columns per parallel task of [`extract_pruned`].
const EXTRACT_COLUMNS: usize = 32;

/// Extracts the factor `l`, keeping the diagonal and, with `keep = Some(budget)`, about `budget`
/// off-diagonal entries largest in `|L_ij / L_jj|`. The threshold comes from a histogram over the
/// leading bits of the f64 pattern (monotone for non-negative floats) and an exact selection
/// inside one bin: no copy of the full factor. Every pass reads the columns in parallel; the
/// result does not depend on the number of threads (counts are sums, the selected value is one
/// value, and each column is written alone).
fn extract_pruned(l: &impl FactorColumns, keep: Option<usize>) -> (SparseMat, usize) {
    let n = l.n();
    let mut full_nnz = 0usize;
    let threshold = match keep {
        None => None,
        Some(budget) => {
            let new = || (vec![0usize; 1 << 16], 0usize);
            let (hist, entries) = (0..n)
                .into_par_iter()
                .with_min_len(EXTRACT_COLUMNS)
                .fold(new, |(mut hist, mut entries), j| {
                    let q = Quotient::new(l.diag(j));
                    l.column(j, |i, v| {
                        entries += 1;
                        if i as usize != j {
                            hist[q.bin(v)] += 1;
                        }
                    });
                    (hist, entries)
                })
                .reduce(new, |(mut a, ea), (b, eb)| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                    (a, ea + eb)
                });
            full_nnz = entries;
            let offdiag = full_nnz - n;
            if offdiag <= budget {
                None
            } else if budget == 0 {
                // No off-diagonal entry fits (density × n² rounds to zero): the diagonal alone.
                Some(f64::INFINITY)
            } else {
                let (mut above, mut b) = (0usize, hist.len() - 1);
                while above + hist[b] < budget {
                    above += hist[b];
                    b -= 1;
                }
                let mut in_bin: Vec<f64> = (0..n)
                    .into_par_iter()
                    .with_min_len(EXTRACT_COLUMNS)
                    .fold(Vec::new, |mut found, j| {
                        let q = Quotient::new(l.diag(j));
                        l.column(j, |i, v| {
                            if i as usize != j && q.bin(v) == b {
                                found.push(q.exact(v));
                            }
                        });
                        found
                    })
                    .reduce(Vec::new, |mut a, mut b| {
                        a.append(&mut b);
                        a
                    });
                let need = budget - above; // 1 ≤ need ≤ in_bin.len()
                let (_, &mut t, _) = in_bin.select_nth_unstable_by(need - 1, |a, b| b.total_cmp(a));
                Some(t)
            }
        }
    };
    let keep_entry = |j: usize, i: u32, v: f64, q: Quotient| {
        i as usize == j || threshold.is_none_or(|t| q.at_least(v, t))
    };
    let kept: Vec<usize> = (0..n)
        .into_par_iter()
        .with_min_len(EXTRACT_COLUMNS)
        .map(|j| {
            let (q, mut count) = (Quotient::new(l.diag(j)), 0usize);
            l.column(j, |i, v| count += keep_entry(j, i, v, q) as usize);
            count
        })
        .collect();
    let mut counts = Vec::with_capacity(n + 1);
    counts.push(0usize);
    for c in kept {
        counts.push(counts.last().copied().unwrap_or(0) + c);
    }
    let nnz = counts[n];
    let mut row = vec![0u32; nnz];
    let mut val = vec![0.0f64; nnz];
    // One (rows, values) pair of slices per column, filled in parallel.
    split_at_bounds_mut(&mut row, &counts)
        .into_par_iter()
        .zip(split_at_bounds_mut(&mut val, &counts))
        .with_min_len(EXTRACT_COLUMNS)
        .enumerate()
        .for_each(|(j, (rows, vals))| {
            let (q, mut k) = (Quotient::new(l.diag(j)), 0usize);
            l.column(j, |i, v| {
                if keep_entry(j, i, v, q) {
                    rows[k] = i;
                    vals[k] = v;
                    k += 1;
                }
            });
            if !rows.windows(2).all(|w| w[0] < w[1]) {
                let mut e: Vec<(u32, f64)> =
                    rows.iter().copied().zip(vals.iter().copied()).collect();
                e.sort_unstable_by_key(|x| x.0);
                for (k, (r, v)) in e.into_iter().enumerate() {
                    rows[k] = r;
                    vals[k] = v;
                }
            }
        });
    if full_nnz == 0 {
        full_nnz = nnz;
    }
    let out = SparseMat::new_csc((n, n), counts, row, val);
    (out, full_nnz)
}

/// An `n × n` column-major matrix whose storage comes zeroed from the allocator: a fresh mapping
/// that the kernel fills with zeros page by page as it is first written. `faer::Mat::zeros` writes
/// every zero itself, on one thread: 3 s for the 1.3 GB Gram matrix at the netflix shape, before
/// the Gram pass writes the same places again. Columns start on 64-byte boundaries, as faer's own
/// do.
pub struct ZeroedSquare<T> {
    buf: Vec<T>,
    offset: usize,
    stride: usize,
    n: usize,
}

impl<T: DenseScalar> ZeroedSquare<T> {
    /// A zero `n × n` matrix.
    pub fn new(n: usize) -> Self {
        let lanes = 64 / std::mem::size_of::<T>();
        let stride = n.next_multiple_of(lanes);
        // `vec!` of a zero float asks the allocator for zeroed memory (`calloc`), it writes nothing.
        let buf = vec![T::from_f64(0.0); stride * n + lanes];
        crate::hugepages::advise(&buf);
        let offset = buf.as_ptr().align_offset(64).min(lanes - 1);
        ZeroedSquare {
            buf,
            offset,
            stride,
            n,
        }
    }

    /// The matrix, to read.
    pub fn as_ref(&self) -> faer::MatRef<'_, T> {
        let len = self.stride * self.n;
        faer::MatRef::from_column_major_slice_with_stride(
            &self.buf[self.offset..self.offset + len],
            self.n,
            self.n,
            self.stride,
        )
    }

    /// The matrix, to write.
    pub fn as_mut(&mut self) -> faer::MatMut<'_, T> {
        let len = self.stride * self.n;
        faer::MatMut::from_column_major_slice_with_stride_mut(
            &mut self.buf[self.offset..self.offset + len],
            self.n,
            self.n,
            self.stride,
        )
    }
}

/// Dense Cholesky for a Gram matrix that is nearly dense (MovieLens-like data, where the sparse
/// factor fills in completely anyway): one n×n matrix factorised in place by faer's blocked
/// kernel, then the same pruned extraction as [`exact_cholesky`]. Consumes the sparse matrix so
/// that both never coexist for long.
pub fn dense_cholesky(a_lower: SparseMat, keep: Option<usize>) -> Result<(SparseMat, usize)> {
    let n = a_lower.cols();
    let mut square = ZeroedSquare::<f64>::new(n);
    let mut m = square.as_mut();
    for j in 0..n {
        let (r, v) = a_lower.col(j);
        for (&i, &x) in r.iter().zip(v) {
            m[(i as usize, j)] = x;
        }
    }
    drop(a_lower);
    dense_cholesky_in_place(m, keep)
}

/// [`dense_cholesky`] of a dense matrix whose lower triangle (with diagonal) holds `A`, for
/// example formed by [`gram_dense`](super::gram::gram_dense); the matrix is factorised in place,
/// in its own precision (`f32` or `f64`, docs/sansa.md, "Precision"); the extracted factor is
/// `f64`.
pub fn dense_cholesky_in_place<T: DenseScalar>(
    mut m: faer::MatMut<'_, T>,
    keep: Option<usize>,
) -> Result<(SparseMat, usize)> {
    use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
    let n = m.nrows();
    let par = Par::rayon(0);
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<T>(n, par, Default::default()));
    cholesky_in_place(
        m.rb_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(cholesky_failed)?;
    drop(buf);
    Ok(extract_pruned(&DenseColumns(m.rb()), keep))
}

/// Lin–Moré incomplete Cholesky of a lower-triangular symmetric matrix (docs/sansa.md, `icf`).
///
/// Column j is computed left-looking; its candidate entries all update the remaining diagonal, then
/// only the largest `(max_nnz − nnz_so_far)/(n − j)` in magnitude are kept. On breakdown (a
/// non-positive pivot) the factorization restarts with the diagonal shifted by `1e-3·2^r`.
pub fn incomplete_cholesky(a_lower: &SparseMat, max_nnz: usize) -> Result<SparseMat> {
    let mut shift = 0.0;
    for r in 0..40 {
        if let Some(l) = try_icf(a_lower, max_nnz, shift) {
            return Ok(l);
        }
        shift = 1e-3 * 2f64.powi(r);
        eprintln!("[fit] incomplete Cholesky broke down; restarting with diagonal shift {shift:e}");
    }
    Err(Error::Invalid(
        "incomplete Cholesky broke down after 40 shifted restarts; use a larger --l2".into(),
    ))
}

fn try_icf(a: &SparseMat, max_nnz: usize, shift: f64) -> Option<SparseMat> {
    let n = a.cols();
    let none = usize::MAX;
    let mut diag: Vec<f64> = (0..n)
        .map(|j| {
            let (r, v) = a.col(j);
            if r.first() == Some(&(j as u32)) {
                v[0] + shift
            } else {
                shift
            }
        })
        .collect();
    // The factor grows column by column (read back while it grows), so it is built in plain
    // vectors and handed to sprs at the end.
    let mut l = Growing {
        col_ptr: vec![0],
        row: Vec::new(),
        val: Vec::new(),
    };
    // For every finished column k: `pos[k]` is its next entry (row ≥ current j); `head[r]` lists the
    // columns whose next entry is in row r, linked through `next`.
    let mut pos = vec![0usize; n];
    let mut head = vec![none; n];
    let mut next = vec![none; n];
    let mut acc = Accumulator::new(n);
    let mut entries: Vec<(u32, f64)> = Vec::new();
    for j in 0..n {
        let (ar, av) = a.col(j);
        for (&i, &v) in ar.iter().zip(av) {
            if i as usize > j {
                acc.add(i, v);
            }
        }
        let mut k = head[j];
        while k != none {
            let nk = next[k];
            let end = l.col_ptr[k + 1];
            let ljk = l.val[pos[k]];
            for p in pos[k] + 1..end {
                acc.add(l.row[p], -ljk * l.val[p]);
            }
            pos[k] += 1;
            if pos[k] < end {
                let r = l.row[pos[k]] as usize;
                next[k] = head[r];
                head[r] = k;
            }
            k = nk;
        }
        let d = diag[j];
        if d.is_nan() || d <= 0.0 || d.is_infinite() {
            return None;
        }
        let ljj = d.sqrt();
        let (rows, vals) = acc.drain_sorted();
        entries.clear();
        for (&i, &v) in rows.iter().zip(&vals) {
            if v != 0.0 {
                let x = v / ljj;
                diag[i as usize] -= x * x;
                entries.push((i, x));
            }
        }
        let so_far = l.row.len();
        let budget = max_nnz.saturating_sub(so_far) / (n - j);
        if entries.len() > budget {
            if budget > 0 {
                entries.select_nth_unstable_by(budget - 1, |x, y| y.1.abs().total_cmp(&x.1.abs()));
            }
            entries.truncate(budget);
            entries.sort_unstable_by_key(|x| x.0);
        }
        l.row.push(j as u32);
        l.val.push(ljj);
        let first = l.row.len();
        for &(i, x) in &entries {
            l.row.push(i);
            l.val.push(x);
        }
        l.col_ptr.push(l.row.len());
        if first < l.row.len() {
            pos[j] = first;
            let r = l.row[first] as usize;
            next[j] = head[r];
            head[r] = j;
        }
    }
    Some(SparseMat::new_csc((n, n), l.col_ptr, l.row, l.val))
}

/// A compressed-column factor under construction (ICF).
struct Growing {
    col_ptr: Vec<usize>,
    row: Vec<u32>,
    val: Vec<f64>,
}

/// Converts `L Lᵀ` to `L̃ D L̃ᵀ` with unit `L̃`: divides column j by `L_jj`; returns `d_j = L_jj²`.
pub fn to_unit_ldl(l: &mut SparseMat) -> Vec<f64> {
    let mut d = vec![0.0; l.cols()];
    for (j, mut col) in l.outer_iterator_mut().enumerate() {
        let ljj = col.data()[0];
        d[j] = ljj * ljj;
        col.map_inplace(|v| v / ljj);
    }
    d
}

#[cfg(test)]
mod quotient_tests {
    use super::Quotient;
    use rand::{Rng, SeedableRng};

    /// Without a division, `Quotient` puts every `|v / d|` in the bin of the exact quotient and
    /// compares it with a threshold as the exact quotient compares, including quotients a few
    /// units in the last place from a bin's edge or from the threshold, and across eleven orders
    /// of magnitude.
    #[test]
    fn the_quotient_without_division_bins_and_compares_as_the_exact_one() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let bin = |m: f64| (m.to_bits() >> 48) as usize;
        for _ in 0..20_000 {
            let d = rng.random_range(1e-3..1e3) * if rng.random::<bool>() { 1.0 } else { -1.0 };
            let q = Quotient::new(d);
            // Values whose exact quotient sits on or next to a bin edge, and plain random ones.
            let edge = f64::from_bits(rng.random_range(0x3e00u64..0x4100) << 48);
            let near = f64::from_bits((edge.to_bits() as i64 + rng.random_range(-6i64..=6)) as u64);
            let random = rng.random_range(-1e4..1e4);
            for v in [near * d, -near * d, random, random * 1e-6] {
                assert_eq!(q.bin(v), bin(q.exact(v)), "v {v:e}, d {d:e}");
                let exact = q.exact(v);
                for t in [
                    exact,
                    exact.next_up(),
                    exact.next_down(),
                    f64::from_bits(exact.to_bits() + 3),
                    f64::from_bits(exact.to_bits().saturating_sub(3)),
                    edge,
                ] {
                    if t > 0.0 && t.is_finite() {
                        assert_eq!(q.at_least(v, t), exact >= t, "v {v:e}, d {d:e}, t {t:e}");
                    }
                }
            }
        }
        // Zero and values whose quotient is subnormal take the exact path.
        let q = Quotient::new(1e300);
        for v in [0.0, 1e-10, -3e-20] {
            assert_eq!(q.bin(v), bin(q.exact(v)));
        }
    }
}
