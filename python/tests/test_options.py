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
    return {"flag": True, "count": "3", "real": "0.5", "reals": "0.5,2", "path": "some/dir"}.get(
        o["kind"], "none" if o["name"] == "min_rating" else "x")


def test_select_options_are_the_command_lines(run_cli):
    names = {o["name"] for o in _native.select_options()}
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
