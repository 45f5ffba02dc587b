"""Selection from private candidates: release the best of a random number of runs of any
differentially private algorithm, with the total guarantee the theorems give.

The library's :mod:`recsel.mechanisms.private_candidates` (docs/private-candidates.md), called with
a Python function as the private algorithm Q.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from . import _native

__all__ = ["select_private_candidates", "PrivateSelection", "Guarantee"]


class Guarantee(NamedTuple):
    """An (epsilon, delta)-DP statement and the theorem it comes from."""

    epsilon: float
    delta: float
    source: str


class PrivateSelection(NamedTuple):
    """What :func:`select_private_candidates` released.

    Unpacks as ``candidate, score, guarantee, runs`` (then ``statements``).
    """

    #: The released run's candidate, or ``None`` for ⊥ (a known threshold never reached, or no
    #: run at all under Poisson stopping).
    candidate: Any
    #: Its score, or ``None`` for ⊥.
    score: Optional[float]
    #: The guarantee of the release: the statement with the smallest delta (pure when one
    #: exists), then the smallest epsilon.
    guarantee: Guarantee
    #: How many times ``fn`` ran.
    runs: int
    #: Every statement the theorems give for these parameters, strongest delta first.
    statements: List[Guarantee]


def select_private_candidates(
    fn: Callable[[int], Tuple[Any, float]],
    *,
    stopping: str = "geometric",
    eps0: float,
    gamma: Optional[float] = None,
    eta: Optional[float] = None,
    mu: Optional[float] = None,
    runs: Optional[int] = None,
    threshold: Optional[float] = None,
    max_runs: Optional[int] = None,
    delta0: float = 0.0,
    seed: Optional[int] = None,
    secure: bool = False,
) -> PrivateSelection:
    """Runs ``fn`` a random number of times and releases its best run, privately.

    ``fn(seed)`` is one run of a private algorithm Q — for example: pick a hyperparameter, train a
    DP model, score it with a DP validation metric — and must be (``eps0``, ``delta0``)-DP with
    respect to the data it reads. It receives a fresh 63-bit integer seed per run (seed your own
    generator with it, e.g. ``np.random.default_rng(seed)``) and returns ``(candidate, score)``.
    The release is the run with the highest score (ties uniformly at random; a NaN score ranks
    below every number), or with ``threshold`` the first run scoring at least ``threshold``.

    Stopping rules (how many runs; Liu & Talwar 2019, Papernot & Steinke 2022):

    =========================  ==================  =========================================
    ``stopping``               parameters          guarantee for pure eps0-DP runs
    =========================  ==================  =========================================
    ``"geometric"``            ``gamma``           3 eps0 (Theorem 3.2); E runs = 1/gamma
    ``"tnb"``                  ``eta``, ``gamma``  (2 + eta) eps0 (truncated negative binomial)
    ``"poisson"``              ``mu``              eps0 + mu tanh(eps0/2); E runs = mu
    ``"fixed"``                ``runs``            runs x eps0 (composition only)
    =========================  ==================  =========================================

    ``threshold`` (geometric only, Theorem 3.1): 2 eps0, the first run at or above it, else ⊥.
    ``max_runs`` = T (hard stop): at most T runs; the pure statement of Theorem 3.5 (geometric),
    composition (T x eps0), and the (eps, delta) statement of Theorem 3.4 are all listed in
    ``statements``. With ``delta0 > 0`` every statement gains the chance that one run falls in
    its delta0 part. docs/private-candidates.md has the statements and their proofs.

    ``seed`` makes the selection reproducible (default: from OS entropy). ``secure=True`` draws the
    number of runs and the seeds from the OS-seeded ChaCha20 generator with exact samplers (what
    ``fn`` does with its seed is up to ``fn``).

    Returns a :class:`PrivateSelection` ``(candidate, score, guarantee, runs, statements)``.
    Exceptions raised by ``fn`` propagate (an exception is an output too: a Q whose failures
    depend on the data is not private).

    Example::

        >>> import numpy as np, recsel
        >>> def q(seed):
        ...     rng = np.random.default_rng(seed)
        ...     lr = rng.choice([0.01, 0.1, 1.0])
        ...     return lr, -abs(lr - 0.1) + rng.laplace(scale=1 / 0.5)
        >>> out = recsel.select_private_candidates(q, stopping="geometric", gamma=0.1, eps0=0.5, seed=1)
        >>> out.guarantee.epsilon
        1.5
    """
    from . import _seed

    cand, score, guarantee, n, statements = _native.select_private_candidates(
        fn,
        stopping,
        float(eps0),
        None if gamma is None else float(gamma),
        None if eta is None else float(eta),
        None if mu is None else float(mu),
        None if runs is None else int(runs),
        None if threshold is None else float(threshold),
        None if max_runs is None else int(max_runs),
        float(delta0),
        _seed(seed),
        bool(secure),
    )
    return PrivateSelection(
        cand, score, Guarantee(*guarantee), int(n), [Guarantee(*s) for s in statements]
    )
