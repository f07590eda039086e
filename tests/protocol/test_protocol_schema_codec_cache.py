"""The schema codecs' compiled code cache (``kchannel.protocol._codecache``):
kept on disk under the hash of the generated source, used only from a
directory this user alone may write, and never trusted blindly: a corrupt
file is compiled again."""
import builtins
import os
import stat

import pytest

from kchannel.protocol import _codecache
from kchannel.protocol.messages import API

SOURCE = "def f(x):\n    return x * 2 + 1\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "codecs"
    monkeypatch.setenv("KCHANNEL_CODEC_CACHE", str(directory))
    monkeypatch.setattr(_codecache, "_memory", {})
    monkeypatch.setattr(_codecache, "_dir_checked", {})
    return directory


def _exec_f(code):
    ns = {}
    exec(code, ns)
    return ns["f"](20)


def _forget(monkeypatch):
    monkeypatch.setattr(_codecache, "_memory", {})


def test_a_compiled_codec_is_reused_from_disk_by_a_later_process(cache, monkeypatch):
    assert _exec_f(_codecache.compile_cached(SOURCE, "<t>")) == 41
    files = os.listdir(cache)
    assert len(files) == 1 and files[0].endswith(".code")
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    # A new process (no in-memory copy) loads it: compile() is not called.
    _forget(monkeypatch)

    def no_compile(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(builtins, "compile", no_compile)
    assert _exec_f(_codecache.compile_cached(SOURCE, "<t>")) == 41


def test_another_source_or_name_is_another_entry(cache):
    _codecache.compile_cached(SOURCE, "<t>")
    _codecache.compile_cached(SOURCE.replace("+ 1", "+ 2"), "<t>")
    _codecache.compile_cached(SOURCE, "<u>")
    assert len(os.listdir(cache)) == 3


def test_a_corrupt_file_is_compiled_again_and_replaced(cache, monkeypatch):
    _codecache.compile_cached(SOURCE, "<t>")
    (path,) = [cache / f for f in os.listdir(cache)]
    path.write_bytes(b"garbage")
    _forget(monkeypatch)
    assert _exec_f(_codecache.compile_cached(SOURCE, "<t>")) == 41
    assert path.read_bytes() != b"garbage"


def test_a_directory_others_may_write_is_not_used(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    assert _exec_f(_codecache.compile_cached(SOURCE, "<t>")) == 41
    assert os.listdir(cache) == []


def test_disabled_with_zero(cache, monkeypatch):
    monkeypatch.setenv("KCHANNEL_CODEC_CACHE", "0")
    assert _codecache.cache_dir() is None
    assert _exec_f(_codecache.compile_cached(SOURCE, "<t>")) == 41
    assert not cache.exists()


def test_codecs_from_the_cache_encode_and_decode_as_compiled_ones(cache, monkeypatch):
    """A whole message from the disk cache, in a fresh spec: the same bytes
    and the same body as the message compiled in this process."""
    spec = API[3].request               # Metadata
    version = spec.valid_versions.hi
    body = spec.default_body(version)
    body["allow_auto_topic_creation"] = False
    expected = spec.encode(body, version)
    fresh = type(spec)(spec.name, spec.valid_versions, spec.flexible_versions, spec.fields,
                       spec.api_key, spec.type)
    fresh.encode(body, version)         # compiled, written to the cache
    _forget(monkeypatch)
    again = type(spec)(spec.name, spec.valid_versions, spec.flexible_versions, spec.fields,
                       spec.api_key, spec.type)
    assert again.encode(body, version) == expected
    assert again.decode(expected, version) == fresh.decode(expected, version)
    assert os.listdir(cache)
