"""Benchmarks: run with ``python -m pytest benchmarks`` (never part of the
test suite, whose testpaths is tests/).

``twin`` gives each benchmark the pure and the compiled module of a twin;
the compiled parameter is skipped when the extensions are not built.
"""
import importlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def load_twin(name, kind):
    from kchannel import _impl

    pure_name, compiled_name = _impl.TWINS[name]
    if kind == "pure":
        return importlib.import_module(pure_name)
    try:
        return importlib.import_module(compiled_name)
    except ImportError as exc:
        pytest.skip(f"compiled extensions not built ({compiled_name}: {exc})")


@pytest.fixture(params=["pure", "compiled"])
def twin_kind(request):
    return request.param
