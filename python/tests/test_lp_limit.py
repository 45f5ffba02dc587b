"""docs/scripts/lp_limit.py: the LP limit of any user-level eps-DP list of K (docs/utility.md, P9 and
"Lists") against lists whose mean Recall@K is exact, a closed form on symmetric populations, the
ends eps = 0 and eps -> inf, and the top-1 LP it generalises."""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog
from script_module import load_script

LP = load_script("docs/scripts/lp_limit.py")


def _matrix(sets, n_items):
    rows = [sorted(s) for s in sets]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.concatenate([np.array(r, dtype=np.int64) for r in rows])
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), n_items))


def _population(seed, users=5, items=7):
    """Random held-out sets over items 0..items-2; the last item is held out by nobody."""
    rng = np.random.default_rng(seed)
    sets = [set(rng.choice(items - 1, size=rng.integers(1, 5), replace=False).tolist())
            for _ in range(users)]
    return sets, _matrix(sets, items)


def _recall(lst, t, k):
    return len(set(lst) & t) / min(k, len(t))


def _krr_oracle(lists, sets, k, eps):
    """k-ary randomised response over fixed lists: each user's 'true' list is the best one for its
    held-out set (an oracle), shown with weight e^eps, every other list with weight 1. Every
    output has probability e^eps/Z or 1/Z for every user: eps-DP in the history, whatever it is."""
    z = math.exp(eps) + len(lists) - 1
    probs, means = [], []
    for t in sets:
        r = [_recall(lst, t, k) for lst in lists]
        best = int(np.argmax(r))
        p = np.ones(len(lists)) / z
        p[best] = math.exp(eps) / z
        probs.append(p)
        means.append(float(p @ r))
    return float(np.mean(means)), np.array(probs)


def _em_subsets(items, sets, k, eps):
    """The exponential mechanism over every k-subset with score |S & T_u| in [0, k]: weights
    exp(eps/(2k) score), eps-DP in the history (the oracle reads T_u)."""
    subsets = list(itertools.combinations(range(items), k))
    probs, means = [], []
    for t in sets:
        r = np.array([_recall(s, t, k) for s in subsets])
        w = np.exp(eps / (2 * k) * np.array([len(set(s) & t) for s in subsets]))
        p = w / w.sum()
        probs.append(p)
        means.append(float(p @ r))
    return float(np.mean(means)), np.array(probs)


def _assert_dp(probs, eps):
    """Every output's probability within e^eps across every pair of users (the mechanisms' proof)."""
    assert probs.max(0).max() > 0
    assert np.all(probs.max(0) <= math.exp(eps) * probs.min(0) * (1 + 1e-12))


def _best_fixed_list(items, sets, k):
    return max(np.mean([_recall(s, t, k) for t in sets]) for s in itertools.combinations(range(items), k))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_lp_bounds_lists_whose_recall_is_exact(seed, k):
    sets, T = _population(seed)
    items = T.shape[1]
    fixed = [list(s) for s in itertools.combinations(range(items), k)]
    few = [list(range(i, i + k)) for i in range(0, items - k + 1, k)]
    for eps in [0.25, 0.5, 1.0, 2.0, 4.0]:
        lp = LP.lp_limit(T, eps, k)
        mechs = {"best fixed list": _best_fixed_list(items, sets, k)}
        for name, (mean, probs) in {
            "krr over a few fixed lists": _krr_oracle(few, sets, k, eps),
            "krr over every list": _krr_oracle(fixed, sets, k, eps),
            "em over every list": _em_subsets(items, sets, k, eps),
        }.items():
            _assert_dp(probs, eps)
            mechs[name] = mean
        for name, mean in mechs.items():
            assert lp >= mean - 1e-7, (eps, k, name, lp, mean)
        assert lp <= 1 + 1e-9


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_lp_is_attained_at_both_ends(seed, k):
    sets, T = _population(seed)
    items = T.shape[1]
    # eps = 0: A = K and c_o <= min(1, a_o), so the LP is the best fixed list, attained.
    assert LP.lp_limit(T, 0.0, k) == pytest.approx(_best_fixed_list(items, sets, k), abs=1e-7)
    # eps -> inf: every user's own best list (Recall 1), which krr over every list nearly attains.
    fixed = [list(s) for s in itertools.combinations(range(items), k)]
    krr, _ = _krr_oracle(fixed, sets, k, 20.0)
    assert krr > 1 - 1e-6
    assert LP.lp_limit(T, 20.0, k) == pytest.approx(krr, abs=1e-6)


def _symmetric_closed_form(n, s, k, m, eps):
    """Users = every s-subset of n items. By symmetry a_o = A/n is optimal (the LP is convex and
    invariant under item permutations), so the LP is the maximum over A in [m e^-eps, m] of
    min(s min(1, e^eps A/n), m - A + s A/n, min(k, s)) / min(k, s): a concave piecewise-linear
    function, maximal at an end or where two of its lines cross."""
    cap = min(k, s)
    e = math.exp(eps)
    lines = [(0.0, s * e / n), (float(s), 0.0), (float(m), -(1 - s / n)), (float(cap), 0.0)]

    def g(a):
        return min(min(s, s * e * a / n), m - a * (1 - s / n), cap) / cap

    lo, hi = m / e, float(m)
    cands = [lo, hi]
    for (a0, b0), (a1, b1) in itertools.combinations(lines, 2):
        if b0 != b1:
            x = (a1 - a0) / (b0 - b1)
            if lo <= x <= hi:
                cands.append(x)
    return max(g(a) for a in cands)


@pytest.mark.parametrize(
    "n,s,k,m", [(6, 1, 1, 1), (6, 1, 2, 2), (6, 2, 3, 3), (5, 2, 2, 2), (6, 2, 2, 4), (6, 1, 2, 6), (6, 3, 2, 4)]
)
def test_the_lp_equals_its_closed_form_on_symmetric_populations(n, s, k, m):
    sets = [set(c) for c in itertools.combinations(range(n), s)]
    T = _matrix(sets, n)
    for eps in [0.1, 0.5, 1.0, 2.0, 4.0]:
        assert LP.lp_limit(T, eps, k, m) == pytest.approx(_symmetric_closed_form(n, s, k, m, eps), abs=1e-7)
    if (n, s, k, m) == (6, 1, 1, 1):  # the top-1 value: krr over the n items attains it
        assert _symmetric_closed_form(n, s, k, m, 1.0) == pytest.approx(math.e / (math.e + n - 1))


def _old_top1(T, eps):
    """The top-1 LP as docs/utility.md P9 (b) states it: t_u <= e^eps a(T_u), t_u <= 1 - A + a(T_u)."""
    held = np.flatnonzero(np.asarray(T.sum(0)).ravel())
    T = T[:, held].tocsr()
    U, N = T.shape
    e = np.exp(eps)
    c = np.concatenate([np.zeros(N), -np.ones(U) / U, [0.0]])
    eye = sp.identity(U, format="csr")
    col = sp.csr_matrix(np.ones((U, 1)))
    A_ub = sp.vstack([sp.hstack([-e * T, eye, 0 * col]), sp.hstack([-T, eye, col])]).tocsr()
    b_ub = np.concatenate([np.zeros(U), np.ones(U)])
    A_eq = sp.csr_matrix(np.concatenate([np.ones(N), np.zeros(U), [-1.0]])[None, :])
    bounds = [(0, None)] * (N + U) + [(np.exp(-eps), 1.0)]
    r = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[0.0], bounds=bounds, method="highs")
    assert r.status == 0
    return -r.fun


@pytest.mark.parametrize("seed", range(6))
def test_lists_of_one_are_the_top1_lp(seed):
    _, T = _population(seed, users=12, items=10)
    for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]:
        assert LP.lp_limit(T, eps) == pytest.approx(_old_top1(T, eps), abs=1e-8)


def _device_filtered(released, owned, sets, k, eps):
    """krr over fixed released lists (the oracle picks each user's best after filtering); the
    device shows the first k items of the release the user does not own."""
    z = math.exp(eps) + len(released) - 1
    means = []
    for h, t in zip(owned, sets):
        r = [_recall([o for o in lst if o not in h][:k], t, k) for lst in released]
        p = np.ones(len(released)) / z
        p[int(np.argmax(r))] = math.exp(eps) / z
        means.append(float(p @ r))
    return float(np.mean(means))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_released_m_bounds_lists_filtered_on_the_device(seed):
    sets, T = _population(seed, users=6, items=7)
    rng = np.random.default_rng(100 + seed)
    owned = [set(rng.choice([o for o in range(7) if o not in t], size=2, replace=False).tolist())
             for t in sets]
    k, m = 2, 4
    released = [list(p) for p in itertools.permutations(range(7), m)][::37]
    for eps in [0.0, 0.5, 1.0, 2.0]:
        dev = _device_filtered(released, owned, sets, k, eps)
        assert LP.lp_limit(T, eps, k, m) >= dev - 1e-7


def test_lists_shown_as_released_do_not_bound_device_filtering():
    # Two users own each other's held-out item; one public ranking [0, 1] filtered on the device
    # shows each its held-out item: Recall@1 = 1 at eps = 0, above any list of 1 shown as released.
    T = _matrix([{1}, {0}], 2)
    dev = _device_filtered([[0, 1]], [{0}, {1}], [{1}, {0}], 1, 0.0)
    assert dev == 1.0
    assert LP.lp_limit(T, 0.0, 1) == pytest.approx(0.5)
    assert LP.lp_limit(T, 0.0, 1, 2) == pytest.approx(1.0)


def test_fewer_released_than_shown_is_refused():
    _, T = _population(1)
    with pytest.raises(ValueError):
        LP.lp_limit(T, 1.0, 3, 2)
