"""Pure-Python twin of ``kchannel._cscram``: PBKDF2-HMAC (SCRAM's Hi()).

``cryptography``'s PBKDF2HMAC runs the loop in OpenSSL, about twice as fast as
``hashlib.pbkdf2_hmac`` here; hashlib is the fallback when cryptography is
missing.  Same interface as the compiled twin.
"""
import hashlib
import secrets

try:
    from cryptography.hazmat.primitives import hashes as _hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC as _PBKDF2HMAC
    _ALGORITHMS = {"sha256": _hashes.SHA256, "sha512": _hashes.SHA512}
except ImportError:  # pragma: no cover - cryptography is a dependency
    _PBKDF2HMAC = None
    _ALGORITHMS = {}

_DIGEST_SIZES = {"sha256": 32, "sha512": 64}


def pbkdf2_hmac(hash_name, password, salt, iterations):
    """Hi(password, salt, iterations) of RFC 5802 = PBKDF2 with dkLen = hLen."""
    if hash_name not in _DIGEST_SIZES:
        raise ValueError(f"Unsupported hash {hash_name}")
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    if _PBKDF2HMAC is not None:
        kdf = _PBKDF2HMAC(algorithm=_ALGORITHMS[hash_name](), length=_DIGEST_SIZES[hash_name],
                          salt=bytes(salt), iterations=int(iterations))
        return kdf.derive(bytes(password))
    return hashlib.pbkdf2_hmac(hash_name, bytes(password), bytes(salt), int(iterations))


_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
# every two-digit string, "00" to "zz": half as many big-int divisions
_B36_PAIRS = tuple(a + b for a in _B36 for b in _B36)


def _base36_int(n):
    if n < 36:
        return _B36[n]
    out = []
    while n:
        n, r = divmod(n, 1296)
        out.append(_B36_PAIRS[r])
    # only the most significant pair can start with a zero
    return "".join(reversed(out)).lstrip("0")


def base36(data, shift=0):
    """Base 36 (digits and lower-case letters, no leading zeros) of
    ``int.from_bytes(data, "big") >> shift`` for at most 64 bytes of
    ``data`` and a ``shift`` of 0-7."""
    if len(data) > 64 or not 0 <= shift <= 7:
        raise ValueError("base36: at most 64 bytes and a shift of 0-7")
    return _base36_int(int.from_bytes(data, "big") >> shift)


def secure_random_string():
    """A 130-bit random number in base 36 (Kafka's
    ``ScramFormatter.secureRandomString``: ``new BigInteger(130,
    secureRandom).toString(36)``)."""
    return _base36_int(secrets.randbits(130))
