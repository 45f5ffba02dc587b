"""Tune a differentially private model's hyperparameter with selection from private candidates.

The model: L2-regularised logistic regression made private by output perturbation (Chaudhuri,
Monteleoni & Sarwate 2011): with feature vectors of norm at most 1, the minimiser of
``mean(log(1 + exp(-y x.w))) + (lam/2) |w|^2`` moves by at most ``2 / (n lam)`` in L2 norm when one
training record is replaced, so adding noise b with density proportional to
``exp(-eps |b| / (2 / (n lam)))`` makes the weights eps-DP. The hyperparameter lam trades the noise
(large for small lam) against underfitting (large lam): which lam is best depends on the data, and
looking at every candidate's validation score is itself a privacy cost.

One run of the private algorithm Q: pick lam uniformly from a grid, train the DP model with
``eps_train``, score it by its validation accuracy with Laplace noise (``eps_val``; one validation
record changes the correct count by at most 1). Q is ``eps0 = eps_train + eps_val``-DP (basic
composition). ``recsel.select_private_candidates`` runs Q a random number of times and releases the
best (lam, model) with a total guarantee of ``2.5 eps0`` (truncated negative binomial, eta = 0.5) —
whereas scoring every lam of the grid and releasing the best would cost ``len(GRID) x eps0``.

Run: ``python python/examples/tune_dp_hyperparameter.py`` (a second or two).
"""

from __future__ import annotations

import numpy as np

import recsel

GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0]


def make_data(n: int, d: int, rng: np.random.Generator):
    """Features on the unit ball, labels in {-1, +1} from a logistic model."""
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1, keepdims=True))
    w_true = rng.normal(size=d) * 3.0
    p = 1.0 / (1.0 + np.exp(-x @ w_true))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return x, y


def train_logreg(x: np.ndarray, y: np.ndarray, lam: float, iters: int = 30) -> np.ndarray:
    """The regularised logistic regression minimiser, by Newton's method."""
    n, d = x.shape
    w = np.zeros(d)
    for _ in range(iters):
        m = y * (x @ w)
        s = 1.0 / (1.0 + np.exp(m))  # sigma(-m)
        grad = -(x.T @ (y * s)) / n + lam * w
        h = (x.T * (s * (1.0 - s))) @ x / n + lam * np.eye(d)
        step = np.linalg.solve(h, grad)
        w -= step
        if np.linalg.norm(step) < 1e-10:
            break
    return w


def dp_logreg(x, y, lam, eps, rng):
    """Output perturbation: the minimiser plus noise with density proportional to
    exp(-eps |b| / Delta), Delta = 2 / (n lam): |b| ~ Gamma(d, Delta / eps), direction uniform."""
    n, d = x.shape
    w = train_logreg(x, y, lam)
    delta = 2.0 / (n * lam)
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    return w + direction * rng.gamma(shape=d, scale=delta / eps)


def accuracy(w, x, y) -> float:
    return float(np.mean(np.sign(x @ w) == y))


def dp_accuracy(w, x, y, eps, rng) -> float:
    """Validation accuracy with Laplace noise on the correct count (sensitivity 1)."""
    correct = float(np.sum(np.sign(x @ w) == y))
    return (correct + rng.laplace(scale=1.0 / eps)) / len(y)


def main(seed: int = 2024, quiet: bool = False) -> dict:
    data_rng = np.random.default_rng(seed)
    x, y = make_data(6000, 10, data_rng)
    xtr, ytr = x[:3000], y[:3000]
    xval, yval = x[3000:4500], y[3000:4500]
    xte, yte = x[4500:], y[4500:]
    eps_train, eps_val = 0.4, 0.1
    eps0 = eps_train + eps_val

    def q(run_seed: int):
        """One run of the private algorithm: (eps_train + eps_val)-DP."""
        rng = np.random.default_rng(run_seed)
        lam = GRID[rng.integers(len(GRID))]
        w = dp_logreg(xtr, ytr, lam, eps_train, rng)
        return (lam, w), dp_accuracy(w, xval, yval, eps_val, rng)

    out = recsel.select_private_candidates(
        q, stopping="tnb", eta=0.5, gamma=0.05, eps0=eps0, seed=seed
    )
    lam, w = out.candidate
    # References, not private: each lam's DP model averaged over noise draws, on the test set.
    ref_rng = np.random.default_rng(seed + 1)
    per_lam = {
        l: float(np.mean([accuracy(dp_logreg(xtr, ytr, l, eps_train, ref_rng), xte, yte)
                          for _ in range(20)]))
        for l in GRID
    }
    result = {
        "lam": lam,
        "test_accuracy": accuracy(w, xte, yte),
        "validation_score": out.score,
        "runs": out.runs,
        "epsilon": out.guarantee.epsilon,
        "delta": out.guarantee.delta,
        "source": out.guarantee.source,
        "eps0": eps0,
        "grid_epsilon": len(GRID) * eps0,
        "per_lam_test_accuracy": per_lam,
        "nonprivate_test_accuracy": accuracy(train_logreg(xtr, ytr, 1e-4), xte, yte),
    }
    if not quiet:
        print(f"one run of Q: eps0 = {eps0} (training {eps_train} + validation {eps_val})")
        print(f"selected lam = {lam} after {out.runs} runs; validation score {out.score:.3f}, "
              f"test accuracy {result['test_accuracy']:.3f}")
        print(f"guarantee of the release: ({out.guarantee.epsilon}, {out.guarantee.delta})-DP "
              f"[{out.guarantee.source}]")
        print(f"scoring all {len(GRID)} values and releasing the best: "
              f"{result['grid_epsilon']:.1f}-DP by composition")
        print("mean test accuracy of each lam's DP model (20 noise draws, not private):")
        for l, a in per_lam.items():
            print(f"  lam = {l:<7g} {a:.3f}{'   <- selected' if l == lam else ''}")
        print(f"non-private model: {result['nonprivate_test_accuracy']:.3f}")
    return result


if __name__ == "__main__":
    main()
