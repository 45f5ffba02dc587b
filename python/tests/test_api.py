"""The Python API against the command line and the library's own guarantees."""

import json
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import recsel

Q = [1.0, 0.5, 0.0, 0.25]
D = [1.0, 2.0, 0.5, 1.0]


def test_registry_lists_the_mechanisms():
    mechs = recsel.mechanisms()
    names = [m["name"] for m in mechs]
    assert {"rnm", "gem", "mgem", "rs", "cgem", "rs-gem"} <= set(names)
    gem = next(m for m in mechs if m["name"] == "gem")
    assert gem["private"] is True and "beta" in " ".join(gem["params"])
    assert any(m["audit_reference"] for m in mechs)


@pytest.mark.parametrize(
    "mech,extra,params",
    [
        ("gem", [], {}),
        ("rnm", [], {}),
        ("rs", ["--gamma", "0.2"], {"gamma": 0.2}),
        ("cgem", ["--chooser", "pearson"], {"chooser": "pearson"}),
        ("rs-gem", ["--gamma", "0.2"], {"gamma": 0.2}),
    ],
)
def test_sample_counts_equal_the_cli(run_cli, mech, extra, params):
    n, seed = 20_000, 7
    args = ["sample", "--mech", mech, "--eps", "1", "--scores", ",".join(map(str, Q)),
            "--sens", ",".join(map(str, D)), "--n", n, "--seed", seed, "--json", *extra]
    cli = json.loads(run_cli(*args).stdout)
    py = recsel.sample(mech, Q, D, 1.0, n=n, seed=seed, **params)
    assert py.tolist() == cli["counts"]
    assert py.sum() == n
    # Power: another seed gives other counts, so equality above is not a coincidence.
    assert recsel.sample(mech, Q, D, 1.0, n=n, seed=seed + 1, **params).tolist() != cli["counts"]


def test_select_is_the_first_selection_of_a_batch_and_of_sample():
    for seed in range(20):
        i = recsel.select("rnm", Q, D, 0.5, seed=seed)
        assert i == recsel.select_batch("rnm", np.array([Q]), D, 0.5, seed=seed)[0]
        counts = recsel.sample("rnm", Q, D, 0.5, n=1, seed=seed)
        assert counts[i] == 1


def test_select_batch_rows_draw_from_their_users_streams():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(300, 20))
    d = np.full(20, 1.0)
    users = np.arange(1000, 1300, dtype=np.uint64)
    batch = recsel.select_batch("gem", q, d, 0.5, seed=3, user_ids=users)
    # Each row equals that user's selection alone: the stream depends only on (user, mech, eps
    # index, trial), not on the batch.
    for i in [0, 17, 299]:
        one = recsel.select_batch("gem", q[i : i + 1], d, 0.5, seed=3, user_ids=users[i : i + 1])
        assert one[0] == batch[i]
    # Power: other users, another ε index or trial draw from other streams.
    assert (recsel.select_batch("gem", q, d, 0.5, seed=3) != batch).any()
    assert (recsel.select_batch("gem", q, d, 0.5, seed=3, user_ids=users, trial=1) != batch).any()
    assert (
        recsel.select_batch("gem", q, d, 0.5, seed=3, user_ids=users, eps_index=1) != batch
    ).any()
    # Per-user sensitivities: one row per score row.
    full = np.tile(d, (300, 1))
    assert (recsel.select_batch("gem", q, full, 0.5, seed=3, user_ids=users) == batch).all()


def test_errors_carry_the_library_messages(run_cli):
    cli = run_cli("sample", "--mech", "nope", "--eps", "1", "--scores", "1,0", "--sens", "1,1",
                  "--n", "10", "--seed", "1", check=False)
    assert cli.returncode != 0
    with pytest.raises(recsel.RecselError) as e:
        recsel.sample("nope", [1.0, 0.0], [1.0, 1.0], 1.0, n=10, seed=1)
    assert str(e.value) in cli.stderr
    assert "nope" in str(e.value) and "gem" in str(e.value)
    # A non-positive sensitivity: the library's validation message, as the CLI prints it.
    cli = run_cli("sample", "--mech", "gem", "--eps", "1", "--scores", "1,0", "--sens", "1,-1",
                  "--n", "10", "--seed", "1", check=False)
    with pytest.raises(recsel.RecselError) as e:
        recsel.sample("gem", [1.0, 0.0], [1.0, -1.0], 1.0, n=10, seed=1)
    assert str(e.value) in cli.stderr
    with pytest.raises(recsel.RecselError, match="epsilon"):
        recsel.select("gem", [1.0, 0.0], [1.0, 1.0], -1.0, seed=1)
    with pytest.raises(recsel.RecselError, match="unknown mechanism parameter 'gama'"):
        recsel.select("rs", [1.0, 0.0], [1.0, 1.0], 1.0, seed=1, gama=0.1)
    with pytest.raises(recsel.RecselError, match="row 1"):
        recsel.select_batch("gem", np.array([[1.0, 0.0], [np.nan, 0.0]]), [1.0, 1.0], 1.0, seed=1)
    with pytest.raises(recsel.RecselError, match="user_ids has 1 entries for 2 rows"):
        recsel.select_batch("gem", np.zeros((2, 2)), [1.0, 1.0], 1.0, seed=1, user_ids=[4])
    # RecselError is a ValueError, so generic handlers catch it.
    assert issubclass(recsel.RecselError, ValueError)


def test_audit_returns_the_cli_report_as_a_dict(run_cli):
    r = recsel.audit("rnm", 1.0, samples=2000, seed=1)
    cli = json.loads(run_cli("audit", "--mech", "rnm", "--eps", "1", "--samples", "2000",
                             "--seed", "1", "--json").stdout)
    assert r == cli[0]
    assert r["mechanism"] == "rnm" and r["verdict"] == "consistent" and r["results"]
    assert r["max_eps_lb"] == max(x["eps_lb"] for x in r["results"]) <= 1.0
    # Power: the deliberately non-private reference is caught.
    bot = recsel.audit("bot-exp", 1.0, samples=20_000, seed=1)
    assert bot["exceeds_nominal"] and bot["verdict"].startswith("flagged")
    with pytest.raises(recsel.RecselError, match="samples must be at least 100"):
        recsel.audit("rnm", 1.0, samples=10, seed=1)


def _data(users=300, items=40, seed=0):
    rng = np.random.default_rng(seed)
    dense = (rng.random((users, items)) < 0.15).astype(np.float32)
    dense[:, 0] = 1.0  # one popular item
    return sp.csr_matrix(dense)


@pytest.mark.parametrize("method", ["exact", "ease"])
def test_model_round_trips_through_files_and_pickle(tmp_path, method):
    X = _data()
    m = recsel.Model.fit(X, method=method, l2=5.0, density=0.5)
    s = m.score(X[:20])
    assert s.shape == (20, X.shape[1]) and s.dtype == np.float64 and np.isfinite(s).all()
    m.save(tmp_path / "model")
    m2 = recsel.Model.load(tmp_path / "model")
    assert np.array_equal(m2.score(X[:20]), s)
    assert m2.params["method"] == method and m2.params["l2"] == 5.0
    m3 = pickle.loads(pickle.dumps(m))
    assert np.array_equal(m3.score(X[:20]), s)
    # Power: another λ scores differently.
    other = recsel.Model.fit(X, method=method, l2=50.0, density=0.5)
    assert not np.array_equal(other.score(X[:20]), s)
    with pytest.raises(recsel.RecselError, match="item columns"):
        m.score(sp.csr_matrix((3, X.shape[1] + 1)))


def test_scipy_reads_the_model_files(tmp_path):
    X = _data()
    m = recsel.Model.fit(X, method="exact", l2=5.0, density=0.5)
    m.save(tmp_path / "m")
    w = sp.load_npz(tmp_path / "m" / "w.npz")
    w_r = sp.load_npz(tmp_path / "m" / "w_r.npz")
    assert w.shape == (X.shape[1], X.shape[1]) and w_r.shape == w.shape
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["n_items"] == X.shape[1]
    assert len(meta["item_ids"]) == X.shape[1]


def test_sensitivities_match_numpy_percentiles():
    X = _data(users=400, items=30, seed=1)
    m = recsel.Model.fit(X, method="ease", l2=5.0)
    s = recsel.sensitivities(m, X)
    scores = m.score(X)
    lo = np.percentile(scores, 1, axis=0)
    hi = np.percentile(scores, 99, axis=0)
    assert np.allclose(s["lower"], lo, rtol=1e-12, atol=1e-12)
    assert np.allclose(s["upper"], hi, rtol=1e-12, atol=1e-12)
    assert np.allclose(s["delta"], np.maximum(hi - lo, 1e-6), rtol=1e-12, atol=1e-12)
    assert (s["counts"] == X.shape[0]).all()
    w = recsel.sensitivities(m, X, population="without-item")
    assert (w["counts"] == X.shape[0] - np.asarray(X.sum(axis=0)).ravel()).all()
    with pytest.raises(recsel.RecselError, match="percentile population"):
        recsel.sensitivities(m, X, population="some")


def test_partition_sketches_merge_exactly():
    from recsel import _native

    X = _data(users=500, items=25, seed=2)
    m = recsel.Model.fit(X, method="ease", l2=5.0)
    users = recsel.user_rows(X)
    whole = recsel.sensitivities(m, X)
    # The state a SelectConfig pickles to: the configuration as config.json records it, and the
    # percentile levels and floor.
    config = {"mechanisms": ["gem"], "params": {"epsilon": 1.0}, "epsilons": [1.0], "trials": 1,
              "top": 10, "clip": False, "percentile_users": "all", "seed": 1,
              "source_fingerprint": "0"}
    cfg = recsel.SelectConfig.from_state((json.dumps(config), (1.0, 99.0, 1e-6)))
    counts = _native.percentile_counts_of(m._native, users, cfg)
    for parts in [1, 3, 7]:
        ranges = _native.split_users(users.n_users, parts)
        sketches = [_native.sketch_partition(m._native, users, counts, cfg, s, e) for s, e in ranges]
        sketches = [pickle.loads(pickle.dumps(k)) for k in sketches]
        merged = _native.merge_sketches(sketches[::-1]).sensitivities(cfg)
        assert np.array_equal(merged.lower, whole["lower"])
        assert np.array_equal(merged.upper, whole["upper"])
        assert np.array_equal(merged.delta, whole["delta"])
    # Power: one partition's tails alone give other percentiles.
    s, e = _native.split_users(users.n_users, 3)[0]
    alone = _native.sketch_partition(m._native, users, counts, cfg, s, e).sensitivities(cfg)
    assert not np.array_equal(alone.lower, whole["lower"])
    # Too few users for the tails: refused, not a wrong answer.
    tiny = _native.sketch_partition(m._native, users, counts, cfg, 0, 2)
    with pytest.raises(recsel.RecselError, match="merge the sketches of all partitions"):
        tiny.sensitivities(cfg)


def test_select_job_validates_its_options(tmp_path):
    from recsel import _native

    with pytest.raises(recsel.RecselError, match="unknown select option 'trails'"):
        _native.SelectJob(dataset="synthetic", trails=3)
    with pytest.raises(recsel.RecselError, match="min_rating: 'four' is not a number or 'none'"):
        _native.SelectJob(dataset="synthetic", min_rating="four", out=str(tmp_path))
    with pytest.raises(recsel.RecselError, match="eps: item 2 is 'x'"):
        _native.SelectJob(dataset="synthetic", eps="1,x", out=str(tmp_path))
    with pytest.raises(recsel.RecselError, match="give dataset=NAME"):
        _native.SelectJob(out=str(tmp_path))
