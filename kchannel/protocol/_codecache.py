"""Compiled schema codecs kept across processes, as ``__pycache__`` keeps
compiled modules.

Why: the schema codecs (``kchannel.protocol.schema``) are Python source
generated per API and version and compiled on first use; ``compile()`` of
the big ones (Fetch, Produce, Metadata responses: 500+ lines each) is most
of that.  A client process that sends a few requests pays it at start: for
a consumer reading 50,000 1 KiB records that was a third of its CPU time.
The source is deterministic, so its code object is cached under the hash
of the source (and of the interpreter's bytecode magic number), in memory
and in a directory:

* ``KCHANNEL_CODEC_CACHE``: the directory; empty or ``0`` disables the disk
  cache (the in-process one stays).  Default:
  ``$XDG_CACHE_HOME/kchannel/codecs`` (``~/.cache/kchannel/codecs``).

A cache file is only ever code kchannel generated itself, but it is
executed, so the directory is used only if it belongs to this user and
nobody else may write to it (it is created ``0700``); otherwise, or on any
error reading or writing it, the codec is compiled as before.  Files are
written whole (a temporary file renamed into place), so concurrent
processes never read half of one.
"""
import hashlib
import importlib.util
import marshal
import os
import stat

__all__ = ["compile_cached", "cache_dir"]

_memory = {}
_MAGIC = importlib.util.MAGIC_NUMBER
_dir_checked = {}


def cache_dir():
    """The disk cache directory in use, or None (disabled)."""
    env = os.environ.get("KCHANNEL_CODEC_CACHE")
    if env is not None:
        return None if env in ("", "0") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kchannel", "codecs")


def _usable(directory):
    """Whether ``directory`` is (or can be made) this user's own, writable
    by nobody else; checked once per process and directory."""
    ok = _dir_checked.get(directory)
    if ok is None:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            st = os.stat(directory)
            ok = (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
                  and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
        except (OSError, AttributeError):
            ok = False
        _dir_checked[directory] = ok
    return ok


def compile_cached(source, filename):
    """``compile(source, filename, "exec")``, from the cache when it has it."""
    key = (source, filename)
    code = _memory.get(key)
    if code is not None:
        return code
    directory = cache_dir()
    path = None
    if directory is not None and _usable(directory):
        digest = hashlib.sha256(_MAGIC + filename.encode() + b"\0" + source.encode())
        path = os.path.join(directory, digest.hexdigest()[:40] + ".code")
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data[:len(_MAGIC)] == _MAGIC:
                code = marshal.loads(data[len(_MAGIC):])
        except (OSError, ValueError, EOFError, TypeError):
            code = None
    if code is None:
        code = compile(source, filename, "exec")
        if path is not None:
            tmp = f"{path}.{os.getpid()}.tmp"
            try:
                with open(tmp, "wb") as f:
                    f.write(_MAGIC + marshal.dumps(code))
                os.replace(tmp, path)
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    _memory[key] = code
    return code
