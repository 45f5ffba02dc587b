"""Model.fit with the DP-training options is `recsel fit --dp-epsilon`: the library's option table
fills the keywords, the library's fit computes the model and its training entry, and the entry a
saved model records in model.json is the one the command line records."""

import json
import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp

import recsel
from recsel import _native

USERS, ITEMS = 300, 30


def _defaults():
    """The DP options' defaults as the library declares them (the tests restate none)."""
    return {o["name"]: o["default"] for o in _native.training_privacy_options()}


def _rows(users=USERS, items=ITEMS, seed=0):
    """Per user, a training row (item 0 and about 20% of the others) and one held-out item;
    every item occurs in some training row."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for u in range(users):
        row = sorted({0, u % items} | {j for j in range(1, items) if rng.random() < 0.2})
        rest = [j for j in range(items) if j not in row]
        train.append(row)
        test.append([rest[int(rng.integers(len(rest)))]] if rest else [])
    return train, test


def _matrix(train, items=ITEMS):
    data = [(u, j) for u, row in enumerate(train) for j in row]
    r, c = zip(*data)
    return sp.csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(len(train), items))


def _same_entry(a, b):
    """Two training entries agree: every field equal, ε up to the last bit (the library reads
    JSON reals with serde_json's default parser, which can be one unit in the last place off)."""
    assert a.keys() == b.keys()
    assert {k: v for k, v in a.items() if k != "epsilon"} == \
        {k: v for k, v in b.items() if k != "epsilon"}
    assert a["epsilon"] == pytest.approx(b["epsilon"], rel=1e-15)
    return True


def _lightgcn(tmp_path, train, test):
    """The rows as a LightGCN file pair (`user item item ...`)."""
    d = tmp_path / "data"
    d.mkdir()
    for name, rows in (("train.txt", train), ("test.txt", test)):
        lines = [" ".join(map(str, [u, *row])) for u, row in enumerate(rows) if row]
        (d / name).write_text("\n".join(lines) + "\n")
    return d


def _catalogue(tmp_path):
    """Every item id as a declared public catalogue (`recsel fit --catalogue`): a Python fit takes
    its matrix's columns as declared, so the CLI fit is given the same universe."""
    path = tmp_path / "catalogue.txt"
    path.write_text("".join(f"{j}\n" for j in range(ITEMS)))
    return path


def test_dp_fit_records_the_guarantee_asked():
    X = _matrix(_rows()[0])
    d = _defaults()
    m = recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=2.0)
    tp = m.training_privacy
    assert tp["population"] == "training users"
    # ε comes back through the zCDP conversion and its inverse.
    assert tp["epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert tp["delta"] == float(d["dp_delta"])
    # The default contribution bound is the library's, named in the unit and the mechanism.
    cap = int(d["dp_cap"])
    if d["dp_bound"] == "weight":
        assert tp["unit"] == f"user (all interactions, weighted to the contribution of {cap})"
        assert "Gaussian on the user-weighted Gram matrix" in tp["mechanism"]
    else:
        assert tp["unit"] == f"user (at most {cap} interactions kept)"
        assert "Gaussian on the Gram matrix" in tp["mechanism"]
    # Every option reaches the library: δ, the cap, the shift and the secure noise.
    s = recsel.Model.fit(X, method="exact", l2=5.0, density=0.5, dp_epsilon=1.0, dp_delta=1e-6,
                         dp_cap=5, dp_shift=2.0, dp_secure=True, dp_bound="sample").training_privacy
    assert s["delta"] == 1e-6 and s["unit"] == "user (at most 5 interactions kept)"
    assert "on the Gram matrix" in s["mechanism"] and "user-weighted" not in s["mechanism"]
    assert s["mechanism"].startswith("exact discrete Gaussian")
    assert "at least 2 × the positive-definite floor" in s["note"]
    # The secure path rounds σ² up: ε never above the one asked, and only just below it.
    assert 1.0 - 1e-5 < s["epsilon"] <= 1.0
    # Power: a 30% larger ε is recorded as such, not as the 2 asked above.
    hi = recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=2.6).training_privacy
    assert hi["epsilon"] == pytest.approx(2.6, rel=1e-9)
    assert hi["epsilon"] != pytest.approx(tp["epsilon"], rel=0.1)


def test_dp_fit_adds_noise_and_the_plain_fit_is_unchanged(tmp_path):
    X = _matrix(_rows()[0])
    plain = recsel.Model.fit(X, method="ease", l2=5.0)
    assert plain.training_privacy is None
    # No DP option, or every one None: the same plain fit, bit for bit, with no training entry.
    same = recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=None, dp_delta=None,
                            dp_cap=None, dp_shift=None, dp_secure=None)
    assert np.array_equal(plain.score(X[:20]), same.score(X[:20]))
    plain.save(tmp_path / "plain")
    assert "training_privacy" not in json.loads((tmp_path / "plain" / "model.json").read_text())
    # A DP fit draws fresh noise (from the OS) each time; the plain fit draws none.
    a = recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=1.0).score(X[:20])
    b = recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=1.0).score(X[:20])
    assert not np.array_equal(a, plain.score(X[:20]))
    assert not np.array_equal(a, b)


def test_dp_options_without_epsilon_and_bad_values_are_refused():
    X = _matrix(_rows()[0])
    for opts in (dict(dp_cap=5), dict(dp_delta=1e-6), dict(dp_secure=True), dict(dp_shift=2.0)):
        with pytest.raises(recsel.RecselError, match="set up a DP fit: give dp-epsilon too"):
            recsel.Model.fit(X, method="ease", l2=5.0, **opts)
    with pytest.raises(recsel.RecselError, match="dp-epsilon"):
        recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=-1.0)
    with pytest.raises(recsel.RecselError, match="dp-shift"):
        recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilon=1.0, dp_shift=0.5)
    with pytest.raises(recsel.RecselError, match="a DP fit takes --method ease or exact, not icf"):
        recsel.Model.fit(X, method="icf", l2=5.0, dp_epsilon=1.0)
    with pytest.raises(recsel.RecselError, match="unknown fit option 'dp_epsilom'"):
        recsel.Model.fit(X, method="ease", l2=5.0, dp_epsilom=1.0)


def test_training_privacy_options_are_recsel_fits(run_cli):
    """The keywords are `recsel fit`'s --dp-* flags, from the one option table."""
    names = {o["name"] for o in _native.training_privacy_options()}
    help_text = run_cli("fit", "--help").stdout
    flags = set(re.findall(r"^\s+--(dp-[a-z-]+)", help_text, flags=re.M))
    assert names == {f.replace("-", "_") for f in flags}
    assert "dp_epsilon" in names


@pytest.mark.parametrize("opts", [
    dict(dp_epsilon=2.0),
    dict(dp_epsilon=0.5, dp_delta=1e-6, dp_cap=5, dp_shift=2.0, dp_secure=True),
])
def test_saved_dp_model_records_what_recsel_fit_records(tmp_path, run_cli, opts):
    """model.json's training entry of a Python DP fit equals `recsel fit`'s for the same options
    on the same items (λ = 1 is below the positive-definite floor, so the entry's λ used depends
    on the number of items and σ, both of which must agree)."""
    train, test = _rows()
    data = _lightgcn(tmp_path, train, test)
    flags = []
    for k, v in opts.items():
        flags += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    run_cli("fit", "--format", "lightgcn", "--path", data, "--method", "ease", "--l2", "1",
            "--catalogue", _catalogue(tmp_path), "--out", tmp_path / "cli", *flags)
    cli = json.loads((tmp_path / "cli" / "model.json").read_text())
    assert cli["n_items"] == ITEMS

    X = _matrix(train)
    m = recsel.Model.fit(X, method="ease", l2=1.0, item_ids=[str(j) for j in range(ITEMS)],
                         **opts)
    m.save(tmp_path / "py")
    py = json.loads((tmp_path / "py" / "model.json").read_text())
    assert _same_entry(py["training_privacy"], cli["training_privacy"])
    assert _same_entry(m.training_privacy, cli["training_privacy"])
    assert "λ used" in py["training_privacy"]["note"]
    # Load and pickle (through the model files) keep the entry.
    assert _same_entry(recsel.Model.load(tmp_path / "py").training_privacy, cli["training_privacy"])
    assert _same_entry(pickle.loads(pickle.dumps(m)).training_privacy, cli["training_privacy"])
    # Power: another cap, or another number of items, records another entry.
    other = dict(opts, dp_cap=7)
    assert recsel.Model.fit(X, method="ease", l2=1.0, **other).training_privacy != \
        cli["training_privacy"]
    fewer = _matrix([[j for j in row if j < ITEMS - 5] or [0] for row in train], ITEMS - 5)
    assert recsel.Model.fit(fewer, method="ease", l2=1.0, **opts).training_privacy != \
        cli["training_privacy"]


def test_recommender_of_a_dp_model_reports_the_training_entry(tmp_path, run_cli):
    """The Recommender on a DP-fitted release (`recsel fit --dp-epsilon --out`: a Python fit has
    no release artifact) shows the training users' DP entry of model.json for the model weights,
    and Model.load reads the same entry."""
    train, test = _rows()
    data = _lightgcn(tmp_path, train, test)
    d = tmp_path / "model"
    run_cli("fit", "--format", "lightgcn", "--path", data, "--method", "ease", "--l2", "1",
            "--catalogue", _catalogue(tmp_path), "--dp-epsilon", "2", "--out", d)
    entry = json.loads((d / "model.json").read_text())["training_privacy"]
    assert _same_entry(recsel.Model.load(d).training_privacy, entry)

    rec = recsel.Recommender(str(d), "mgem", 1.0, secure=True)
    report = json.loads(rec.privacy_report_json)
    weights = next(p for p in report["parts"] if p["part"] == "model weights")
    assert weights["epsilon"] == pytest.approx(entry["epsilon"], rel=1e-15)
    assert weights["epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert weights["delta"] == entry["delta"] and weights["unit"] == entry["unit"]
    assert "training data treated as public" not in rec.privacy_report
    assert entry["mechanism"] in rec.privacy_report


def test_a_shift_grid_is_chosen_privately_on_calibration_rows(tmp_path):
    """``dp_shift_grid`` fits every shift from one noisy Gram matrix and keeps the one the
    exponential mechanism chooses on the calibration rows: the model records the grid and the
    chosen shift (never the scores), its release's report has the calibration users' part and
    the fit's total is training + selection; a grid without calibration rows is refused."""
    train, _ = _rows()
    cal, _ = _rows(users=120, seed=1)
    X, C = _matrix(train), _matrix(cal)
    grid = [1.0, 3.0, 10.0]
    m = recsel.Model.fit(X, method="ease", l2=10.0, dp_epsilon=3.5, dp_shift_grid=grid,
                         dp_select_epsilon=0.5, calibration=C)
    c = m.shift_choice
    assert set(c) == {"grid", "chosen", "privacy"}
    assert c["grid"] == grid and c["chosen"] in grid
    assert c["privacy"]["population"] == "calibration users"
    assert c["privacy"]["epsilon"] == 0.5
    assert c["privacy"]["unit"].startswith("one calibration user replaced")
    report = m.save_release(tmp_path / "r", X)
    parts = {(p["part"], p["population"]): p for p in report["parts"]}
    assert parts[("dp shift choice", "calibration users")]["epsilon"] == 0.5
    assert parts[("model weights", "training users")]["epsilon"] == pytest.approx(3.5)
    meta = json.loads((tmp_path / "r" / "model.json").read_text())
    assert meta["shift_choice"] == c
    assert recsel.Model.load(str(tmp_path / "r")).shift_choice == c
    with pytest.raises(Exception, match="calibration"):
        recsel.Model.fit(X, method="ease", l2=10.0, dp_epsilon=3.5, dp_shift_grid=grid)
    with pytest.raises(Exception, match="exclude each other"):
        recsel.Model.fit(X, method="ease", l2=10.0, dp_epsilon=3.5, dp_shift_grid=grid,
                         dp_shift=3.0, calibration=C)
    assert recsel.Model.fit(X, method="ease", l2=10.0, dp_epsilon=3.5).shift_choice is None
