"""recsel.Recommender is the library's Recommender: the same picks as `recsel recommend`."""

import csv
import json

import pytest

import recsel


@pytest.fixture(scope="module")
def release(run_cli, tmp_path_factory):
    """A model folder with its release artifact, fitted on the generated synthetic data."""
    d = tmp_path_factory.mktemp("release")
    run_cli("fit", "--dataset", "synthetic", "--out", d / "model")
    return d / "model"


def _users(release, n=40):
    """Histories drawn from the model's item ids (release.json's item-id map)."""
    ids = json.loads((release / "release.json").read_text())["item_ids"]
    m = len(ids)
    return [(f"u{u}", [ids[(7 * u + 3 * i) % m] for i in range(5 + u % 7)]) for u in range(n)]


def test_recommender_equals_recsel_recommend_for_the_same_seed(release, run_cli, tmp_path):
    users = _users(release)
    path = tmp_path / "users.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "item"])
        for u, items in users:
            for i in items:
                w.writerow([u, i])
    out = tmp_path / "recs.csv"
    run_cli("recommend", "--model", release, "--mech", "mgem", "--eps", "1", "--top", "50",
            "--users", path, "--out", out, "--seed", "9")
    with open(out) as f:
        rows = list(csv.reader(f))[1:]
    cli = {u: i for u, i in rows}

    rec = recsel.Recommender(str(release), "mgem", 1.0, top=50)
    assert "mgem" in rec.privacy_statement
    picks = rec.recommend(users, seed=9)
    assert picks == [cli[u] for u, _ in users]
    for (u, hist), p in zip(users, picks):
        assert p not in hist
    # Power: another seed gives other picks.
    assert rec.recommend(users, seed=10) != picks


def test_recommender_errors(release):
    with pytest.raises(recsel.RecselError, match="rnmh-laplace"):
        recsel.Recommender(str(release), "rnmh-laplace", 1.0, top=50)
    rec = recsel.Recommender(str(release), "mgem", 1.0, top=50, secure=True)
    with pytest.raises(recsel.RecselError, match="no seed"):
        rec.recommend([("a", ["1"])], seed=1)
    assert len(rec.recommend([("a", ["1", "2"])])) == 1
    with pytest.raises(recsel.RecselError, match="no-such-item"):
        rec.recommend([("a", ["no-such-item"])])
