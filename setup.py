"""Build script for kchannel's optional compiled twins.

Metadata lives in pyproject.toml; this file only adds the Cython extensions,
found by two conventions, so a new compiled twin needs no change here:

* pure-Python mode (one source): ``kchannel/<pkg>/_c<name>.pxd`` beside the
  pure twin ``kchannel/<pkg>/_<name>_py.py`` compiles that ``.py`` itself as
  ``kchannel.<pkg>._c<name>``, the ``.pxd`` adding the C types (Cython's
  augmenting ``.pxd``: Cython finds it by the module name);
* a hand-written ``kchannel_ext/<stem>.pyx`` becomes ``kchannel.<stem>``
  (kept only where the pure-mode build is measurably slower; the README's
  twin section says which and by how much).
  Its ``.pxd``, when other compiled twins cimport its C types, is
  ``kchannel_ext/include/kchannel/<stem>.pxd`` (on the include path), as
  are inline C helpers shared by several twins with no module of their own
  (``_slots.pxd``).

The extensions are optional: each has a pure-Python twin that is used when it
is missing.  A failed Cython or C compile therefore only prints a warning and
the build goes on without that module, unless ``KCHANNEL_REQUIRE_EXTENSIONS=1``
(CI, release builds), where any failure stops the build.
``KCHANNEL_NO_EXTENSIONS=1`` skips compiling altogether.
"""
import glob
import os
import re
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_DIR = "kchannel_ext"
COMPILE_ARGS = ["-O2"]


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


REQUIRE = _flag("KCHANNEL_REQUIRE_EXTENSIONS")
SKIP = _flag("KCHANNEL_NO_EXTENSIONS")


def _warn(message):
    bar = "*" * 72
    sys.stderr.write(f"\n{bar}\nWARNING: {message}\n"
                     "kchannel will use its pure-Python implementation for the "
                     "affected modules.\n"
                     "Set KCHANNEL_REQUIRE_EXTENSIONS=1 to make this an error.\n"
                     f"{bar}\n\n")


def _pyx_sources():
    """``(module name, source)`` of every compiled twin."""
    # Relative paths: setuptools wants sources relative to setup.py.
    pattern = os.path.join(HERE, EXT_DIR, "*.pyx")
    found = [(f"kchannel.{os.path.splitext(os.path.basename(p))[0]}", os.path.relpath(p, HERE))
             for p in glob.glob(pattern)]
    for pxd in glob.glob(os.path.join(HERE, "kchannel", "**", "_c*.pxd"), recursive=True):
        folder, name = os.path.split(os.path.relpath(pxd, HERE))
        stem = os.path.splitext(name)[0]
        source = os.path.join(folder, f"_{stem[2:]}_py.py")
        if not os.path.exists(os.path.join(HERE, source)):
            raise SystemExit(f"{pxd}: no pure twin {source} to compile with it")
        found.append((".".join(folder.split(os.sep) + [stem]), source))
    return sorted(found)


def _extensions():
    """One Extension per compiled twin, still as .pyx / .py sources.

    Cythonizing is deferred to build time (see OptionalBuildExt) so that a
    missing Cython or a broken .pyx cannot break ``egg_info`` / ``sdist`` or
    an install that only wants the pure-Python package.
    """
    from setuptools import Extension

    exts = []
    for name, src in _pyx_sources():
        # optional=True also makes setuptools skip a module that failed to
        # build when an editable install copies the results into the tree.
        exts.append(Extension(name, [src],
                              extra_compile_args=list(COMPILE_ARGS),
                              optional=not REQUIRE))
    return exts


def _stale_pure_twin(ext):
    """Whether a pure-mode twin's generated C is older than its .pxd.

    The .pxd is named after the module (``_cnetloop.pxd`` beside
    ``_netloop_py.py``), not after the source, and cythonize's timestamp
    check only looks for the source's own name: a change to the .pxd alone
    (a cdef method turned cpdef, which moves the vtable that other
    extensions cimport and call through) left the module's C as it was,
    and the rebuilt callers then called into the wrong slots.
    """
    (src,) = ext.sources
    if not src.endswith(".py"):
        return False
    pxd = os.path.join(os.path.dirname(src), ext.name.rsplit(".", 1)[-1] + ".pxd")
    c = src[:-3] + ".c"
    if not (os.path.exists(pxd) and os.path.exists(c)):
        return False
    # The .pxd's own cimports (another twin's vtable, a shared include)
    # are not tracked either, for the same reason: any newer one counts.
    built = os.path.getmtime(c)
    return any(os.path.getmtime(p) > built for p in _pxd_closure(pxd))


_CIMPORT = re.compile(r"^\s*(?:from\s+(kchannel(?:\.\w+)+)\s+cimport|cimport\s+(kchannel(?:\.\w+)+))",
                      re.M)


def _pxd_closure(pxd, seen=None):
    """``pxd`` and every kchannel .pxd it cimports, transitively (found in
    the package or on the extensions' include path)."""
    seen = set() if seen is None else seen
    if pxd in seen:
        return seen
    seen.add(pxd)
    with open(pxd, encoding="utf-8") as f:
        text = f.read()
    for m in _CIMPORT.finditer(text):
        parts = (m.group(1) or m.group(2)).split(".")
        for root in (HERE, os.path.join(HERE, EXT_DIR, "include")):
            dep = os.path.join(root, *parts) + ".pxd"
            if os.path.exists(dep):
                _pxd_closure(dep, seen)
                break
    return seen


class OptionalBuildExt(build_ext):
    """build_ext that cythonizes each extension itself and treats failures as
    optional (warning) unless extensions are required."""

    def finalize_options(self):
        super().finalize_options()
        if SKIP:
            self.extensions = []

    def run(self):
        if SKIP:
            sys.stderr.write("KCHANNEL_NO_EXTENSIONS=1: not compiling kchannel's "
                             "extensions (pure Python only)\n")
            return
        if not self.extensions:
            return
        try:
            from Cython.Build import cythonize
        except ImportError as exc:
            if REQUIRE:
                raise SystemExit("KCHANNEL_REQUIRE_EXTENSIONS=1 but Cython is not "
                                 f"installed ({exc}); install Cython>=3") from exc
            _warn(f"Cython is not installed ({exc}); no extension is compiled.")
            self.extensions = []
            return
        ready = []
        for ext in self.extensions:
            try:
                (cythonized,) = cythonize(
                    [ext],
                    # --force regenerates the C too (not only recompiles it)
                    force=bool(self.force) or _stale_pure_twin(ext),
                    language_level=3,
                    quiet=True,
                    include_path=[os.path.join(HERE, EXT_DIR, "include")],
                    # binding: def functions and methods become
                    # cyfunctions that inspect.signature() reads like
                    # Python functions; embedsignature: a cdef class's
                    # __init__ (a slot, no signature) is written at the head
                    # of the class docstring.  tests/core/test_impl_contracts.py
                    # compares both against the pure twins.
                    compiler_directives={"embedsignature": True, "binding": True},
                )
                # Keep setuptools' own (already finalized) Extension object;
                # only its sources change from .pyx to the generated .c.
                ext.sources = cythonized.sources
                # Honour the .pyx's "# distutils:" directives (e.g.
                # "libraries = crypto"), which cythonize only put on its copy.
                for attr in ("libraries", "library_dirs", "include_dirs",
                             "define_macros", "extra_link_args"):
                    current = getattr(ext, attr)
                    for item in getattr(cythonized, attr, None) or ():
                        if item not in current:
                            current.append(item)
                ready.append(ext)
            except BaseException as exc:  # Cython raises SystemExit/CompileError
                if isinstance(exc, KeyboardInterrupt):
                    raise
                if REQUIRE:
                    raise SystemExit(f"KCHANNEL_REQUIRE_EXTENSIONS=1: Cython failed "
                                     f"on {ext.sources[0]}: {exc!r}") from exc
                _warn(f"Cython failed on {ext.sources[0]} ({exc!r}); "
                      f"{ext.name} is not built.")
        self.extensions = ready
        super().run()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except BaseException as exc:  # CompileError, LinkError, DistutilsExecError
            if isinstance(exc, KeyboardInterrupt) or REQUIRE:
                if REQUIRE:
                    sys.stderr.write(f"KCHANNEL_REQUIRE_EXTENSIONS=1: building {ext.name} "
                                     "failed\n")
                raise
            _warn(f"compiling {ext.name} failed ({exc!r}); it is not built.")


setup(
    ext_modules=[] if SKIP else _extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
