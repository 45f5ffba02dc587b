//! Summaries of a sample: the mean and its standard error.

/// Mean of `values` and the standard error of that mean: the sample standard deviation (n − 1 in
/// the denominator) over √n. The standard error is 0 for one value; both are NaN for none.
pub fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, (var / n).sqrt())
}
