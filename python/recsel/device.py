"""Device-side filtering (docs/serving.md, "Device-side filtering").

The server releases a list of m >= k items — a public list, which needs no history at all, or
a private list at the served user's eps — and the client drops the items the user already owns
and shows the first k. This runs on the user's device, which holds the history anyway: it is
post-processing of a released list and spends no eps.
"""

from __future__ import annotations

from typing import Iterable, List, Sequence


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
