"""The sparse vector, the threshold search, the unknown-threshold selection and the utility
bounds from Python (docs/sparse-vector.md, docs/bounds.md): the library's guarantees reported,
the answers' rates against the library's exact pass probability, the command line's numbers."""

import json
import math

import numpy as np
import pytest

import recsel


def test_the_exact_oracle_stream_stops_at_the_first_above_and_reports_its_guarantee():
    sv = recsel.SparseVector(0.5, 0.5, 2.0, 4, seed=1)
    assert sv.guarantee.epsilon == 2.0 and sv.guarantee.delta == 0.0
    answers = []
    while not sv.stopped and sv.asked < 4:
        answers.append(sv.test_percentile(0.999 if sv.asked == 2 else 0.001))
    assert sv.asked == len(answers)
    assert answers[-1] or sv.asked == 4
    if sv.stopped:
        with pytest.raises(recsel.RecselError, match="stopped"):
            sv.test_percentile(0.5)
    with pytest.raises(recsel.RecselError, match="eps0"):
        recsel.SparseVector(0.0, 0.5, 1.0, 3)


def test_the_first_answer_is_above_with_the_pass_probability():
    # Theorem 4.4: a far-below first query stops the stream with probability pi(p) exactly.
    n, p = 4000, 0.2
    pi = recsel.SparseVector(0.5, 0.5, 2.0, 2, seed=0).pass_probability(p)
    above = sum(recsel.SparseVector(0.5, 0.5, 2.0, 2, seed=s).test_percentile(p) for s in range(n))
    se = math.sqrt(pi * (1 - pi) / n)
    assert abs(above / n - pi) < 5 * se, (above / n, pi)
    # Power: the probability at 1.3 epsilon is outside the same interval.
    wrong = recsel.SparseVector(0.5, 0.5, 2.6, 2, seed=0).pass_probability(p)
    assert abs(above / n - wrong) > 5 * se, (above / n, wrong)


def test_estimated_queries_run_the_callable_m_times_and_exceptions_propagate():
    calls = []

    def q(seed):
        calls.append(seed)
        return 5.0 + np.random.default_rng(seed).laplace(scale=2.0)

    sv = recsel.SparseVector(0.5, 0.5, 3.0, 5, samples=50, seed=2)
    assert sv.guarantee.delta > 0.0
    sv.test(q, 100.0)
    assert len(calls) == 50 and len(set(calls)) == 50
    assert sv.test_count(50) in (True, False)

    def bad(seed):
        raise KeyError("boom")

    if not sv.stopped:
        with pytest.raises(KeyError):
            sv.test(bad, 0.0)


def test_threshold_search_and_unknown_threshold_selection():
    def score(seed):
        return 1.0 + np.random.default_rng(seed).laplace(scale=1 / 0.5)

    grid = [6.0, 4.0, 2.0, 0.0, -2.0]
    s = recsel.search_threshold(score, grid, eps0=0.5, percentile=0.5, epsilon=2.0,
                                samples=300, seed=3)
    assert s.runs == 300
    assert s.threshold is None or s.threshold in grid
    assert s.guarantee.epsilon == pytest.approx(2.0)
    # Seeded: the same release twice.
    assert s == recsel.search_threshold(score, grid, eps0=0.5, percentile=0.5, epsilon=2.0,
                                        samples=300, seed=3)

    def run(seed):
        rng = np.random.default_rng(seed)
        lr = float(rng.choice([0.01, 0.1, 1.0]))
        return lr, -abs(lr - 0.1) * 5 + rng.laplace(scale=1 / 0.5)

    out = recsel.select_unknown_threshold(run, grid, gamma=0.1, eps0=0.5, percentile=0.5,
                                          epsilon=2.0, samples=300, seed=4)
    assert out.candidate is None or out.candidate in (0.01, 0.1, 1.0)
    assert out.runs >= 300
    # The search's guarantee plus the known threshold's 2 eps0 (Theorem 4.7, composition).
    assert out.guarantee.epsilon == pytest.approx(2.0 + 2 * 0.5)
    with pytest.raises(recsel.RecselError, match="decreasing"):
        recsel.search_threshold(score, [0.0, 1.0], eps0=0.5, percentile=0.5, epsilon=2.0,
                                samples=10, seed=1)


def test_bounds_match_the_command_line(run_cli):
    b = recsel.bounds([3, 2, 1, 0], [2, 1.5, 1, 0.5], eps=0.5, beta=0.1)
    cli = json.loads(run_cli("bounds", "--scores", "3,2,1,0", "--sens", "2,1.5,1,0.5",
                             "--eps", "0.5", "--beta", "0.1", "--json").stdout)
    for key in ["k", "epsilon", "beta", "log_term", "best", "random", "rnm", "gem",
                "gem_at_best", "mgem", "gem_worse_than_rnm", "gem_worse_than_random",
                "best_bound"]:
        assert b[key] == cli[key], key
    with pytest.raises(recsel.RecselError, match="epsilon"):
        recsel.bounds([1, 0], [1, 1], eps=-1)


def test_the_margin_mechanism_is_a_registry_mechanism(run_cli):
    # rs-margin (Theorem 5.2's margin mechanism) is sampled like any registry mechanism, with the
    # command line's counts, and its (eps, delta) guarantee is listed.
    q, d = [1.0, 0.5, 0.0, 0.25], [1.0, 2.0, 0.5, 1.0]
    params = {"gamma": 0.2, "max_runs": 30, "delta0": 1e-3}
    py = recsel.sample("rs-margin", q, d, 1.0, n=5000, seed=9, **params)
    cli = json.loads(run_cli("sample", "--mech", "rs-margin", "--eps", "1", "--scores",
                             "1,0.5,0,0.25", "--sens", "1,2,0.5,1", "--n", "5000", "--seed", "9",
                             "--gamma", "0.2", "--max-runs", "30", "--delta0", "0.001",
                             "--json").stdout)
    assert py.tolist() == cli["counts"]
    m = next(m for m in recsel.mechanisms() if m["name"] == "rs-margin")
    assert m["private"] is True and "delta" in m["guarantee"]


def test_the_smoothing_is_settable_and_its_default_keeps_delta_small():
    # Algorithm 4's default smoothing c = 2 sqrt(m) (the library's): delta of ten queries at
    # eps0 = 0.5, m = 200, eta = 0.5 is at most 1e-6; c = 1 gives about 0.10 (power).
    default = recsel.SparseVector(0.5, 0.5, 3.0, 10, samples=200, slack=0.5, seed=1)
    explicit = recsel.SparseVector(0.5, 0.5, 3.0, 10, samples=200, slack=0.5,
                                   smoothing=2 * math.sqrt(200), seed=1)
    one = recsel.SparseVector(0.5, 0.5, 3.0, 10, samples=200, slack=0.5, smoothing=1.0, seed=1)
    assert default.guarantee.delta <= 1e-6
    assert default.guarantee == explicit.guarantee
    assert one.guarantee.delta > 0.05, one.guarantee
    with pytest.raises(recsel.RecselError, match="smoothing"):
        recsel.SparseVector(0.5, 0.5, 3.0, 10, samples=200, smoothing=0.0)
    with pytest.raises(recsel.RecselError, match="samples"):
        recsel.SparseVector(0.5, 0.5, 3.0, 10, smoothing=1.0)

    def score(seed):
        return 1.0 + np.random.default_rng(seed).laplace(scale=1 / 0.5)

    grid = [6.0, 4.0, 2.0, 0.0, -2.0]
    args = dict(eps0=0.5, percentile=0.5, epsilon=2.0, samples=200, seed=3)
    s = recsel.search_threshold(score, grid, **args)
    s1 = recsel.search_threshold(score, grid, smoothing=1.0, **args)
    assert s.guarantee.delta < s1.guarantee.delta

    def run(seed):
        return 0, score(seed)

    u = recsel.select_unknown_threshold(run, grid, gamma=0.1, **args)
    u1 = recsel.select_unknown_threshold(run, grid, gamma=0.1, smoothing=1.0, **args)
    assert u.guarantee.delta < u1.guarantee.delta
