"""``recsel select`` on a Ray cluster (docs/python.md, "Ray").

The driver loads the data and the model exactly as ``recsel select`` does, puts the model, the
test users' rows and the configuration into Ray's object store once, and runs three phases:

1. per partition of the users, a percentile sketch (each item's bottom and top score tails); the
   driver merges the sketches *exactly* into the global p1/p99 and sensitivities;
2. per partition, selection for its users with the global sensitivities (every mechanism x ε x
   trial, each user on its own random streams) and the candidate pass of the diagnostics; each
   task writes its users' rows as a Parquet part (``<out>/parts/``) and returns its results;
3. the driver merges the partitions in user order and writes the outputs of ``recsel select``
   (MSE table, Spearman summary, per-user and per-item tables, diagnostics, plots) into ``out``.

Each phase calls the library functions the single-machine run calls, and every user draws from
its own streams, so the result equals ``recsel select`` with the same seed bit for bit, for any
number of partitions. A task that dies is retried by Ray and recomputes the same partition.

Example (a local cluster)::

    >>> import ray, recsel.ray
    >>> ray.init(num_cpus=2)
    >>> res = recsel.ray.select(dataset="synthetic", shape="small", mech="gem,mgem", eps="0.1,1",
    ...                         trials=5, seed=7, out="out/ray-small", partitions=3)
    >>> res.mse().num_rows
    4

From the command line: ``python -m recsel.ray select --dataset synthetic --mech gem,mgem --seed 7
--partitions 3 [--address auto]``.
"""

from __future__ import annotations

import argparse
import json as _json
import sys
import time
from typing import Any, Callable, List, Optional

from . import _native, read_table

#: Ray retries a task whose worker died this many times.
MAX_RETRIES = 3


def _sketch_task(model, users, counts, config, start, end, index, hook):
    if hook is not None:
        hook("sketch", index)
    return _native.sketch_partition(model, users, counts, config, start, end)


def _select_task(model, users, sens, config, start, end, index, hook, parts_dir):
    if hook is not None:
        hook("select", index)
    part = _native.run_partition(model, users, sens, config, start, end)
    if parts_dir is not None:
        write_part(part, config, parts_dir)
    return part


def write_part(part, config, parts_dir: str) -> str:
    """Writes a partition's per-user rows as ``users-<start>-<end>.parquet`` in ``parts_dir``
    (atomically: a retried task overwrites a whole file); returns the path."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    start, end = part.users
    os.makedirs(parts_dir, exist_ok=True)
    path = os.path.join(parts_dir, f"users-{start:09d}-{end:09d}.parquet")
    tmp = f"{path}.tmp-{os.getpid()}"
    pq.write_table(pa.table(dict(part.columns(config))), tmp)
    os.replace(tmp, path)
    return path


class SelectResult:
    """What :func:`select` returns: the output directory, the printed summary, and the tables."""

    def __init__(self, out: str, summary: str, seed: int, log: List[str], seconds: dict):
        self.out = out
        #: The summary ``recsel select`` prints (a JSON object's text with ``json=True``).
        self.summary = summary
        #: The seed of the selection streams.
        self.seed = seed
        #: What preparing the run did (model reused or fitted, seed drawn).
        self.log = log
        #: Wall seconds of the phases: ``prepare``, ``sketch``, ``select``, ``merge``, ``total``.
        self.seconds = seconds

    def mse(self, kind: str = "arrow"):
        """The MSE table (pyarrow, or polars with ``kind="polars"``)."""
        return read_table(self.out, "mse", kind)

    def users(self, kind: str = "arrow"):
        """The per-user table."""
        return read_table(self.out, "users", kind)

    def items(self, kind: str = "arrow"):
        """The per-item table (percentiles, sensitivities, candidate counts)."""
        return read_table(self.out, "items", kind)

    def json(self) -> dict:
        """The summary as a dict (only when the run was started with ``json=True``)."""
        return _json.loads(self.summary)


def select(
    *,
    partitions: Optional[int] = None,
    address: Optional[str] = None,
    json: bool = False,
    verbose: bool = False,
    parts: bool = True,
    on_task_start: Optional[Callable[[str, int], None]] = None,
    **options: Any,
) -> SelectResult:
    """Runs ``recsel select`` over a Ray cluster; returns a :class:`SelectResult`.

    ``options`` are ``recsel select``'s long options with ``_`` for ``-`` (``dataset``, ``shape``,
    ``format``, ``path``, ``mech``, ``eps``, ``trials``, ``top``, ``clip``, ``percentile_users``,
    ``gamma``, ``seed``, ``model_dir``, ...: every name of ``recsel._native.select_options()``),
    with the same defaults, and ``out``. ``json`` and ``verbose`` choose the summary as
    ``recsel select --json/--verbose`` do. ``partitions``
    (default: the cluster's CPUs) splits the test users; ``address`` is passed to ``ray.init``
    when Ray is not initialised yet (``None``: start a local cluster, ``"auto"``: join the running
    one). With ``parts`` each selection task also writes its users' rows as a Parquet part into
    ``<out>/parts/`` (``out`` must then be on storage the workers share; the driver's
    ``users.parquet`` has every row either way). ``on_task_start(phase, index)`` is called inside each task before it works (phase
    ``"sketch"`` or ``"select"``), e.g. to inject a failure in a test.

    Example::

        >>> res = recsel.ray.select(dataset="synthetic", mech="gem,mgem", eps="1", trials=5,
        ...                         seed=7, out="out/ray", partitions=3)
        >>> print(res.summary)
    """
    import ray

    if not ray.is_initialized():
        ray.init(address=address)
    t_start = time.perf_counter()
    job = _native.SelectJob(**options)
    t_prepared = time.perf_counter()
    if partitions is None:
        partitions = max(1, int(ray.cluster_resources().get("CPU", 1)))
    ranges = _native.split_users(job.n_users, int(partitions))
    config = job.config
    model_ref = ray.put(job.model)
    users_ref = ray.put(job.users)
    config_ref = ray.put(config)
    counts_ref = ray.put(_native.percentile_counts_of(job.model, job.users, config))
    sketch = ray.remote(max_retries=MAX_RETRIES)(_sketch_task)
    run = ray.remote(max_retries=MAX_RETRIES)(_select_task)
    # Phase 1: per-partition sketches, merged exactly into the global sensitivities.
    sketches = ray.get([
        sketch.remote(model_ref, users_ref, counts_ref, config_ref, s, e, i, on_task_start)
        for i, (s, e) in enumerate(ranges)
    ])
    sens = _native.merge_sketches(sketches).sensitivities(config)
    t_sketched = time.perf_counter()
    # Phase 2: selection per partition with the global sensitivities.
    sens_ref = ray.put(sens)
    import os

    parts_dir = os.path.join(os.path.abspath(str(job.out)), "parts") if parts else None
    if parts_dir is not None:
        import shutil

        shutil.rmtree(parts_dir, ignore_errors=True)  # parts of an earlier run
    results = ray.get([
        run.remote(model_ref, users_ref, sens_ref, config_ref, s, e, i, on_task_start, parts_dir)
        for i, (s, e) in enumerate(ranges)
    ])
    t_selected = time.perf_counter()
    # Phase 3: merge, analyse, write the outputs of `recsel select`.
    summary = job.finish(
        sens, results, t_sketched - t_prepared, t_selected - t_sketched, t_selected - t_start, json,
        verbose,
    )
    t_end = time.perf_counter()
    seconds = {
        "prepare": t_prepared - t_start,
        "sketch": t_sketched - t_prepared,
        "select": t_selected - t_sketched,
        "merge": t_end - t_selected,
        "total": t_end - t_start,
    }
    return SelectResult(str(job.out), summary, config.seed, job.log, seconds)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recsel.ray",
        description="Run `recsel select` over a Ray cluster; the same outputs as `recsel select`.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "select",
        help="private selection for every test user (the options of `recsel select`)",
        epilog="Example: python -m recsel.ray select --dataset synthetic --mech gem,mgem "
        "--eps 0.1,1 --trials 20 --seed 7 --partitions 4 --out out/ray",
    )
    # The options of `recsel select`, as the library declares them (one source for the command
    # line, pipelines and this parser); values stay text, parsed by the library as
    # `recsel select` parses them.
    for o in _native.select_options():
        flag, dest, help_ = "--" + o["flag"], o["name"], o["help"].replace("%", "%%")
        if o["kind"] == "flag":
            s.add_argument(flag, dest=dest, action="store_true", default=None, help=help_)
            if o["negatable"]:
                s.add_argument("--no-" + o["flag"], dest=dest, action="store_false",
                               help=f"the opposite of {flag} (the default)")
        else:
            kw = {"choices": o["choices"]} if o["choices"] else {}
            s.add_argument(flag, dest=dest, help=help_, **kw)
    s.add_argument("--out", help="output directory (default out/select-<dataset>)")
    s.add_argument("--force", action="store_true",
                   help="accepted for compatibility with recsel select: a Ray run always starts "
                   "over (there is no resumable chunk store; Ray retries failed tasks)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--verbose", action="store_true",
                   help="print everything: diagnostics, every table, every file")
    s.add_argument("--partitions", type=int, help="partitions of the users (default: CPUs)")
    s.add_argument("--no-parts", dest="parts", action="store_false",
                   help="do not write the per-partition Parquet parts into <out>/parts")
    s.add_argument("--address", help="Ray address to join (default: start a local cluster)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m recsel.ray select ...``."""
    args = vars(_parser().parse_args(argv))
    args.pop("command")
    args.pop("force")
    json, partitions, address = args.pop("json"), args.pop("partitions"), args.pop("address")
    parts, verbose = args.pop("parts"), args.pop("verbose")
    options = {k: v for k, v in args.items() if v is not None}
    try:
        res = select(partitions=partitions, address=address, json=json, verbose=verbose,
                     parts=parts, **options)
    except _native.RecselError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in res.log:
        print(f"[select] {line}", file=sys.stderr)
    print(
        "[select] phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in res.seconds.items()),
        file=sys.stderr,
    )
    sys.stdout.write(res.summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
