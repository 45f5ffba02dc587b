"""recsel.select_private_candidates: the tuning example end to end, the reported guarantees, the
stopping rules' parameters and errors (docs/private-candidates.md)."""

import math

import numpy as np
import pytest

import recsel
from script_module import load_script



def _example():
    return load_script("python/examples/tune_dp_hyperparameter.py")


def test_the_tuning_example_selects_a_good_hyperparameter_privately():
    ex = _example()
    r = ex.main(seed=6, quiet=True)
    assert r["lam"] in ex.GRID
    assert r["runs"] >= 1
    # Truncated negative binomial with eta = 0.5: (2 + eta) eps0, pure.
    assert r["epsilon"] == pytest.approx(2.5 * r["eps0"])
    assert r["delta"] == 0.0
    assert "Papernot" in r["source"]
    assert r["epsilon"] < r["grid_epsilon"]
    # The selected model is on the plateau of good lam values, not among the noisy small ones.
    best = max(r["per_lam_test_accuracy"].values())
    assert r["test_accuracy"] > best - 0.05
    assert r["per_lam_test_accuracy"][r["lam"]] > r["per_lam_test_accuracy"][ex.GRID[0]] + 0.1


def _q(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(5))
    return c, c + rng.laplace(scale=2.0)


def test_guarantees_follow_the_theorems():
    e0 = 0.5
    g = lambda **kw: recsel.select_private_candidates(_q, eps0=e0, seed=1, **kw).guarantee
    assert g(stopping="geometric", gamma=0.1).epsilon == pytest.approx(3 * e0)
    assert g(stopping="tnb", eta=-0.5, gamma=0.1).epsilon == pytest.approx(1.5 * e0)
    assert g(stopping="poisson", mu=4.0).epsilon == pytest.approx(e0 + 4.0 * math.tanh(e0 / 2))
    assert g(stopping="fixed", runs=3).epsilon == pytest.approx(3 * e0)
    assert g(stopping="geometric", gamma=0.1, threshold=3.0).epsilon == pytest.approx(2 * e0)
    out = recsel.select_private_candidates(
        _q, stopping="geometric", gamma=0.1, eps0=e0, max_runs=50, seed=1
    )
    assert out.runs <= 50
    sources = [s.source for s in out.statements]
    assert any("3.5" in s for s in sources) and any("3.4" in s for s in sources)
    tail = next(s for s in out.statements if "3.4" in s.source)
    assert tail.delta == pytest.approx((1 + math.exp(3 * e0)) * 0.9 ** 50)
    approx = recsel.select_private_candidates(
        _q, stopping="geometric", gamma=0.1, eps0=e0, delta0=1e-6, seed=1
    ).guarantee
    assert approx.delta == pytest.approx(1e-6 / (0.1 + 0.9e-6))


def test_seeded_selections_repeat_and_unpack_as_four():
    a = recsel.select_private_candidates(_q, stopping="geometric", gamma=0.2, eps0=1.0, seed=5)
    b = recsel.select_private_candidates(_q, stopping="geometric", gamma=0.2, eps0=1.0, seed=5)
    assert a == b
    candidate, score, guarantee, runs = a[:4]
    assert candidate in range(5) and isinstance(score, float) and runs >= 1
    seen = {
        recsel.select_private_candidates(
            _q, stopping="geometric", gamma=0.2, eps0=1.0, seed=s
        ).runs
        for s in range(20)
    }
    assert len(seen) > 3


def test_a_threshold_never_reached_releases_bottom_within_the_budget():
    out = recsel.select_private_candidates(
        lambda s: ("x", 0.0), stopping="geometric", gamma=0.01, eps0=1.0, threshold=1.0,
        max_runs=7, seed=3,
    )
    assert out.candidate is None and out.score is None
    assert 1 <= out.runs <= 7


def test_the_secure_path_runs():
    out = recsel.select_private_candidates(
        _q, stopping="poisson", mu=3.0, eps0=0.5, secure=True
    )
    assert out.candidate is None or out.candidate in range(5)
    assert out.guarantee.epsilon == pytest.approx(0.5 + 3.0 * math.tanh(0.25))


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(stopping="geometric", eps0=1.0), "gamma"),
        (dict(stopping="geometric", gamma=0.1, eps0=-1.0), "eps0"),
        (dict(stopping="geometric", gamma=1.5, eps0=1.0), "gamma"),
        (dict(stopping="poisson", mu=2.0, eta=1.0, eps0=1.0), "eta"),
        (dict(stopping="tnb", gamma=0.1, eps0=1.0), "eta"),
        (dict(stopping="lottery", eps0=1.0), "lottery"),
        (dict(stopping="poisson", mu=2.0, eps0=1.0, threshold=0.0), "geometric"),
        (dict(stopping="geometric", gamma=0.1, eps0=1.0, max_runs=0), "max_runs"),
        (dict(stopping="geometric", gamma=0.1, eps0=1.0, delta0=1.0), "delta0"),
    ],
)
def test_bad_parameters_are_named(kwargs, needle):
    with pytest.raises(recsel.RecselError, match=needle):
        recsel.select_private_candidates(_q, seed=1, **kwargs)


def test_errors_of_fn_propagate_and_bad_returns_are_named():
    def boom(seed):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        recsel.select_private_candidates(boom, gamma=0.5, eps0=1.0, seed=1)
    with pytest.raises(recsel.RecselError, match="candidate, score"):
        recsel.select_private_candidates(lambda s: 3.0, gamma=0.5, eps0=1.0, seed=1)
    with pytest.raises(recsel.RecselError, match="callable"):
        recsel.select_private_candidates(3, gamma=0.5, eps0=1.0, seed=1)
