"""`recsel.ray.select` on a local Ray cluster equals `recsel select` bit for bit."""

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")

import recsel.ray  # noqa: E402

# Small synthetic data: a few hundred test users, three mechanisms, two ε, a few trials.
OPTIONS = dict(dataset="synthetic", shape="small", mech="gem,mgem,rnm", eps="0.5,4", trials=3,
               top=40, seed=11, clip=True)
COMPARED = ["mse.csv", "users.csv", "items.csv", "rules.csv", "diagnostics.json", "config.json"]


def _cli_args(opts, out, model_dir):
    args = ["select", "--dataset", opts["dataset"], "--shape", opts["shape"], "--mech",
            opts["mech"], "--eps", opts["eps"], "--trials", opts["trials"], "--top", opts["top"],
            "--seed", opts["seed"], "--out", out, "--model-dir", model_dir]
    if opts.get("clip"):
        args.append("--clip")
    return args


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True,
             log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cli_run(run_cli, tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    out, model_dir = base / "cli", base / "model"
    run_cli(*_cli_args(OPTIONS, out, model_dir))
    return out, model_dir


def _same(a: Path, b: Path):
    for f in COMPARED:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f"{f} differs"


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_ray_select_equals_the_cli(cluster, cli_run, tmp_path, partitions):
    cli_out, model_dir = cli_run
    res = recsel.ray.select(partitions=partitions, out=str(tmp_path / "ray"),
                            model_dir=str(model_dir), **OPTIONS)
    _same(cli_out, Path(res.out))
    assert any("using the saved model" in line for line in res.log)
    # Each selection task wrote its users' rows as a Parquet part: together, the CLI's table.
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((Path(res.out) / "parts").glob("*.parquet"))
    assert len(files) == partitions
    parts = pa.concat_tables([pq.read_table(f) for f in files])
    users = recsel.read_table(cli_out, "users")
    assert parts.column("user").to_pylist() == list(range(users.num_rows))
    for name in users.column_names[1:]:
        assert parts.column(name).to_pylist() == users.column(name).to_pylist(), name
    assert res.mse().num_rows == 6  # 3 mechanisms x 2 ε, as a pyarrow table
    assert res.users(kind="polars").height > 0


def test_a_different_seed_is_detected(cluster, cli_run, tmp_path):
    # Power of the comparison above: another seed changes the MSE table.
    cli_out, model_dir = cli_run
    res = recsel.ray.select(partitions=3, out=str(tmp_path / "ray"), model_dir=str(model_dir),
                            **{**OPTIONS, "seed": 12})
    assert (cli_out / "mse.csv").read_bytes() != (Path(res.out) / "mse.csv").read_bytes()


def _kill_once(marker):
    def hook(phase, index):
        # Dies once, in the middle of the selection phase, as a crashed worker would.
        if phase == "select" and index == 1 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)

    return hook


def test_a_killed_task_is_retried_and_the_result_is_unchanged(cluster, cli_run, tmp_path):
    cli_out, model_dir = cli_run
    marker = str(tmp_path / "killed")
    res = recsel.ray.select(partitions=3, out=str(tmp_path / "ray"), model_dir=str(model_dir),
                            on_task_start=_kill_once(marker), **OPTIONS)
    assert os.path.exists(marker), "the hook did not kill a task"
    _same(cli_out, Path(res.out))


def test_the_module_command_line(cluster, cli_run, tmp_path, capsys):
    cli_out, model_dir = cli_run
    argv = ["select", "--dataset", "synthetic", "--shape", "small", "--mech", OPTIONS["mech"],
            "--eps", OPTIONS["eps"], "--trials", "3", "--top", "40", "--seed", "11", "--clip",
            "--out", str(tmp_path / "m"), "--model-dir", str(model_dir), "--partitions", "2",
            "--json"]
    assert recsel.ray.main(argv) == 0
    _same(cli_out, tmp_path / "m")
    import json

    summary = json.loads(capsys.readouterr().out)
    assert summary["users"] > 0
    assert recsel.ray.main(["select", "--dataset", "nope", "--out", str(tmp_path / "x")]) == 2
