"""PBKDF2 (SCRAM's Hi) on both twins: pure (cryptography) and compiled
(kchannel._cscram), against hashlib and RFC test vectors."""
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kchannel.security.sasl.scram  # noqa: F401  (registers the "scram" twin)


# RFC 7914 section 11: PBKDF2-HMAC-SHA-256 (first 32 bytes of the vectors).
def test_rfc7914_vectors(impl):
    hi = impl.scram.pbkdf2_hmac
    assert hi("sha256", b"passwd", b"salt", 1).hex() == \
        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
    assert hi("sha256", b"Password", b"NaCl", 80000).hex() == \
        "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56"


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
@pytest.mark.parametrize("iterations", [1, 2, 3, 4096])
@pytest.mark.parametrize("password", [b"", b"pencil", b"x" * 64, b"y" * 129, bytes(range(256))])
def test_matches_hashlib(impl, hash_name, iterations, password):
    for salt in (b"", b"W22ZaJ0SNY7soEsUEjb6gQ", b"s" * 300):
        assert impl.scram.pbkdf2_hmac(hash_name, password, salt, iterations) == \
            hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


@settings(max_examples=60, deadline=None)
@given(password=st.binary(max_size=200), salt=st.binary(max_size=100),
       iterations=st.integers(1, 50), hash_name=st.sampled_from(["sha256", "sha512"]))
def test_property_matches_hashlib_both_twins(password, salt, iterations, hash_name):
    from tests.fixtures.impl import import_twin
    pure = import_twin("pure", "scram")
    expected = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    assert pure.pbkdf2_hmac(hash_name, password, salt, iterations) == expected
    try:
        compiled = __import__("kchannel._cscram", fromlist=["x"])
    except ImportError:
        return
    assert compiled.pbkdf2_hmac(hash_name, bytearray(password), memoryview(salt),
                                iterations) == expected


def test_rejects_bad_arguments(impl):
    with pytest.raises(ValueError):
        impl.scram.pbkdf2_hmac("md5", b"p", b"s", 1)
    with pytest.raises(ValueError):
        impl.scram.pbkdf2_hmac("sha256", b"p", b"s", 0)
