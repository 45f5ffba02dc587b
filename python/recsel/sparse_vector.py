"""The sparse vector for differentially private queries, the threshold search and the selection
without a known threshold (Liu & Talwar 2019, §4; docs/sparse-vector.md), called with Python
functions as the queries.

Each function here is the library's own (:mod:`recsel.mechanisms.private_candidates::sparse_vector`):
the noise, the percentile estimates and the guarantees are computed there.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

from . import _native
from .candidates import Guarantee

__all__ = ["SparseVector", "ThresholdSearch", "UnknownThresholdSelection",
           "search_threshold", "select_unknown_threshold"]


class SparseVector:
    """One stream of the sparse vector on (``eps0``, ``delta0``)-DP queries: answers "above"
    (``True``) or "below" (``False``) to each query until the first "above", at most
    ``max_queries`` times, for the guarantee :attr:`guarantee` whatever the number of queries
    asked.

    Without ``samples`` the percentile of each query is known exactly (Algorithm 3, pure
    ``epsilon``-DP): ask with :meth:`test_percentile`. With ``samples`` = m, each query runs m
    times and its percentile is estimated (Algorithm 4, (epsilon, delta)-DP with the ``slack``
    eta of the coupling and the ``smoothing`` c of the estimate ``ln((S + c)/(m - S + c))``,
    ``None`` for the library's default 2 sqrt(m), which keeps delta at most 1e-6 for ten queries
    at the usual (m, eta); see docs/sparse-vector.md): ask with :meth:`test` (``fn(seed) -> score`` and the query's threshold
    tau) or :meth:`test_count`. A query is "above" when ``P(score >= tau)`` reaches
    ``percentile``.

    ``pass_probability(p)`` is the probability that a query of percentile p is answered above
    (Theorem 4.4: the stream stops at a far-below query with at most this probability, and goes
    past a far-above one with at most one minus it).

    Example::

        >>> sv = recsel.SparseVector(eps0=0.5, percentile=0.5, epsilon=2.0, max_queries=10, seed=1)
        >>> [sv.test_percentile(p) for p in (0.001, 0.001, 0.999)]
        [False, False, True]
    """

    def __init__(
        self,
        eps0: float,
        percentile: float,
        epsilon: float,
        max_queries: int,
        *,
        samples: Optional[int] = None,
        slack: float = 0.5,
        smoothing: Optional[float] = None,
        delta0: float = 0.0,
        seed: Optional[int] = None,
    ) -> None:
        from . import _seed

        self._s = _native.SparseVector(
            float(eps0),
            float(percentile),
            float(epsilon),
            int(max_queries),
            None if samples is None else int(samples),
            float(slack),
            None if smoothing is None else float(smoothing),
            float(delta0),
            _seed(seed),
        )

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee of the stream (pure for the exact oracle)."""
        return Guarantee(*self._s.guarantee)

    @property
    def statements(self) -> list:
        """Every statement that holds, strongest delta first."""
        return [Guarantee(*s) for s in self._s.statements]

    @property
    def asked(self) -> int:
        """Queries answered so far."""
        return self._s.asked

    @property
    def stopped(self) -> bool:
        """Whether the stream has answered "above" (it answers nothing more)."""
        return self._s.stopped

    def pass_probability(self, p: float) -> float:
        """The probability that a query of percentile ``p`` is answered "above"."""
        return self._s.pass_probability(float(p))

    def test_percentile(self, p: float) -> bool:
        """Algorithm 3: a query whose exact percentile is ``p``."""
        return self._s.test_percentile(float(p))

    def test(self, fn: Callable[[int], float], tau: float) -> bool:
        """Algorithm 4: runs ``fn(seed) -> score`` m times (a fresh seed per run) and answers
        whether its percentile at ``tau`` reaches the target. Exceptions of ``fn`` propagate."""
        return self._s.test(fn, float(tau))

    def test_count(self, count: int) -> bool:
        """Algorithm 4 on runs the caller made: ``count`` of the m runs scored at least tau."""
        return self._s.test_count(int(count))


class ThresholdSearch(NamedTuple):
    """What :func:`search_threshold` released."""

    #: The threshold found, or ``None`` (⊥: no grid point passed).
    threshold: Optional[float]
    #: Its index in the grid, or ``None``.
    index: Optional[int]
    #: How many times ``fn`` ran (m, shared by every grid point).
    runs: int
    guarantee: Guarantee


def search_threshold(
    fn: Callable[[int], float],
    grid: Sequence[float],
    *,
    eps0: float,
    percentile: float,
    epsilon: float,
    samples: int,
    slack: float = 0.5,
    smoothing: Optional[float] = None,
    delta0: float = 0.0,
    seed: Optional[int] = None,
) -> ThresholdSearch:
    """Algorithm 5 (Theorem 4.6): the first threshold of the strictly decreasing ``grid`` at
    which the percentile of ``fn``'s score reaches ``percentile``, tested by the estimated sparse
    vector on ``samples`` runs of ``fn(seed) -> score`` (an (eps0, delta0)-DP algorithm), with
    slack ``slack`` and smoothing ``smoothing`` (``None``: the library's default) as in
    :class:`SparseVector`.

    Example::

        >>> def q(seed):
        ...     return 0.7 + np.random.default_rng(seed).laplace(scale=1 / 0.5)
        >>> recsel.search_threshold(q, [2.0, 1.0, 0.5, 0.0], eps0=0.5, percentile=0.5,
        ...                         epsilon=2.0, samples=200, seed=3).threshold
    """
    from . import _seed

    t, i, runs, g = _native.search_threshold(
        fn, [float(x) for x in grid], float(eps0), float(percentile), float(epsilon),
        int(samples), float(slack), None if smoothing is None else float(smoothing),
        float(delta0), _seed(seed),
    )
    return ThresholdSearch(t, i, runs, Guarantee(*g))


class UnknownThresholdSelection(NamedTuple):
    """What :func:`select_unknown_threshold` released."""

    #: The released run's candidate, or ``None`` (⊥).
    candidate: Any
    #: Its score, or ``None``.
    score: Optional[float]
    #: The threshold the search found, or ``None``.
    threshold: Optional[float]
    #: Runs of ``fn``: the search's m and the selection's.
    runs: int
    guarantee: Guarantee


def select_unknown_threshold(
    fn: Callable[[int], Tuple[Any, float]],
    grid: Sequence[float],
    *,
    gamma: float,
    eps0: float,
    percentile: float,
    epsilon: float,
    samples: int,
    slack: float = 0.5,
    smoothing: Optional[float] = None,
    max_runs: Optional[int] = None,
    delta0: float = 0.0,
    seed: Optional[int] = None,
) -> UnknownThresholdSelection:
    """Theorem 4.7: selection from private candidates without a known threshold — the threshold
    search of :func:`search_threshold` on the scores of ``fn(seed) -> (candidate, score)``, then
    the known-threshold selection (Theorem 3.1: stop with probability ``gamma`` after each run
    below it, at most ``max_runs``) at the threshold found. The guarantee composes the two.
    Exceptions of ``fn`` propagate."""
    from . import _seed

    c, s, t, runs, g = _native.select_unknown_threshold(
        fn, [float(x) for x in grid], float(gamma), float(eps0), float(percentile),
        float(epsilon), int(samples), float(slack),
        None if smoothing is None else float(smoothing),
        None if max_runs is None else int(max_runs),
        float(delta0), _seed(seed),
    )
    return UnknownThresholdSelection(c, s, t, runs, Guarantee(*g))
