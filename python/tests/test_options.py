"""The Python keyword arguments are the library's declared options: every option of `recsel
select` and every mechanism parameter is accepted under the command line's name (flag with `_`)."""

import re

import pytest

import recsel
from recsel import _native


def _sample(o):
    """A valid value for a select option, as text (the binding parses it as the flag's text)."""
    if o["choices"]:
        return o["choices"][0]
    text = {"min_rating": "none", "candidates": "all", "fallback": "none", "prior": "none",
            "validation_users": "auto"}.get(o["name"], "x")
    return {"flag": True, "count": "3", "real": "0.5", "reals": "0.5,2", "path": "some/dir"}.get(
        o["kind"], text)


def test_select_options_are_the_command_lines(run_cli):
    names = {o["name"] for o in _native.select_options() if not o["hidden"]}
    help_text = run_cli("select", "--help").stdout
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, flags=re.M))
    # The job's options are the command line's, bar what it does with the results.
    controls = {"out", "dump-problems", "add-mech", "force", "json", "verbose", "svg", "threads",
                "help", "version", "no-clip"}
    assert names == {f.replace("-", "_") for f in flags - controls}
    # Every mechanism parameter is one of them.
    assert {p["name"] for p in recsel.mechanism_params()} <= names


def test_every_select_option_is_accepted_as_a_keyword(tmp_path):
    for o in _native.select_options():
        if o["name"] in ("dataset", "format", "path"):
            continue  # these name the data; without them the job refuses to start, below
        with pytest.raises(recsel.RecselError) as e:
            _native.SelectJob(out=str(tmp_path), **{o["name"]: _sample(o)})
        assert "unknown select option" not in str(e.value), o["name"]
        assert "give dataset=NAME" in str(e.value), (o["name"], e.value)
    # Power: a name that is no option is refused as such.
    with pytest.raises(recsel.RecselError, match="unknown select option 'trails'"):
        _native.SelectJob(out=str(tmp_path), trails=3)


def test_every_mechanism_parameter_is_accepted_as_a_keyword():
    q, d = [1.0, 0.0, 0.5], [1.0, 1.0, 2.0]
    for p in recsel.mechanism_params():
        counts = recsel.sample("rnm", q, d, 1.0, n=20, seed=3, **{p["name"]: p["default"]})
        assert counts.sum() == 20, p["name"]
    with pytest.raises(recsel.RecselError, match="unknown mechanism parameter 'gama'"):
        recsel.sample("rnm", q, d, 1.0, n=20, seed=3, gama=0.1)


def test_recommend_options_are_the_command_lines(run_cli):
    """The Recommender's keywords are `recsel recommend`'s options, the candidate policy and the
    ledger's among them (one declaration, `RecommendOptions`)."""
    opts = _native.recommend_options()
    names = {o["name"] for o in opts if not o["hidden"]}
    help_text = run_cli("recommend", "--help").stdout
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, flags=re.M))
    # What the command does with its input and output, beside the options.
    controls = {"history", "users", "format", "out", "out-format", "privacy-json", "user",
                "request-id", "threads", "help", "version"}
    assert names == {f.replace("-", "_") for f in flags - controls}
    assert {"candidates", "ledger", "budget", "period", "fallback", "group", "run_id"} <= names
    assert {o["name"] for o in opts if o["hidden"]} == {"top", "include_history"}


def test_every_recommend_option_is_a_known_keyword(tmp_path):
    """Each option is a keyword of the Recommender: a missing model is reported, not an unknown
    keyword; the ledger's options are refused by name; the replaced ones name candidates=."""
    for o in _native.recommend_options():
        if o["name"] in ("model", "mech", "eps"):
            continue
        value = _sample(o)
        with pytest.raises(recsel.RecselError) as e:
            recsel.Recommender(str(tmp_path / "none"), "mgem", 1.0, **{o["name"]: value})
        msg = str(e.value)
        assert "unknown Recommender option" not in msg, o["name"]
        if o["group"] == "Ledger":
            assert "ledger" in msg, (o["name"], msg)
        elif o["hidden"]:
            assert "candidates=" in msg, (o["name"], msg)
    with pytest.raises(recsel.RecselError, match="unknown Recommender option 'ledgr'"):
        recsel.Recommender(str(tmp_path / "none"), "mgem", 1.0, ledgr="l.db")


def test_tune_and_evaluate_options_are_the_command_lines(run_cli):
    """The keywords of recsel.tune and recsel.evaluate are the options of `recsel tune` and
    `recsel evaluate` (one declaration each), the data options with validation_users among
    them; a name that is no option is refused as such."""
    controls = {"config", "json", "out", "svg", "threads", "help", "version"}
    for sub, opts in (("tune", _native.tune_options()), ("evaluate", _native.evaluate_options())):
        names = {o["name"] for o in opts if not o["hidden"]}
        help_text = run_cli(sub, "--help").stdout
        flags = set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, flags=re.M))
        assert names == {f.replace("-", "_") for f in flags - controls}, sub
        assert "validation_users" in names
    with pytest.raises(recsel.RecselError, match="unknown tune option 'pool_size'"):
        recsel.tune("m", pool_size="3")
