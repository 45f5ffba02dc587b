"""Device-side filtering: the first k released items the user does not own, in order."""

import pytest

from recsel.device import device_filter


def test_device_filter_drops_owned_items_and_keeps_the_order():
    released = ["a", "b", "c", "d", "e"]
    assert device_filter(released, {"b", "d"}, 2) == ["a", "c"]
    assert device_filter(released, ["b", "d"], 10) == ["a", "c", "e"]
    assert device_filter(released, [], 0) == []
    with pytest.raises(ValueError):
        device_filter(released, [], -1)
