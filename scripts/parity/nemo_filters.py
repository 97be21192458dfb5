"""NeMo Curator's heuristic filter modules, imported without the package's `__init__` files
(which import Ray, Torch and friends): run inside target/parity-venv, where
scripts/parity/make_reference.py installs nemo-curator (pinned) without its dependencies.

    sys.path.insert(0, "scripts/parity"); import nemo_filters
    string, repetition = nemo_filters.load()
"""
import importlib
import importlib.util
import os
import sys
import types

PACKAGES = [
    "nemo_curator",
    "nemo_curator.stages",
    "nemo_curator.stages.text",
    "nemo_curator.stages.text.filters",
    "nemo_curator.stages.text.utils",
    "nemo_curator.stages.text.filters.heuristic",
    "nemo_curator.stages.text.filters.heuristic.repetition",
]


def load():
    """(the string filters' module, the repetition filters' module)."""
    base = importlib.util.find_spec("nemo_curator").submodule_search_locations[0]
    for pkg in PACKAGES:
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]
        sys.modules[pkg] = m
    string = importlib.import_module("nemo_curator.stages.text.filters.heuristic.string")
    repetition = importlib.import_module("nemo_curator.stages.text.filters.heuristic.repetition.repetition")
    return string, repetition
