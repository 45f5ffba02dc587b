"""A file of the repository that is not a package module (docs/scripts, python/examples) loaded
as a module, for the tests of what it computes."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(relative):
    """The module of the file at `relative` (a path from the repository's root)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
