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
    _users_csv(users, path)
    out = tmp_path / "recs.csv"
    run_cli("recommend", "--model", release, "--mech", "mgem", "--eps", "1",
            "--candidates", "history-top:50", "--allow-non-private",
            "--users", path, "--out", out, "--seed", "9")
    with open(out) as f:
        rows = list(csv.reader(f))[1:]
    cli = {u: i for u, i in rows}

    rec = recsel.Recommender(str(release), "mgem", 1.0, candidates="history-top:50",
                             allow_non_private=True)
    assert "mgem" in rec.privacy_statement
    assert "candidate membership is not protected" in rec.privacy_statement
    assert not rec.user_level
    picks = rec.recommend(users, seed=9)
    assert picks == [cli[u] for u, _ in users]
    for (u, hist), p in zip(users, picks):
        assert p not in hist
    # Power: another seed gives other picks.
    assert rec.recommend(users, seed=10) != picks


def test_recommender_errors(release):
    with pytest.raises(recsel.RecselError, match="rnmh-laplace"):
        recsel.Recommender(str(release), "rnmh-laplace", 1.0, candidates="popular:50")
    rec = recsel.Recommender(str(release), "mgem", 1.0, secure=True)
    with pytest.raises(recsel.RecselError, match="no seed"):
        rec.recommend([("a", ["1"])], seed=1)
    assert len(rec.recommend([("a", ["1", "2"])])) == 1
    with pytest.raises(recsel.RecselError, match="no-such-item"):
        rec.recommend([("a", ["no-such-item"])])


def _users_csv(users, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "item"])
        for u, items in users:
            for i in items:
                w.writerow([u, i])


def test_recommender_candidate_policies(release, run_cli, tmp_path):
    """candidates= is the library's policy: "all" (the default) is user-level and equals
    `recsel recommend` for the same seed; "popular:N" picks among the N most popular training
    items of the release (its `popularity` array); "pool:FILE" among the file's items;
    "history-top:N" needs allow_non_private; the replaced keywords name candidates=."""
    np = pytest.importorskip("numpy")
    users = _users(release, n=60)
    rec = recsel.Recommender(str(release), "mgem", 1.0)
    assert rec.candidates == "all" and rec.user_level
    assert "user-level 1-DP per recommendation (mgem)" in rec.privacy_statement
    picks = rec.recommend(users, seed=4)
    path, out = tmp_path / "users.csv", tmp_path / "recs.csv"
    _users_csv(users, path)
    run_cli("recommend", "--model", release, "--mech", "mgem", "--eps", "1",
            "--users", path, "--out", out, "--seed", "4")
    with open(out) as f:
        cli = {u: i for u, i in list(csv.reader(f))[1:]}
    assert picks == [cli[u] for u, _ in users]
    ids = json.loads((release / "release.json").read_text())["item_ids"]
    counts = np.load(release / "calibration.npz")["popularity"]
    order = sorted(range(len(ids)), key=lambda j: (-int(counts[j]), j))
    popular = {ids[j] for j in order[:20]}
    rec = recsel.Recommender(str(release), "mgem", 1.0, candidates="popular:20")
    assert rec.user_level
    assert set(rec.recommend(users, seed=4)) <= popular
    # The history stays among the candidates: a user who has all 20 is shown one of them.
    owner = [("owner", sorted(popular))]
    assert rec.recommend(owner, seed=4)[0] in popular
    pool = [ids[j] for j in range(3, len(ids), 97)]
    (tmp_path / "pool.txt").write_text("# public pool\n" + "\n".join(pool) + "\n")
    rec = recsel.Recommender(str(release), "rnm", 1.0, candidates=f"pool:{tmp_path / 'pool.txt'}")
    picks = rec.recommend(users, seed=4)
    assert set(picks) <= set(pool)
    # Power of the subset checks: "all" picks outside both lists.
    assert not set(recsel.Recommender(str(release), "rnm", 1.0).recommend(users, seed=4)) <= (
        popular | set(pool))

    with pytest.raises(recsel.RecselError, match="not protected"):
        recsel.Recommender(str(release), "mgem", 1.0, candidates="history-top:50")
    with pytest.raises(recsel.RecselError, match="candidates="):
        recsel.Recommender(str(release), "mgem", 1.0, top=50)
    with pytest.raises(recsel.RecselError, match="candidates="):
        recsel.Recommender(str(release), "mgem", 1.0, include_history=True)
    with pytest.raises(recsel.RecselError, match="unknown candidate policy"):
        recsel.Recommender(str(release), "mgem", 1.0, candidates="top:5")


def test_recommender_prior(release, run_cli, tmp_path):
    """prior= is the library's prior: weight 0 is no prior (the same picks), a public prior keeps
    the user-level claim, equals `recsel recommend --prior` for the same seed and changes the
    picks; own-history needs allow_non_private; a bad prior names prior and the value."""
    users = _users(release, n=60)
    none = recsel.Recommender(str(release), "em", 1.0).recommend(users, seed=4)
    zero = recsel.Recommender(str(release), "em", 1.0, prior="popularity:0")
    assert zero.prior == "none"
    assert zero.recommend(users, seed=4) == none
    rec = recsel.Recommender(str(release), "em", 1.0, prior="popularity:3")
    assert rec.prior == "popularity:3" and rec.user_level
    assert "public prior 'popularity:3'" in rec.privacy_statement
    picks = rec.recommend(users, seed=4)
    assert picks != none
    path, out = tmp_path / "users.csv", tmp_path / "recs.csv"
    _users_csv(users, path)
    run_cli("recommend", "--model", release, "--mech", "em", "--eps", "1",
            "--prior", "popularity:3", "--users", path, "--out", out, "--seed", "4")
    with open(out) as f:
        cli = {u: i for u, i in list(csv.reader(f))[1:]}
    assert picks == [cli[u] for u, _ in users]
    with pytest.raises(recsel.RecselError, match="not private"):
        recsel.Recommender(str(release), "em", 1.0, prior="own-history:2")
    leak = recsel.Recommender(str(release), "em", 1.0, prior="own-history:2",
                              allow_non_private=True)
    assert not leak.user_level
    with pytest.raises(recsel.RecselError, match="prior.*popularity:-1"):
        recsel.Recommender(str(release), "em", 1.0, prior="popularity:-1")


def test_tuned_recommender_serves_what_recsel_tune_chose(run_cli, tmp_path):
    """mech="tuned" reads tuning.json: the same row, statement and picks as `recsel recommend`
    without --mech."""
    model = tmp_path / "model"
    data = ["--dataset", "synthetic", "--validation-users", "0.1"]
    run_cli("fit", *data, "--out", model)
    run_cli("tune", "--model", model, *data, "--mech", "em")
    tuning = json.loads((model / "tuning.json").read_text())
    row = [r for r in tuning["rows"] if r["epsilon"] == 2.0][0]
    rec = recsel.Recommender(str(model), "tuned", 3.0)
    assert rec.candidates == row["candidates"]
    assert rec.mechanism == row["mechanism"]
    assert "tuned (tuning.json)" in rec.privacy_statement and rec.tuned
    assert rec.user_level
    users = _users(model)
    path = tmp_path / "users.csv"
    _users_csv(users, path)
    out = tmp_path / "recs.csv"
    run_cli("recommend", "--model", model, "--eps", "3", "--users", path, "--out", out,
            "--seed", "4")
    with open(out) as f:
        cli = {u: i for u, i in list(csv.reader(f))[1:]}
    assert rec.recommend(users, seed=4) == [cli[u] for u, _ in users]
    # Below the smallest tuned eps: the best free option to everyone, 0-DP.
    low = recsel.Recommender(str(model), "tuned", 0.01)
    assert low.candidates == tuning.get("free_option", "popular:1") and low.epsilon == 0.0
    assert len(set(low.recommend(users, seed=1))) == 1
    # The tuning chooses the candidates.
    with pytest.raises(recsel.RecselError, match="tuning chooses the candidates"):
        recsel.Recommender(str(model), "tuned", 2.0, candidates="popular:5")
    # What it is worth, from tuning.json; a named mechanism serves its tuned row, and one below
    # the free item warns.
    assert rec.worth.startswith("worth: ") and "[tuned]" in rec.worth
    em = [r for r in tuning["mechanisms"] if r["mechanism"] == "em" and r["epsilon"] == 1.0][0]
    assert recsel.Recommender(str(model), "em", 1.0).candidates == em["candidates"]
    with pytest.warns(UserWarning, match="does not beat the best free option, showing everyone"):
        low = recsel.Recommender(str(model), "em", 0.1, candidates="all")
    assert low.worth_below_free and "[untuned]" in low.worth


def test_tune_and_evaluate_from_python_are_the_command_lines(run_cli, tmp_path):
    """recsel.tune writes the same tuning.json as `recsel tune` with the same options, and
    recsel.evaluate returns the table `recsel evaluate --json` prints."""
    data, model = tmp_path / "data", tmp_path / "model"
    run_cli("export", "--dataset", "synthetic", "--out", data)
    run_cli("fit", "--format", "lightgcn", "--path", data, "--out", model)
    run_cli("tune", "--model", model, "--format", "lightgcn", "--path", data, "--mech", "em")
    cli = (model / "tuning.json").read_bytes()
    t = recsel.tune(str(model), format="lightgcn", path=str(data), mech="em")
    assert (model / "tuning.json").read_bytes() == cli
    assert [r["epsilon"] for r in t["rows"]] == [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]
    opts = dict(model=str(model), format="lightgcn", path=str(data), mech="em", eps="1,2")
    table = recsel.evaluate(**opts)
    out = run_cli("evaluate", "--model", model, "--format", "lightgcn", "--path", data,
                  "--mech", "em", "--eps", "1,2", "--out", tmp_path / "u", "--json").stdout
    assert table == json.loads(out)
    assert any("NOT private" in r["label"] for r in table["rows"])
    with pytest.raises(recsel.RecselError, match="unknown evaluate option 'mechs'"):
        recsel.evaluate(mechs="em")


def test_privacy_report_is_the_one_recsel_recommend_writes(release, run_cli, tmp_path):
    """Recommender.privacy_report(_json) is the report `recsel recommend` prints and writes
    (--privacy-json) for the same serving configuration: one source. The release's training
    entry says the training data are treated as public (a model fitted without DP)."""
    out = tmp_path / "report.json"
    run_cli("recommend", "--model", release, "--mech", "mgem", "--eps", "1", "--secure",
            "--history", _users(release, 1)[0][1][0], "--privacy-json", out)
    rec = recsel.Recommender(str(release), "mgem", 1.0, secure=True)
    report = json.loads(rec.privacy_report_json)
    assert report == json.loads(out.read_text())
    weights = next(p for p in report["parts"] if p["part"] == "model weights")
    assert weights["epsilon"] is None
    assert "training data treated as public" in rec.privacy_report
    served = next(p for p in report["parts"] if p["part"] == "each recommendation")
    assert served["epsilon"] == 1.0
    # Power: another epsilon gives another report.
    other = recsel.Recommender(str(release), "mgem", 2.0, secure=True)
    assert json.loads(other.privacy_report_json) != report


def test_recommend_with_k_returns_lists_with_the_librarys_claim(release, run_cli, tmp_path):
    """recommend(users, k=10) is the library's list: the lists `recsel recommend --k 10` writes
    for the same seed, each of 10 distinct items, with the claim the command line prints and
    the list's eps from the library; k=None and k=1 keep the single item's return type."""
    users = _users(release, n=12)
    path = tmp_path / "users.csv"
    _users_csv(users, path)
    out = tmp_path / "lists.csv"
    run_cli("recommend", "--model", release, "--mech", "mgem", "--eps", "1", "--k", "10",
            "--users", path, "--out", out, "--seed", "9")
    with open(out) as f:
        rows = list(csv.reader(f))[1:]
    cli = {}
    for u, i in rows:
        cli.setdefault(u, []).append(i)

    rec = recsel.Recommender(str(release), "mgem", 1.0)
    got = rec.recommend(users, k=10, seed=9)
    assert set(got) == {"k", "lists", "epsilon", "guarantee", "claim", "privacy", "device_filter"}
    assert got["device_filter"] is None
    assert got["k"] == 10 and got["epsilon"] == 1.0
    assert got["lists"] == [cli[u] for u, _ in users]
    assert all(len(l) == 10 == len(set(l)) for l in got["lists"])
    assert got["lists"] == rec.recommend_lists(users, k=10, seed=9)
    assert got["claim"] == rec.list_statement(10)
    assert "user-level 1-DP per list of 10 distinct items" in got["claim"], got["claim"]
    assert got["guarantee"] == "user-level eps-DP per list of 10 distinct items (one release)"
    privacy = json.loads(got["privacy"])
    assert privacy["epsilon"] == 1.0 and "per list of 10" in privacy["unit"]
    # Power: another seed draws other lists; a list of 10 is not the single item's answer.
    assert rec.recommend(users, k=10, seed=10)["lists"] != got["lists"]
    single = rec.recommend(users, seed=9)
    assert single == rec.recommend(users, k=1, seed=9) == rec.recommend(users, k=None, seed=9)
    assert all(p is None or isinstance(p, str) for p in single)
    with pytest.raises(recsel.RecselError, match="1 to 1000"):
        rec.recommend(users, k=1001, seed=9)
    with pytest.raises(recsel.RecselError, match="1 to 1000"):
        rec.recommend(users, k=0, seed=9)


def test_recommend_k_on_a_tuned_release_is_the_tuned_list_of_k(run_cli, tmp_path):
    """On a release tuned with `recsel tune --k 10`, Recommender(model).recommend(users, k=10)
    is Recommender(model, k=10).recommend(users) for the same seed: the tuned list of 10 (its
    lists, eps, claim, privacy entry and device filter), not the top-1 row drawn ten times; a k
    the tuning has no list of is refused naming `recsel tune --k`; and the Recommender loaded
    for 10, asked for one item, answers the tuned top-1 row."""
    model = tmp_path / "model"
    data = ["--dataset", "synthetic", "--validation-users", "0.1"]
    run_cli("fit", *data, "--out", model)
    run_cli("tune", "--model", model, *data, "--mech", "none", "--eps", "1,8", "--k", "10")
    users = _users(model, n=12)
    top1 = recsel.Recommender(str(model), "tuned", 8.0)
    ten = recsel.Recommender(str(model), "tuned", 8.0, k=10)
    got = top1.recommend(users, k=10, seed=9)
    assert got == ten.recommend(users, seed=9)
    assert got["k"] == 10 and len(got["lists"]) == len(users)
    assert got["claim"] == top1.list_statement(10) == ten.list_statement(10)
    released = {len(l) for l in got["lists"]}
    assert got["device_filter"] == (10 if released != {10} else None), (released, got)
    with pytest.raises(recsel.RecselError, match="recsel tune --k 3"):
        top1.recommend(users, k=3, seed=9)
    assert ten.recommend(users, k=1, seed=9) == top1.recommend(users, seed=9)
