"""Device-side filtering and scoring (docs/serving.md, "Device-side filtering", "Scoring on the
device").

The server releases a list of m >= k items — a public list, which needs no history at all, or
a private list at the served user's eps — and the client drops the items the user already owns
and shows the first k. This runs on the user's device, which holds the history anyway: it is
post-processing of a released list and spends no eps.

A device holding the release's model can instead score its own history and show the model's
top k not owned (``device_rank``): nothing is sent, so the served user spends no eps either; the
model's weights are then public, and protect the training users only as far as the fit does.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Sequence

import numpy as np


def device_filter(released: Sequence[str], owned: Iterable[str], k: int) -> List[str]:
    """The first ``k`` items of ``released`` that are not in ``owned``, in the released order."""
    if k < 0:
        raise ValueError(f"k must be at least 0, got {k}")
    mine = set(owned)
    out: List[str] = []
    for item in released:
        if len(out) == k:
            break
        if item not in mine:
            out.append(item)
    return out


def device_rank(model: Any, owned: Iterable[str], k: int) -> List[str]:
    """The ``k`` items of highest score for the history ``owned`` (item ids) under ``model`` (a
    :class:`recsel.Model`, e.g. ``recsel.Model.load`` of a release directory), owned items left
    out, best first (ties by column). Ids the model does not know are ignored. Fewer than ``k``
    items when the model has fewer unowned items."""
    if k < 0:
        raise ValueError(f"k must be at least 0, got {k}")
    import scipy.sparse as sp

    ids = model.item_ids
    column = {item: j for j, item in enumerate(ids)}
    cols = sorted({column[i] for i in owned if i in column})
    row = sp.csr_matrix(
        (np.ones(len(cols)), (np.zeros(len(cols), dtype=np.int64), cols)), shape=(1, len(ids))
    )
    scores = np.asarray(model.score(row)[0], dtype=np.float64).copy()
    scores[cols] = -np.inf
    order = np.argsort(-scores, kind="stable")[: min(k, len(ids) - len(cols))]
    return [ids[j] for j in order]
