"""The generated schema codec against the closure codec it replaced
(``tests/fixtures/schema_reference.py``), for every message spec at every
version: the same bytes for the same body, the same dicts for the same bytes,
and the same exceptions with the same messages for truncated or corrupted
input and for values that cannot be encoded."""
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.protocol import messages
from kchannel.protocol.schema import UNKNOWN_TAGGED_FIELDS
from kchannel.protocol.wire import Reader, Writer
from tests.fixtures.schema_reference import compile_struct
from tests.fixtures.strategies import SPEC_VERSION_IDS as IDS
from tests.fixtures.strategies import SPEC_VERSIONS as CASES
from tests.fixtures.strategies import examples


_JUNK = ("x", 1.5, None, {}, [1], [{}], b"\x01", 2 ** 70, -1, object(), True)


def _prim(rnd, t):
    if t == "bool":
        return rnd.random() < 0.5
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
    if t in bits:
        n = bits[t]
        return rnd.choice([0, -1, 1, 2 ** (n - 1) - 1, -2 ** (n - 1),
                           rnd.randrange(-2 ** (n - 1), 2 ** (n - 1))])
    if t == "uint16":
        return rnd.randrange(0, 2 ** 16)
    if t == "uint32":
        return rnd.randrange(0, 2 ** 32)
    if t == "float64":
        return rnd.choice([0.0, -1.5, 1e300, rnd.random()])
    if t == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if t == "string":
        return rnd.choice(["", "a", "topic-1", "\u00e9\u4e2d", "x" * rnd.randrange(0, 200)])
    return bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 140)))


def _body(rnd, fields, version, flexible, junk=0.0, depth=0):
    """A body of fields at version: some fields left out (they take their
    defaults), some tagged fields at their defaults, some nulls, unknown tagged
    fields in flexible structs; with ``junk`` > 0 some values are replaced by
    values of the wrong type or range."""
    out = {}
    for f in fields:
        if version not in f.versions or rnd.random() < 0.15:
            continue
        if junk and rnd.random() < junk:
            out[f.key] = rnd.choice(_JUNK)
            continue
        if f.tag is not None and rnd.random() < 0.3:
            out[f.key] = f.default_value()
            continue
        if version in f.nullable_versions and rnd.random() < 0.25:
            out[f.key] = None
            continue
        f_flex = flexible if f.flexible_versions is None else version in f.flexible_versions
        if f.is_struct:
            def elem():
                return _body(rnd, f.fields, version, f_flex, junk, depth + 1)
        else:
            def elem():
                return _prim(rnd, f.element_type)
        if f.is_array:
            out[f.key] = [elem() for _ in range(rnd.randrange(0, 4 if depth == 0 else 3))]
        elif f.is_struct and rnd.random() < 0.1:
            out[f.key] = None  # a non-nullable struct at its defaults
        else:
            out[f.key] = elem()
    if flexible and rnd.random() < 0.3:
        tags = rnd.sample(range(40, 60), rnd.randrange(1, 3))
        out[UNKNOWN_TAGGED_FIELDS] = [(t, _prim(rnd, "bytes")[:20]) for t in tags]
    return out


def _canon(value):
    """value with floats as their bits (a corrupted float64 may be a NaN,
    which equals nothing) and views as bytes, for comparisons."""
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    if isinstance(value, memoryview):
        return ("view", value.tobytes())
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_canon(v) for v in value)
    return value


def _canon_outcome(fn, *args):
    try:
        return "ok", _canon(fn(*args))
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        return type(e), str(e)


def _ref_encode(ref, body):
    w = Writer()
    ref.encode(w, body)
    return w.getvalue()


def _ref_decode(ref, buf, offset=0):
    r = Reader(buf, offset)
    return ref.decode(r), r.pos


def _fast_decode(spec, version):
    def decode(buf, offset=0):
        return spec.decode_from(buf, offset, version)
    return decode


_SETTINGS = settings(max_examples=examples(12), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.data_too_large])

# ``rnd`` is a ``random.Random`` seeded by Hypothesis (use_true_random=True):
# every example is still reproducible from the seed Hypothesis reports, but
# each of the thousands of random calls per example is a plain Mersenne
# Twister call instead of a Hypothesis draw, which was over half of this
# module's CPU.  What is given up is shrinking inside one example's random
# calls; the oracle comparison prints both outcomes, which is what a failure
# needs.


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@_SETTINGS
@given(rnd=st.randoms(use_true_random=True))
def test_generated_codec_matches_the_reference(spec, version, rnd):
    flexible = spec.is_flexible(version)
    ref = compile_struct(spec.fields, version, flexible)
    fast_decode = _fast_decode(spec, version)
    for body in (spec.default_body(version), {}, _body(rnd, spec.fields, version, flexible)):
        encoded = spec.encode(body, version)
        assert encoded == _ref_encode(ref, body)
        w = Writer()
        w.write_raw(b"?")
        spec.encode_into(w, body, version)
        assert w.getvalue() == b"?" + encoded
        # At an offset, with trailing bytes (ignored, as Kafka does).
        framed = b"\x07" * 3 + encoded + b"\x00\x01"
        got = fast_decode(framed, 3)
        assert got == _ref_decode(ref, framed, 3)
        assert got[1] == 3 + len(encoded)
        assert spec.decode(framed, version, 3) == got[0]
        r = Reader(framed, 3)
        assert spec.read(r, version) == got[0] and r.pos == got[1]
        # Decode-encode is the identity (unknown tagged fields kept).
        assert spec.encode(got[0], version) == encoded

        # Every truncation (up to 80 of them) fails the same way.
        step = max(1, len(encoded) // 80)
        for n in range(0, len(encoded), step):
            cut = encoded[:n]
            assert _canon_outcome(fast_decode, cut) == _canon_outcome(_ref_decode, ref, cut)

        # Corrupted bytes: the same dict or the same error.
        for _ in range(4):
            bad = bytearray(encoded)
            for _ in range(rnd.randrange(1, 4)):
                if bad:
                    bad[rnd.randrange(len(bad))] = rnd.choice([0, 1, 0x7F, 0x80, 0xFF,
                                                               rnd.getrandbits(8)])
            bad = bytes(bad)
            assert _canon_outcome(fast_decode, bad) == _canon_outcome(_ref_decode, ref, bad)


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@_SETTINGS
@given(rnd=st.randoms(use_true_random=True))
def test_generated_codec_refuses_values_as_the_reference(spec, version, rnd):
    flexible = spec.is_flexible(version)
    ref = compile_struct(spec.fields, version, flexible)
    body = _body(rnd, spec.fields, version, flexible, junk=0.2)
    assert _canon_outcome(spec.encode, body, version) == _canon_outcome(_ref_encode, ref, body)


def test_reference_oracle_sees_errors_with_field_names():
    # The comparisons above are only as good as their failing cases: make sure
    # field-naming errors occur and agree.
    spec = messages.METADATA.response
    body = {"brokers": [{"node_id": 1, "host": 5, "port": 1}], "topics": []}
    ref = compile_struct(spec.fields, 1, False)
    fast = _canon_outcome(spec.encode, body, 1)
    assert fast == _canon_outcome(_ref_encode, ref, body)
    assert fast[0] is ValueError and "field Host" in fast[1]
    encoded = spec.encode({"brokers": [{"host": "h" * 20}], "topics": []}, 1)
    cut = encoded[:20]  # within the host string, past the array's minimum size
    fast = _canon_outcome(_fast_decode(spec, 1), cut)
    assert fast == _canon_outcome(_ref_decode, ref, cut)
    assert "(field Host)" in fast[1]
