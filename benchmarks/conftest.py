"""Benchmarks: run with ``python -m pytest benchmarks`` (never part of the
test suite, whose testpaths is tests/).

Fixture ``twin``: parametrized "pure" / "compiled"; ``twin("framing")``
returns that kind's module of the named twin (see ``kchannel._impl.TWINS``).
The compiled parameter is skipped when the extensions are not built.
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
def twin(request):
    kind = request.param

    def get(name):
        return load_twin(name, kind)

    get.kind = kind
    return get
