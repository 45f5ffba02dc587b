"""Private statistics from Python (docs/statistics.md): the same release as ``recsel statistic``,
the guarantee reported, the true value only when asked, and Duff's exact law."""

import json

import numpy as np
import pytest

import recsel
from recsel import _native


def test_private_statistic_matches_the_command_line(run_cli, tmp_path):
    values = [3.0, 5.0, 5.0, 8.0, 40.0, 41.0, 2.0]
    csv = tmp_path / "v.csv"
    csv.write_text("x\n" + "\n".join(str(v) for v in values) + "\n")
    for method in ["duff", "em", "smooth-cauchy", "smooth-laplace", "laplace"]:
        r = recsel.private_statistic(values, lo=0, hi=100, eps=1.0, method=method, seed=7)
        assert 0 <= r["value"] <= 100
        assert "true_value_not_private" not in r
        cli = json.loads(
            run_cli(
                "statistic", "--values", str(csv), "--column", "x", "--lo", "0", "--hi", "100",
                "--eps", "1", "--method", method, "--seed", "7", "--json",
            ).stdout
        )
        assert cli["value"] == r["value"]
        assert cli["guarantee"] == r["guarantee"]
    r = recsel.private_statistic(values, lo=0, hi=100, seed=1, true_value_not_private=True)
    assert r["true_value_not_private"] == 5.0
    assert r["guarantee"] == {"kind": "pure", "epsilon": 1.0}
    r = recsel.private_statistic(values, lo=0, hi=100, method="smooth-laplace", delta=1e-5, seed=1)
    assert r["guarantee"] == {"kind": "approx", "epsilon": 1.0, "delta": 1e-5}


def test_bad_parameters_raise_with_the_library_message():
    with pytest.raises(recsel.RecselError, match="-1"):
        recsel.private_statistic([1.0, 2.0], lo=0, hi=10, eps=-1, seed=1)
    with pytest.raises(recsel.RecselError, match="range"):
        recsel.private_statistic([1.0, 2.0], seed=1)
    with pytest.raises(recsel.RecselError, match="clipped mean"):
        recsel.private_statistic([1.0, 2.0], lo=0, hi=10, statistic="mean", method="em", seed=1)
    names = {o["name"] for o in _native.statistic_options()}
    assert {"statistic", "q", "method", "eps", "lo", "hi", "neighbours"} <= names


def test_duff_law_is_the_exponential_mechanism_over_distances():
    grid, p = recsel.duff_law([1.0, 2.0, 2.0, 3.0, 9.0], lo=0, hi=10, points=11, eps=2.0)
    assert len(grid) == len(p) == 11
    assert abs(p.sum() - 1) < 1e-12
    # The median 2.0 is at distance 0; 3.0 at distance 1 (one record moved onto it).
    assert p.argmax() == 2
    assert abs(p[3] / p[2] - np.exp(-1.0)) < 1e-12
