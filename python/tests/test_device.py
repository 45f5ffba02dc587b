"""Device-side filtering (the first k released items the user does not own, in order) and
scoring (the model's top k for the history, owned items left out)."""

import numpy as np
import pytest
import scipy.sparse as sp

import recsel
from recsel.device import device_filter, device_rank


def test_device_filter_drops_owned_items_and_keeps_the_order():
    released = ["a", "b", "c", "d", "e"]
    assert device_filter(released, {"b", "d"}, 2) == ["a", "c"]
    assert device_filter(released, ["b", "d"], 10) == ["a", "c", "e"]
    assert device_filter(released, [], 0) == []
    with pytest.raises(ValueError):
        device_filter(released, [], -1)


@pytest.mark.parametrize("method", ["popular", "ease"])
def test_device_rank_is_the_models_top_k_without_the_owned_items(method):
    # Item j is taken by 30 - j of 300 users and items come in two clusters (users of even rows
    # take items 0-9, odd rows 10-19, the rest spread): with `popular` the owned items i0-i2 are
    # the model's top 3, so leaving them out changes the list.
    items = 30
    ids = [f"i{j}" for j in range(items)]
    rng = np.random.default_rng(3)
    users, cols = [], []
    for j in range(items):
        pool = np.arange(j % 2 if j < 20 else 0, 300, 2 if j < 20 else 1)
        for u in rng.choice(pool, 30 - j, replace=False):
            users.append(u)
            cols.append(j)
    X = sp.csr_matrix((np.ones(len(users)), (users, cols)), shape=(300, items))
    m = recsel.Model.fit(X, method=method, l2=5.0, item_ids=ids)
    owned = ["i0", "i1", "i2"]
    s = m.score(sp.csr_matrix(([1.0] * 3, ([0] * 3, [0, 1, 2])), shape=(1, items)))[0]
    ranking = [ids[j] for j in np.argsort(-s, kind="stable")]
    if method == "popular":
        assert ranking[:3] == owned, "the owned items are not the unfiltered top 3"
    expected = [i for i in ranking if i not in owned]
    assert device_rank(m, owned + ["not-in-the-model"], 10) == expected[:10]
    assert recsel.device_rank(m, owned, items) == expected
    assert device_rank(m, owned, 0) == []
    with pytest.raises(ValueError):
        device_rank(m, owned, -1)
