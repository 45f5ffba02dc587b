"""Model.save_release writes the release `recsel fit --out` writes, through the same library
function: `recsel recommend` serves it, `recsel privacy` reports the same report the call
returned, and the release options are the library's."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

import recsel
from recsel import _native

USERS, ITEMS = 400, 40


def _train(seed=0):
    """Training rows: item 0 and about 20% of the others per user; every item occurs."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(USERS):
        rows.append(sorted({0, u % ITEMS} | {j for j in range(1, ITEMS) if rng.random() < 0.2}))
    r, c = zip(*[(u, j) for u, row in enumerate(rows) for j in row])
    return sp.csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(USERS, ITEMS))


def test_release_options_are_the_fit_options(run_cli):
    """The keywords of save_release are `recsel fit`'s release options (one declaration)."""
    names = {o["name"] for o in _native.release_options()}
    assert {"count_epsilon", "count_cap", "history_cap", "release_statistics"} <= names
    help_text = run_cli("fit", "--help").stdout
    for name in names:
        assert f"--{name.replace('_', '-')}" in help_text, name


def test_python_writes_a_release_that_recommend_serves(tmp_path, run_cli):
    x = _train()
    ids = [f"i{j}" for j in range(ITEMS)]
    m = recsel.Model.fit(x, method="ease", l2=10.0, item_ids=ids)
    out = tmp_path / "m"
    report = m.save_release(out, x, count_epsilon=0.5)
    for f in ["model.json", "release.json", "calibration.npz", "privacy.json"]:
        assert (out / f).is_file(), f
    # The report names the counts' ε asked for and the training data as public (no DP fit).
    parts = {(p["part"], p["population"]): p for p in report["parts"]}
    assert parts[("popularity counts", "training users")]["epsilon"] == 0.5
    assert parts[("model weights", "training users")]["epsilon"] is None
    # recsel reads the same report, and serves a recommendation from the release.
    shown = json.loads(run_cli("privacy", "--model", out, "--json").stdout)
    assert shown["parts"] == report["parts"]
    rec = run_cli("recommend", "--model", out, "--mech", "mgem", "--eps", "1",
                  "--history", "i3,i17", "--seed", "1")
    assert rec.stdout.strip() in ids
    # A bad option is an error naming it, from the library's table.
    with pytest.raises(Exception, match="count epsilon"):
        m.save_release(tmp_path / "bad", x, count_epsilon=-1)
    # Rows of another shape are refused.
    with pytest.raises(Exception):
        m.save_release(tmp_path / "other", x[:, :10])
