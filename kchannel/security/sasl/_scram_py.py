"""Pure-Python twin of ``kchannel._cscram``: PBKDF2-HMAC (SCRAM's Hi()).

``cryptography``'s PBKDF2HMAC runs the loop in OpenSSL, about twice as fast as
``hashlib.pbkdf2_hmac`` here; hashlib is the fallback when cryptography is
missing.  Same interface as the compiled twin.
"""
import hashlib

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
