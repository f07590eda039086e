"""Twin loading (kchannel._impl) and kchannel.implementation().

Environment-dependent behaviour (KCHANNEL_NO_EXTENSIONS is read at import) is
checked in fresh interpreters."""
import json
import os
import subprocess
import sys

import pytest

import kchannel
from kchannel import _impl, framing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_py(code, **env):
    full_env = dict(os.environ)
    full_env.pop("KCHANNEL_NO_EXTENSIONS", None)
    full_env.update(env)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=full_env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


REPORT = ("import json, kchannel, kchannel._impl as i; "
          "print(json.dumps([kchannel.implementation(), i.loaded(), i.reasons()]))")


def test_no_extensions_forces_pure():
    kind, loaded, reasons = json.loads(run_py(REPORT, KCHANNEL_NO_EXTENSIONS="1"))
    assert kind == "pure"
    assert loaded and set(loaded.values()) == {"pure"}
    assert "framing" in loaded
    assert all(r == "KCHANNEL_NO_EXTENSIONS=1" for r in reasons.values())
    assert run_py("from kchannel import framing; print(framing.FrameDecoder.__module__)",
                  KCHANNEL_NO_EXTENSIONS="1") == "kchannel._framing_py"


def test_implementation_summarises_loaded():
    loaded = _impl.loaded()
    kinds = set(loaded.values())
    expected = ("compiled" if kinds == {"compiled"} else
                "mixed" if "compiled" in kinds else "pure")
    assert kchannel.implementation() == _impl.implementation() == expected
    assert set(_impl.reasons()) == {n for n, k in loaded.items() if k == "pure"}


def test_framing_reexports_the_active_twin():
    kind = _impl.loaded()["framing"]
    assert framing.IMPLEMENTATION == kind
    module = "kchannel._cframing" if kind == "compiled" else "kchannel._framing_py"
    assert framing.FrameDecoder.__module__ == module
    assert framing.encode_frame(b"x") == b"\x00\x00\x00\x01x"


def test_compiled_is_used_when_built():
    try:
        import kchannel._cframing  # noqa: F401
    except ImportError:
        if os.environ.get("KCHANNEL_REQUIRE_EXTENSIONS") == "1":
            pytest.fail("KCHANNEL_REQUIRE_EXTENSIONS=1 but kchannel._cframing is not built")
        pytest.skip("compiled extensions not built")
    kind, loaded, reasons = json.loads(run_py(REPORT))
    assert loaded["framing"] == "compiled"
    if os.environ.get("KCHANNEL_REQUIRE_EXTENSIONS") == "1":
        # a fresh interpreter asking first (as .ci/run does) finds every twin
        # compiled, whatever imports its compiled module makes
        assert (kind, reasons) == ("compiled", {}), reasons


def test_a_twin_needing_a_missing_optional_dependency_is_left_out():
    # kchannel.aio needs greenlet (the `aio` extra): without it, asking which
    # twins run (as `kchannel serve` does when it starts) must not fail
    code = ("import sys; sys.modules['greenlet'] = None; " + REPORT)
    for env in ({}, {"KCHANNEL_NO_EXTENSIONS": "1"}):
        kind, loaded, reasons = json.loads(run_py(code, **env))
        assert "aiosend" not in loaded and "aiosend" not in reasons
        assert loaded["framing"] in ("compiled", "pure") and kind in ("compiled", "pure")


def test_missing_compiled_module_falls_back_and_says_why():
    mod = _impl.load("json", "kchannel._cdoes_not_exist")
    try:
        assert mod is json
        assert _impl.loaded()["json"] == "pure"
        reason = _impl.reasons()["json"]
        if _impl.NO_EXTENSIONS:
            assert reason == "KCHANNEL_NO_EXTENSIONS=1"
        else:
            assert "kchannel._cdoes_not_exist" in reason
        assert _impl.load("json", "kchannel._cdoes_not_exist") is json
    finally:
        for table in (_impl.TWINS, _impl._loaded, _impl._reasons, _impl._modules):
            table.pop("json", None)


def test_missing_pure_module_is_an_error():
    try:
        with pytest.raises(ImportError):
            _impl.load("kchannel._no_such_pure_module", "kchannel._cno_such_module")
    finally:
        _impl.TWINS.pop("no_such_pure_module", None)


def test_loaded_ignores_twins_absent_from_this_installation():
    _impl.register("ghost", "kchannel._ghost_py", "kchannel._cghost")
    try:
        assert "ghost" not in _impl.loaded()
    finally:
        _impl.TWINS.pop("ghost")
