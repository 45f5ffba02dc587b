//! Criterion benchmarks of the sparse kernels SANSA's fit keeps hand-written, each against the
//! sprs operation that would replace it (a kernel stays only where the library path is slower;
//! docs/design.md). Inputs are the fit's own matrices on the built-in synthetic data (1,500 items)
//! and, when `../shared/data` is present, on ml-1m-implicit (3,706 items, a nearly dense Gram
//! matrix).
//!
//! `cargo bench --bench sparse_kernels` measures, for each data set:
//! * `gram`: `XᵀX` lower triangle — recsel's parallel column kernel vs sprs `&Xᵀ * &X` (full
//!   product on one thread) cut to the lower triangle;
//! * `permute`: symmetric permutation of the regularised Gram matrix — recsel's lower-triangle
//!   kernel vs sprs `transform_mat_papt` on the full matrix (built with sprs `+` and a transpose),
//!   cut to the lower triangle;
//! * `residual`: UMR's squared residual norms `‖e_j − L k_j‖²` — recsel's accumulator kernel vs sprs
//!   `&L * &K`, then `− I` and column norms;
//! * `solve`: all columns of `L⁻¹` by forward substitution (UMR's exact start) — recsel's
//!   zero-skipping kernel vs sprs `lsolve_csc_dense_rhs`, both in parallel over columns.

use criterion::{criterion_group, criterion_main, Criterion};
use rayon::prelude::*;
use recsel::data::synthetic::SyntheticShape;
use recsel::data::{load::load_lightgcn, load_dataset, Csr, DataSource, NamedDataset};
use recsel::model::factor::{exact_cholesky, to_unit_ldl};
use recsel::model::gram::gram_lower;
use recsel::model::ordering::amd_ordering;
use recsel::model::sansa::add_diagonal_in_place;
use recsel::model::sparse::{permute_lower, SparseMat};
use recsel::model::umr::{residual_norms, umr_inverse, unit_lower_solve, UmrConfig};
use std::hint::black_box;
use std::time::Duration;

/// Keeps the entries on or below the diagonal of a CSC matrix.
fn lower_of(m: &SparseMat) -> SparseMat {
    let n = m.cols();
    let cols = (0..n)
        .map(|j| {
            let c = m.outer_view(j).unwrap();
            c.iter()
                .filter(|&(i, _)| i >= j)
                .map(|(i, &v)| (i as u32, v))
                .unzip()
        })
        .collect();
    recsel::model::sparse::from_columns(n, cols)
}

/// Whether two CSC matrices hold the same nonzero entries (recsel's Gram matrix stores the
/// diagonal of an unused item as an explicit zero).
fn same_entries(a: &SparseMat, b: &SparseMat) -> bool {
    let nz = |m: &SparseMat| -> Vec<(usize, usize, f64)> {
        m.iter()
            .filter(|(&v, _)| v != 0.0)
            .map(|(&v, (i, j))| (i as usize, j as usize, v))
            .collect()
    };
    a.shape() == b.shape() && nz(a) == nz(b)
}

/// sprs path for the Gram matrix: `Xᵀ X` by sprs's product, then the lower triangle.
fn gram_sprs(x: &Csr) -> SparseMat {
    let x64: SparseMat = x.map(|&v| v as f64);
    let xt = x64.transpose_view().to_csr(); // items × users, by rows
    let g = &xt * &x64; // CSR items × items
    lower_of(&g.transpose_into()) // symmetric: its transpose is the CSC of the same matrix
}

/// sprs path for the permutation: the full symmetric matrix, `P A Pᵀ`, then the lower triangle.
fn permute_sprs(a_lower: &SparseMat, fwd: &[usize]) -> SparseMat {
    let upper = a_lower.transpose_view().to_csc();
    let mut full = a_lower + &upper;
    for (j, mut col) in full.outer_iterator_mut().enumerate() {
        for (i, v) in col.iter_mut() {
            if i == j {
                *v *= 0.5; // the diagonal was counted twice
            }
        }
    }
    let perm = sprs::PermOwnedI::new(fwd.iter().map(|&i| i as u32).collect());
    lower_of(&sprs::transform_mat_papt(full.view(), perm.view()))
}

/// sprs path for the residual norms: `L K − I` by sprs's product, then column norms.
fn residual_sprs(l: &SparseMat, k: &SparseMat) -> Vec<f64> {
    let r = l * k;
    r.outer_iterator()
        .enumerate()
        .map(|(j, col)| {
            let mut s = 0.0;
            let mut diag = false;
            for (i, &v) in col.iter() {
                let x = if i == j {
                    diag = true;
                    v - 1.0
                } else {
                    v
                };
                s += x * x;
            }
            if !diag {
                s += 1.0;
            }
            s
        })
        .collect()
}

/// Nonzeros of every column of `L⁻¹`, through `solve(j, x, entries)`.
fn inverse_nnz(n: usize, solve: impl Fn(usize, &mut [f64], &mut Vec<(u32, f64)>) + Sync) -> usize {
    (0..n)
        .into_par_iter()
        .map_init(
            || (vec![0.0f64; n], Vec::new()),
            |(x, e), j| {
                e.clear();
                solve(j, x, e);
                e.len()
            },
        )
        .sum()
}

fn lsolve_sprs(l: &SparseMat, j: usize, x: &mut [f64], entries: &mut Vec<(u32, f64)>) {
    x.iter_mut().for_each(|v| *v = 0.0);
    x[j] = 1.0;
    sprs::linalg::trisolve::lsolve_csc_dense_rhs(l.view(), &mut *x).unwrap();
    for (i, &v) in x.iter().enumerate().skip(j + 1) {
        if v != 0.0 {
            entries.push((i as u32, v));
        }
    }
}

fn datasets() -> Vec<(String, Csr, f64, f64)> {
    let src = DataSource::Named {
        dataset: NamedDataset::Synthetic(SyntheticShape::Small),
        data_dir: "data".into(),
    };
    let mut out = vec![(
        "synthetic-small".to_string(),
        load_dataset(&src, 42).unwrap().train,
        50.0,
        0.05,
    )];
    let ml1m =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/ml-1m-implicit");
    if ml1m.is_dir() {
        let ds = load_lightgcn(&ml1m, "ml-1m-implicit").unwrap();
        out.push(("ml-1m-implicit".to_string(), ds.train, 200.0, 0.05));
    } else {
        eprintln!("SKIPPED ml-1m-implicit: ../shared/data not found beside the checkout");
    }
    out
}

fn kernels(c: &mut Criterion) {
    for (name, x, l2, density) in datasets() {
        let mut g = c.benchmark_group(name.as_str());
        g.measurement_time(Duration::from_secs(4)).sample_size(10);
        // Same results both ways (checked once, outside the timing).
        let gram = gram_lower(&x);
        assert!(same_entries(&gram, &gram_sprs(&x)), "{name}: gram");
        g.bench_function("gram/recsel", |b| b.iter(|| black_box(gram_lower(&x))));
        g.bench_function("gram/sprs", |b| b.iter(|| black_box(gram_sprs(&x))));

        let mut a = gram;
        add_diagonal_in_place(&mut a, l2);
        let (fwd, inv) = amd_ordering(&a).unwrap();
        let ap = permute_lower(a.clone(), &inv);
        assert!(
            same_entries(&ap, &permute_sprs(&a, &fwd)),
            "{name}: permute"
        );
        g.bench_function("permute/recsel", |b| {
            b.iter(|| black_box(permute_lower(a.clone(), &inv)))
        });
        g.bench_function("permute/sprs", |b| {
            b.iter(|| black_box(permute_sprs(&a, &fwd)))
        });
        g.bench_function("permute/clone-only", |b| b.iter(|| black_box(a.clone())));

        let n = ap.cols();
        let max_nnz = ((density * (n * n) as f64) as usize).max(n);
        let (mut l, _) = exact_cholesky(&ap, Some(max_nnz - n)).unwrap();
        to_unit_ldl(&mut l);
        let (k, _) = umr_inverse(&l, max_nnz, UmrConfig::default());
        let (r1, r2) = (residual_norms(&l, &k), residual_sprs(&l, &k));
        for (p, q) in r1.iter().zip(&r2) {
            assert!(
                (p - q).abs() <= 1e-9 * (1.0 + p.abs()),
                "{name}: residual {p} vs {q}"
            );
        }
        g.bench_function("residual/recsel", |b| {
            b.iter(|| black_box(residual_norms(&l, &k)))
        });
        g.bench_function("residual/sprs", |b| {
            b.iter(|| black_box(residual_sprs(&l, &k)))
        });

        let hand = |j: usize, x: &mut [f64], e: &mut Vec<(u32, f64)>| unit_lower_solve(&l, j, x, e);
        let lib = |j: usize, x: &mut [f64], e: &mut Vec<(u32, f64)>| lsolve_sprs(&l, j, x, e);
        assert_eq!(inverse_nnz(n, hand), inverse_nnz(n, lib), "{name}: solve");
        g.bench_function("solve/recsel", |b| {
            b.iter(|| black_box(inverse_nnz(n, hand)))
        });
        g.bench_function("solve/sprs", |b| b.iter(|| black_box(inverse_nnz(n, lib))));
        g.finish();
    }
}

criterion_group!(benches, kernels);
criterion_main!(benches);
