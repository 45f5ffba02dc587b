"""recsel from Python: differentially private top-1 recommendation.

The package wraps the recsel Rust library (the same code as the ``recsel`` command line) through
the extension module :mod:`recsel._native`. Arrays go in and come out as numpy arrays; user rows
are scipy.sparse matrices (users x items, the items each user has); errors are raised as
:class:`RecselError` carrying the library's message. Long calls release the GIL and use every core.

Example::

    >>> import numpy as np, recsel
    >>> q, d = np.array([1.0, 0.5, 0.0]), np.array([1.0, 2.0, 0.5])
    >>> recsel.sample("gem", q, d, 1.0, n=1000, seed=7).sum()
    1000

See docs/python.md in the repository for the whole API and :mod:`recsel.ray` for running
``recsel select`` on a Ray cluster.
"""

from __future__ import annotations

import json as _json
import secrets as _secrets
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _native
from ._native import (
    PartitionResult,
    PercentileSketch,
    Recommender,
    RecselError,
    SelectConfig,
    Sensitivities,
    UserRows,
)

__all__ = [
    "RecselError",
    "device_filter",
    "device_rank",
    "Model",
    "UserRows",
    "Sensitivities",
    "SelectConfig",
    "PercentileSketch",
    "PartitionResult",
    "Recommender",
    "mechanisms",
    "mechanism_params",
    "select",
    "sample",
    "select_batch",
    "audit",
    "sensitivities",
    "user_rows",
    "read_table",
    "select_private_candidates",
    "tune",
    "evaluate",
    "private_statistic",
    "duff_law",
    "SparseVector",
    "search_threshold",
    "select_unknown_threshold",
    "bounds",
]

__version__ = _native.__version__

from .device import device_filter, device_rank  # noqa: E402
from .candidates import select_private_candidates  # noqa: E402  (needs _seed below at call time)
from .sparse_vector import (  # noqa: E402  (needs _seed below at call time)
    SparseVector,
    search_threshold,
    select_unknown_threshold,
)


def _seed(seed: Optional[int]) -> int:
    """The given seed, or one from OS entropy below 2^63 (as the command line draws it)."""
    if seed is None:
        return _secrets.randbits(63)
    if seed < 0:
        raise RecselError(f"seed must be a non-negative integer, got {seed}")
    return int(seed)


def _vec(x: Any, what: str) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise RecselError(f"{what} must be one-dimensional, got shape {a.shape}")
    return a


def mechanisms() -> List[Dict[str, Any]]:
    """The mechanism registry: one dict per mechanism.

    Keys: ``name``, ``guarantee`` (in words), ``private``, ``params`` (the names of the parameters
    it reads besides epsilon), ``parameters`` (their declarations, as :func:`mechanism_params`
    gives them), ``summary``, ``audit_reference`` (deliberately non-private references kept for the
    auditor; not part of ``all``).

    Example::

        >>> [m["name"] for m in recsel.mechanisms()][:3]
        ['rnm', 'pf', 'em']
    """
    return list(_native.mechanisms_list())


def mechanism_params() -> List[Dict[str, Any]]:
    """Every parameter the mechanisms declare besides epsilon: the keyword arguments that
    :func:`sample`, :func:`select`, :func:`select_batch`, :func:`audit`, :class:`Recommender` and
    :func:`recsel.ray.select` accept for them (the command line's ``--gamma`` and friends).

    Keys: ``name``, ``doc``, ``kind`` (``real``, ``integer`` or ``choice``), ``default``,
    ``requirement`` (in words) and ``choices``.

    Example::

        >>> [p["name"] for p in recsel.mechanism_params()]
        ['gamma', 'beta', 'eta', 'c', 'chooser', 'draws']
    """
    return list(_native.mechanism_params())


def sample(
    mech: str,
    scores: Sequence[float],
    sens: Sequence[float],
    eps: float,
    *,
    n: int,
    seed: Optional[int] = None,
    secure: bool = False,
    **params: Any,
) -> np.ndarray:
    """Runs ``mech`` ``n`` times on one selection problem; returns how often each candidate won.

    The same function as ``recsel sample``: with the same arguments and ``seed`` the counts equal
    ``recsel sample --mech M --eps E --scores ... --sens ... --n N --seed S --json``. ``params`` are
    the mechanism parameters (:func:`mechanism_params`: ``gamma``, ``beta``, ``chooser``, ...);
    ``secure=True`` uses the exact discrete path with OS randomness (no seed).

    Example::

        >>> recsel.sample("rnm", [1.0, 0.0], [1.0, 1.0], 1.0, n=10, seed=3)
        array([..., ...], dtype=uint64)
    """
    return _native.sample(
        mech, _vec(scores, "scores"), _vec(sens, "sens"), float(eps), int(n), _seed(seed),
        bool(secure), params or None,
    )


def select_batch(
    mech: str,
    scores: Any,
    sens: Any,
    eps: float,
    *,
    seed: int,
    user_ids: Optional[Sequence[int]] = None,
    eps_index: int = 0,
    trial: int = 0,
    secure: bool = False,
    **params: Any,
) -> np.ndarray:
    """One selection per row of ``scores`` (users x candidates); returns the chosen columns.

    ``sens`` is one row of sensitivities shared by every user, or one per score (same shape as
    ``scores``). Row i draws from the stream of (mechanism, ``eps_index``, user, ``trial``) of
    ``seed``, with user ``user_ids[i]`` (default: i) — the stream ``recsel select --seed S`` uses
    for that user at the ε of index ``eps_index`` of its grid in trial ``trial``. Rows are processed
    in parallel with the GIL released.

    Example::

        >>> q = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
        >>> recsel.select_batch("gem", q, [1.0, 1.0, 1.0], 2.0, seed=1)
        array([0, 1])
    """
    q = np.ascontiguousarray(scores, dtype=np.float64)
    if q.ndim != 2:
        raise RecselError(f"scores must be two-dimensional (users x candidates), got shape {q.shape}")
    d = np.ascontiguousarray(sens, dtype=np.float64).reshape(-1)
    users = None if user_ids is None else np.ascontiguousarray(user_ids, dtype=np.uint64)
    return _native.select_batch(
        mech, q, d, float(eps), _seed(seed), users, int(eps_index), int(trial), bool(secure),
        params or None,
    )


def select(
    mech: str,
    scores: Sequence[float],
    sens: Sequence[float],
    eps: float,
    *,
    seed: Optional[int] = None,
    secure: bool = False,
    **params: Any,
) -> int:
    """One private selection: the index of the chosen candidate.

    Draws from the stream of user 0, trial 0 (the first selection of :func:`sample` and of
    :func:`select_batch` with the same seed).

    Example::

        >>> recsel.select("mgem", [1.0, 0.2, 0.1], [0.5, 0.5, 0.5], 4.0, seed=11)
        0
    """
    q = _vec(scores, "scores").reshape(1, -1)
    return int(select_batch(mech, q, sens, eps, seed=_seed(seed), secure=secure, **params)[0])


def audit(
    mech: str,
    eps: float,
    scores: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
    sens: Sequence[float] = (0.2, 1.0, 0.5, 2.0, 1.0),
    *,
    samples: int = 200_000,
    alpha: float = 0.01,
    seed: Optional[int] = None,
    pairs: Optional[str] = None,
    secure: bool = False,
    **params: Any,
) -> Dict[str, Any]:
    """Empirical lower bounds on ``mech``'s ε (``recsel audit``), as a dict.

    Audits the built-in neighbouring pairs around ``(scores, sens)``, or the pairs of the JSON
    file ``pairs`` (defaults as ``recsel audit``'s). The dict has the report's fields (``mechanism``, ``epsilon``, ``guarantee``,
    ``results`` per pair and direction, ``max_eps_lb``, ``violation``, ...) and ``verdict``.

    Example::

        >>> r = recsel.audit("rnm", 1.0, samples=2000, seed=1)   # == recsel audit ... --json
        >>> r["verdict"], r["max_eps_lb"] <= 1.0
        ('consistent', True)
    """
    text = _native.audit(
        mech, [float(x) for x in scores], [float(x) for x in sens], float(eps), int(samples),
        float(alpha), _seed(seed), pairs, bool(secure), params or None,
    )
    return _json.loads(text)


def user_rows(x: Any, n_items: Optional[int] = None) -> UserRows:
    """User rows (users x items; a nonzero marks an item the user has) from a scipy.sparse matrix,
    a dense 0/1 array, or :class:`UserRows` (returned as is).

    Example::

        >>> import scipy.sparse as sp
        >>> recsel.user_rows(sp.csr_matrix(np.eye(3))).n_users
        3
    """
    if isinstance(x, UserRows):
        return x
    import scipy.sparse as sp

    m = sp.csr_matrix(x, dtype=np.float32, copy=True)
    m.eliminate_zeros()
    m.sum_duplicates()
    m.sort_indices()
    rows, cols = m.shape
    if n_items is not None and cols != n_items:
        raise RecselError(f"the user rows have {cols} item columns, the model {n_items}")
    return UserRows(
        np.ascontiguousarray(m.indptr, dtype=np.int64),
        np.ascontiguousarray(m.indices, dtype=np.int64),
        int(rows),
        int(cols),
    )


class Model:
    """A fitted recommender (SANSA, EASE or popularity): ``fit`` on user rows, ``load`` a model
    directory written by ``recsel fit``/``recsel select``, ``score`` user rows.

    Example::

        >>> import scipy.sparse as sp
        >>> X = sp.random(200, 30, density=0.1, format="csr", random_state=0)
        >>> m = recsel.Model.fit(X, method="ease", l2=10.0)
        >>> m.score(X[:5]).shape
        (5, 30)
    """

    def __init__(self, native: "_native.Model"):
        self._native = native

    @classmethod
    def fit(
        cls,
        train: Any,
        *,
        method: str = "exact",
        l2: float = 200.0,
        density: float = 0.01,
        item_ids: Optional[Sequence[str]] = None,
        cap_seed: Optional[int] = None,
        calibration: Any = None,
        **training_privacy: Any,
    ) -> "Model":
        """Fits on training rows (users x items, scipy.sparse or dense 0/1).

        ``method``: ``exact`` (SANSA, sparse Cholesky), ``icf`` (SANSA, incomplete Cholesky),
        ``ease`` (dense) or ``popular``; ``l2`` is λ, ``density`` the SANSA factors' target density.

        The other keywords are ``recsel fit``'s DP-training options with ``_`` for ``-``
        (``_native.training_privacy_options()`` lists them with their defaults): ``dp_epsilon``
        fits with user-level (ε, δ)-DP for the training users (``ease`` or ``exact``), and
        ``dp_delta``, ``dp_cap``, ``dp_shift``, ``dp_secure`` tune it. A user with more than
        ``dp_cap`` interactions keeps the ones chosen by ``cap_seed`` and the user's own items
        (``None``: the seed ``recsel fit`` uses without ``--split-seed``). The guarantee is
        :attr:`training_privacy`, and :meth:`save` writes it into ``model.json`` as
        ``recsel fit --dp-epsilon`` does (docs/training-privacy.md).

        ``dp_shift_grid`` (with ``dp_select_epsilon``) fits every shift of the grid from the one
        noisy Gram matrix and keeps the one the exponential mechanism chooses by the Recall@20
        of ``calibration`` (full rows of users neither trained on nor served, same columns; each
        split into history and held-out items by ``cap_seed``): :attr:`shift_choice` records it.

        Example::

            >>> m = recsel.Model.fit(X, method="ease", l2=10.0, dp_epsilon=2.0)
            >>> round(m.training_privacy["epsilon"], 9), m.training_privacy["population"]
            (2.0, 'training users')
        """
        rows = user_rows(train)
        indptr, indices, (r, c) = rows.arrays()
        ids = None if item_ids is None else [str(i) for i in item_ids]
        cal: Dict[str, Any] = {}
        if calibration is not None:
            cp, ci, (cr, _) = user_rows(calibration).arrays()
            cal = {"calibration_indptr": cp, "calibration_indices": ci, "calibration_rows": cr}
        return cls(
            _native.Model.fit(
                indptr,
                indices,
                r,
                c,
                method,
                float(l2),
                float(density),
                ids,
                cap_seed,
                **cal,
                **training_privacy,
            )
        )

    @classmethod
    def load(cls, path: str) -> "Model":
        """Loads a model directory (``model.json`` with its weight files)."""
        return cls(_native.Model.load(str(path)))

    def save(self, path: str) -> None:
        """Writes a model directory that ``recsel`` and :meth:`load` read (scipy reads
        ``w.npz`` with ``scipy.sparse.load_npz``)."""
        self._native.save(str(path))

    def save_release(self, path: str, train: Any, **options: Any) -> Dict[str, Any]:
        """Writes a model directory with its release artifact — the files ``recsel fit --out``
        writes, through the same library function — which ``recsel recommend``, ``recsel serve``
        and :class:`Recommender` serve. ``train`` are the rows the model was fitted on (as given to
        :meth:`fit`): the release's DP counts come from them (and, with
        ``release_statistics="exact-leaky"``, its clip ranges). The keywords are ``recsel fit``'s
        release options with ``_`` for ``-`` (``_native.release_options()``): ``count_epsilon``,
        ``count_cap``, ``history_cap``, ``release_statistics``, ``clip_range``,
        ``calibration_users``. Returns the release's privacy report as a dict
        (docs/privacy-report.md).

        Example::

            >>> m = recsel.Model.fit(X, method="exact", l2=10.0)
            >>> report = m.save_release("models/mine", X)
            >>> [t["population"] for t in report["totals"]]
            ['training users', 'calibration users']
        """
        rows = user_rows(train, self.n_items)
        indptr, indices, (r, c) = rows.arrays()
        return _json.loads(self._native.save_release(str(path), indptr, indices, r, c, **options))

    def score(self, users: Any) -> np.ndarray:
        """Scores of every item for each user row: a dense ``users x items`` float64 array.

        The items a user has are scored too (``recsel select`` leaves them out of the candidates).
        """
        return self._native.score(user_rows(users, self.n_items))

    @property
    def n_items(self) -> int:
        """Number of items."""
        return self._native.n_items

    @property
    def params(self) -> Dict[str, Any]:
        """``method``, ``l2`` and ``density``."""
        return dict(self._native.params)

    @property
    def item_ids(self) -> List[str]:
        """The item id of each column."""
        return list(self._native.item_ids)

    @property
    def training_privacy(self) -> Optional[Dict[str, Any]]:
        """The training users' guarantee of a DP fit, as ``model.json`` records it
        (``population``, ``unit``, ``epsilon``, ``delta``, ``mechanism``, ``note``), or ``None``
        for a model fitted without DP (its training data are treated as public)."""
        text = self._native.training_privacy_json
        return None if text is None else _json.loads(text)

    @property
    def shift_choice(self) -> Optional[Dict[str, Any]]:
        """The private choice of a DP fit's shift (``dp_shift_grid``): ``grid``, ``chosen`` and
        the calibration users' ``privacy`` entry, as ``model.json`` records it; ``None``
        otherwise."""
        text = self._native.shift_choice_json
        return None if text is None else _json.loads(text)

    def __repr__(self) -> str:
        p = self.params
        return f"recsel.Model({p['method']}, l2={p['l2']}, density={p['density']}, items={self.n_items})"


def sensitivities(
    model: Model,
    users: Any,
    *,
    lower: float = 1.0,
    upper: float = 99.0,
    floor: float = 1e-6,
    population: str = "all",
) -> Dict[str, np.ndarray]:
    """Per-item percentiles and sensitivities of ``model``'s scores over ``users``, exactly as
    ``recsel select`` computes them (without the users x items score matrix).

    Returns a dict of arrays: ``lower`` (p1), ``upper`` (p99), ``delta`` = max(upper - lower,
    floor), ``counts`` (scores each percentile ran over). ``population`` is ``all`` or
    ``without-item`` (only the users who do not have the item).

    Example::

        >>> s = recsel.sensitivities(m, X)
        >>> bool((s["delta"] > 0).all())
        True
    """
    s = _native.sensitivities(
        model._native, user_rows(users, model.n_items), float(lower), float(upper), float(floor),
        population,
    )
    return {"lower": s.lower, "upper": s.upper, "delta": s.delta, "counts": s.counts}


def read_table(out: str, name: str, kind: str = "arrow") -> Any:
    """A result table written by ``recsel select`` (or :func:`recsel.ray.select`) into ``out``:
    ``mse``, ``users``, ``items`` or ``rules``, as a pyarrow table (``kind="arrow"``) or a polars
    DataFrame (``kind="polars"``), read from its Parquet copy.

    Example::

        >>> recsel.read_table("out/select-synthetic-small", "mse").num_rows
        ...
    """
    import os

    path = os.path.join(str(out), f"{name}.parquet")
    if kind == "arrow":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if kind == "polars":
        import polars as pl

        return pl.read_parquet(path)
    raise RecselError(f"kind must be 'arrow' or 'polars', got '{kind}'")


def tune(model: str, **options: Any) -> Dict[str, Any]:
    """``recsel tune``: choose, per ε and on the calibration users only, krr over a small public
    pool (with a public popularity prior on its argmax when that helps) or the most popular item
    (0-DP), and write ``tuning.json`` into the model folder (docs/utility.md). Keywords are
    ``recsel tune``'s options with ``_`` for ``-`` (``_native.tune_options()``): the data options
    ``recsel fit`` was given, ``eps``, ``sources``, ``pool_sizes``, ``margin``,
    ``prior_weights``, ``mech`` (the registry mechanisms whose own pool, clip range and prior are
    tuned too: ``"all"``, ``"none"`` or a list). Returns the tuning as a dict.

    Example::

        >>> t = recsel.tune("models/gowalla", format="lightgcn", path="data/gowalla")
        >>> [(r["epsilon"], r["candidates"]) for r in t["rows"]]
        ...
    """
    return _json.loads(_native.tune(model=str(model), **options))


def evaluate(out: Optional[str] = None, **options: Any) -> Dict[str, Any]:
    """``recsel evaluate``: hit@1 on held-out users of the free baselines, the non-private
    top-1 and every ε-DP mechanism with and without a tuned pool and prior, beside the limit
    (docs/utility.md). Keywords are ``recsel evaluate``'s options with ``_`` for ``-``
    (``_native.evaluate_options()``): ``model`` or ``folds``, the data options, ``eps``,
    ``mech``, ``pools``, ``clips``, ``prior_weights``, ``trials``. With ``out``, also writes the files ``recsel
    evaluate --out`` writes. Returns the table as a dict.

    Example::

        >>> t = recsel.evaluate(model="models/gowalla", format="lightgcn", path="data/gowalla")
        ...
    """
    return _json.loads(_native.evaluate(out=None if out is None else str(out), **options))


def private_statistic(
    values: Optional[Sequence[float]] = None,
    *,
    seed: Optional[int] = None,
    true_value_not_private: bool = False,
    **options: Any,
) -> Dict[str, Any]:
    """``recsel statistic``: one private median, quantile, count or clipped mean
    (docs/statistics.md). ``values`` is the column (a 1-D array); without it, the data options
    (``format`` and ``path``, or ``dataset``) name a data set whose column is each training
    user's number of interactions. Keywords are ``recsel statistic``'s
    options with ``_`` for ``-`` (``_native.statistic_options()``): ``statistic``, ``q``,
    ``at_least``, ``method`` (``duff``, ``em``, ``smooth-cauchy``, ``smooth-laplace``,
    ``laplace``), ``eps``, ``delta``, ``lo``, ``hi`` (the public range, required), ``points``,
    ``neighbours``. Returns a dict with ``value`` and ``guarantee``; with
    ``true_value_not_private=True`` also ``true_value_not_private``, the exact value, which is not
    private.

    Example::

        >>> r = recsel.private_statistic([3, 5, 5, 8, 40], lo=0, hi=100, eps=1.0, seed=7)
        >>> r["guarantee"]
        {'kind': 'pure', 'epsilon': 1.0}
    """
    arr = None if values is None else _vec(values, "values")
    text, truth = _native.private_statistic(arr, _seed(seed), **options)
    out = _json.loads(text)
    if true_value_not_private:
        out["true_value_not_private"] = truth
    return out


def duff_law(values: Sequence[float], **options: Any) -> tuple:
    """Duff's exact output law on ``values``: ``(grid, probabilities)`` as numpy arrays, with the
    options of :func:`private_statistic` (``statistic``, ``q``, ``lo``, ``hi``, ``points``,
    ``eps``, ``neighbours``)."""
    return _native.duff_law(_vec(values, "values"), **options)


def bounds(scores: Sequence[float], sens: Sequence[float], **options: Any) -> Dict[str, Any]:
    """``recsel bounds``: the high-probability lower bounds on the selected score of RNM, GEM and
    mGEM for one selection problem (docs/bounds.md), as a dict (the keys of ``recsel bounds
    --json``). Keywords are its options (``_native.bounds_options()``): ``eps`` (required),
    ``beta`` and ``flags`` (``paper`` or ``full``).

    Example::

        >>> recsel.bounds([1, 0.5, 0], [1, 2, 0.5], eps=1.0)["best_bound"]
        'rnm'
    """
    q = [float(x) for x in scores]
    d = [float(x) for x in sens]
    return _json.loads(_native.bounds(scores=q, sens=d, **options))
