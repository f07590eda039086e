"""Loading of kchannel's implementation twins.

Each hot path exists twice with the same interface: a pure-Python module and a
compiled (Cython) module built from ``kchannel_ext/<name>.pyx``.  That
interface is written down in ``kchannel._twin_protocols`` (one Protocol per
pair; tests/core/test_impl_contracts.py holds both twins to it).  The compiled
one is used when it imports; the pure one otherwise, or always when the
environment variable ``KCHANNEL_NO_EXTENSIONS=1`` is set (read once, when this
module is imported).

Why a twin fell back to pure Python is kept in ``reasons()`` and logged at
DEBUG: a missing extension is a normal state for a pure-Python install, not
something to warn about on every start.
"""
import importlib
import logging
import os

log = logging.getLogger("kchannel._impl")

NO_EXTENSIONS = os.environ.get("KCHANNEL_NO_EXTENSIONS", "").strip().lower() in (
    "1", "true", "yes", "on")

# name -> (pure module, compiled module).  The names are what ``loaded()``
# reports.
TWINS = {
    "framing": ("kchannel._framing_py", "kchannel._cframing"),
    "wire": ("kchannel.protocol._wire_py", "kchannel._cwire"),
    "tlspump": ("kchannel.network._tlspump_py", "kchannel.network._ctlspump"),
    "netloop": ("kchannel.network._netloop_py", "kchannel.network._cnetloop"),
    "sendqueue": ("kchannel.network._sendqueue_py", "kchannel.network._csendqueue"),
    "netpass": ("kchannel.network._netpass_py", "kchannel.network._cnetpass"),
    "clientloop": ("kchannel.client._clientloop_py", "kchannel.client._cclientloop"),
    "scram": ("kchannel.security.sasl._scram_py", "kchannel._cscram"),
    "records": ("kchannel.protocol.records._records_py", "kchannel._crecords"),
    "partitioner": ("kchannel.producer._partitioner_py", "kchannel._cpartitioner"),
    "appender": ("kchannel.producer._appender_py", "kchannel._cappender"),
    "senderloop": ("kchannel.producer._senderloop_py", "kchannel.producer._csenderloop"),
    "aiosend": ("kchannel.aio._aiosend_py", "kchannel._caiosend"),
    "looppass": ("kchannel.aio._looppass_py", "kchannel.aio._clooppass"),
    "metrics": ("kchannel._metrics_py", "kchannel._cmetrics"),
}

_loaded = {}    # twin name -> "compiled" | "pure"
_reasons = {}   # twin name -> why the pure twin is active
_modules = {}   # twin name -> active module


def register(name, pure_name, compiled_name):
    """Add a twin to the registry (for optional twins such as SCRAM's)."""
    TWINS[name] = (pure_name, compiled_name)


def _twin_name(pure_name, compiled_name):
    for name, pair in TWINS.items():
        if pair == (pure_name, compiled_name):
            return name
    # Not registered: remember it under its own pair so implementation()
    # accounts for it too.
    name = pure_name.rsplit(".", 1)[-1].lstrip("_")
    if name.endswith("_py"):
        name = name[:-3]
    TWINS.setdefault(name, (pure_name, compiled_name))
    return name


def load(pure_name, compiled_name):
    """Return the compiled module ``compiled_name`` if it can be used, else the
    pure module ``pure_name``.

    The compiled module is skipped when ``KCHANNEL_NO_EXTENSIONS=1`` or when
    importing it fails for any reason (not built, built for another Python,
    broken build).  A failure to import the pure module is not hidden: it is a
    bug and propagates.
    """
    name = _twin_name(pure_name, compiled_name)
    if name in _modules:
        return _modules[name]
    module = None
    if NO_EXTENSIONS:
        reason = "KCHANNEL_NO_EXTENSIONS=1"
    else:
        try:
            module = importlib.import_module(compiled_name)
            reason = None
        except Exception as exc:  # ImportError, or an error raised at init
            reason = f"{type(exc).__name__}: {exc}"
    if module is None:
        module = importlib.import_module(pure_name)
        log.debug("%s: using pure-Python %s (%s unavailable: %s)",
                  name, pure_name, compiled_name, reason)
        _loaded[name] = "pure"
        _reasons[name] = reason
    else:
        log.debug("%s: using compiled %s", name, compiled_name)
        _loaded[name] = "compiled"
        _reasons.pop(name, None)
    _modules[name] = module
    return module


def load_twin(name):
    """``load()`` a registered twin by its name (``"framing"``, ...)."""
    pure_name, compiled_name = TWINS[name]
    return load(pure_name, compiled_name)


def _load_all():
    """Load every registered twin whose pure module exists.

    A twin whose pure module is absent, or whose package needs an optional
    dependency that is not installed, is not part of this installation and
    is ignored; any other import error propagates.
    """
    for name, (pure_name, _compiled_name) in list(TWINS.items()):
        if name in _modules:
            continue
        try:
            # Through the pure twin's package first, as an application's
            # imports reach a twin: a compiled twin may import from that
            # package (kchannel._caiosend from kchannel.aio), whose
            # __init__ loads the twin itself; importing the compiled module
            # first would have the package find it half-initialized and fall
            # back to the pure twin.
            importlib.import_module(pure_name.rpartition(".")[0])
            if name in _modules:
                continue
            load_twin(name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            absent = missing == pure_name or pure_name.startswith(f"{missing}.")
            # A twin whose package needs an optional dependency that is not
            # installed (kchannel.aio: greenlet, the `aio` extra) is not part
            # of this installation either; a kchannel module missing is a bug.
            optional = not (missing == "kchannel" or missing.startswith("kchannel."))
            if not (absent or optional):
                raise


def log_choices():
    """Log at DEBUG which twin each hot path runs, as ``load()`` does.

    ``load()`` logs when a module first imports its twin, which for a command
    such as ``kchannel serve`` happens at import time, before the command has
    configured logging; the command calls this once logging is set up so the
    choice still reaches its log.
    """
    _load_all()
    for name in sorted(_loaded):
        pure_name, compiled_name = TWINS[name]
        if _loaded[name] == "pure":
            log.debug("%s: using pure-Python %s (%s unavailable: %s)",
                      name, pure_name, compiled_name, _reasons.get(name))
        else:
            log.debug("%s: using compiled %s", name, compiled_name)


def loaded_kind(name):
    """``"compiled"`` or ``"pure"`` for one twin that is already loaded."""
    return _loaded[name]


def loaded():
    """Return ``{twin name: "compiled" | "pure"}`` for every twin present.

    Loads the registered twins that have not been imported yet, so the answer
    does not depend on which parts of kchannel happen to be in use.
    """
    _load_all()
    return dict(_loaded)


def reasons():
    """Return ``{twin name: why}`` for each twin running pure Python."""
    _load_all()
    return dict(_reasons)


def implementation():
    """Summarise ``loaded()`` in one word.

    * ``"compiled"``: every twin present runs its compiled module;
    * ``"pure"``: none does (pure-Python install, failed build, or
      ``KCHANNEL_NO_EXTENSIONS=1``); also when no twin is present at all;
    * ``"mixed"``: some twins are compiled and others fell back to pure
      Python (typically a partial build; ``reasons()`` says why).
    """
    kinds = set(loaded().values())
    if kinds == {"compiled"}:
        return "compiled"
    if "compiled" in kinds:
        return "mixed"
    return "pure"
