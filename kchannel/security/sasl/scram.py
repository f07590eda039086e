"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Wire format (Kafka's ``ScramMessages``)::

    client-first  n,[a=authzid],n=<saslname>,r=<cnonce>[,<ext>=<value>...]
    server-first  r=<cnonce><snonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<cnonce><snonce>,p=<base64 proof>
    server-final  v=<base64 server signature>     (or e=<error>)

Math (RFC 5802 section 3)::

    SaltedPassword  = Hi(password, salt, i)          (PBKDF2-HMAC, dkLen = hLen)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    StoredKey       = H(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

Where kchannel is stricter than Kafka's Java implementation, on purpose:

* The server answers an unknown user like a wrong password.  Kafka fails
  the client-first message for an unknown user; kchannel answers with a
  server-first built from a stand-in credential derived from the user name
  and the credential store's secret (a salt stable across attempts, restarts
  and servers sharing the store), 4096 iterations (Kafka's default), and
  fails the client-final message with the same message as a bad password,
  after the same HMAC work.  The stand-in is derived for every login, so
  both paths do the same work before the server-first message; README
  (SCRAM) says what this hides and what not (a non-default iteration count).
* The server checks the channel-binding attribute (it must be the base64 of
  the gs2 header, i.e. ``biws`` for ``n,,``: no channel binding) and that the
  client-final nonce equals the combined nonce.  Both sides refuse a
  mandatory extension (``m=``), as RFC 5802 requires.
* The client refuses a server nonce that does not extend the client nonce.
* AuthMessage is built from the messages as received (RFC 5802) rather than
  re-serialised; for Kafka peers the result is the same bytes.

Failure messages sent to the client follow Kafka: an authorization id other
than the user name gets Kafka's specific message; every other server-side
failure gets ``Authentication failed during authentication due to invalid
credentials with SASL mechanism <mechanism>`` (what Kafka's authenticator sends
for a ``SaslException``).  The precise reason is logged at DEBUG on the server.

PBKDF2 is the whole cost of SCRAM.  The client keeps an LRU cache of derived
keys per (password, salt, iterations, mechanism), keyed by an HMAC of those
under a per-process random key (the password is never a dict key), so a burst
of reconnects derives once.  The server stores and uses only salt, iterations,
StoredKey and ServerKey.
"""
import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from kchannel import _impl, errors
from kchannel.config.types import reveal
from kchannel.security.sasl import _scram_py
from kchannel.security.sasl.interfaces import (
    CREDENTIAL_LIFETIME_MS, TOKEN_AUTH, SaslClientMechanism, SaslServerMechanism, jaas_option)
from kchannel.security.sasl.scram_credential import DEFAULT_ITERATIONS, ScramCredential
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.scram")


_HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}

# The SCRAM twin: PBKDF2 (Hi), nonces and salts in base 36.
_pbkdf2 = _impl.load("kchannel.security.sasl._scram_py", "kchannel._cscram")


@dataclass(frozen=True)
class ScramMechanism:
    """Kafka's internal ``ScramMechanism`` enum."""

    mechanism_name: str     # "SCRAM-SHA-256"
    enum_name: str          # "SCRAM_SHA_256": how Kafka prints it in messages
    hash_name: str          # hashlib / OpenSSL name
    type: int               # the int8 of Describe/AlterUserScramCredentials
    digest_size: int
    min_iterations: int = 4096
    max_iterations: int = 16384

    def __str__(self):
        return self.enum_name


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "SCRAM_SHA_256", "sha256", 1, 32)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "SCRAM_SHA_512", "sha512", 2, 64)
MECHANISMS = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type: m for m in MECHANISMS.values()}


def mechanism_for(name):
    """The :class:`ScramMechanism` for a mechanism name, or ValueError."""
    if isinstance(name, ScramMechanism):
        return name
    try:
        return MECHANISMS[name]
    except KeyError:
        raise ValueError(f"Unknown SCRAM mechanism {name}") from None


def is_scram(name):
    return name in MECHANISMS


# ---------------------------------------------------------------- formatter

def hi(mech, password, salt, iterations):
    """SaltedPassword = Hi(password, salt, iterations) (PBKDF2-HMAC)."""
    return _pbkdf2.pbkdf2_hmac(mech.hash_name, password, salt, iterations)


try:
    # what hmac.digest calls for a hash name, without its Python frame
    from _hashlib import hmac_digest as _hmac_digest
except ImportError:  # pragma: no cover - Python built without OpenSSL's hashlib
    _hmac_digest = hmac.digest


def _hmac(mech, key, data):
    # one-shot in C (OpenSSL's HMAC): no HMAC object and wrapper per call
    return _hmac_digest(key, data, mech.hash_name)


def _hash(mech, data):
    # (the constructor itself: hashlib.new goes through a Python wrapper)
    new = _HASHES.get(mech.hash_name)
    if new is None:
        return hashlib.new(mech.hash_name, data).digest()
    return new(data).digest()


def _xor(a, b):
    if len(a) != len(b):
        raise ValueError("Argument arrays must be of the same length")
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def client_key(mech, salted_password):
    return _hmac(mech, salted_password, b"Client Key")


def server_key(mech, salted_password):
    return _hmac(mech, salted_password, b"Server Key")


def stored_key(mech, client_key_):
    return _hash(mech, client_key_)


def _to_bytes(text):
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    return str(text).encode("utf-8")


def secure_random_string():
    """Kafka's ``ScramFormatter.secureRandomString``: a 130-bit random number
    in base 36 (used for nonces and salts).  Compiled twin: ~1 us instead of
    ~8 us, once per connection on each side."""
    return _pbkdf2.secure_random_string()


# (the pure twin's; tests check salts against it)
_base36 = _scram_py._base36_int


def generate_salt():
    """Kafka's ``secureRandomBytes``: the UTF-8 bytes of a random string."""
    return secure_random_string().encode("ascii")


def credential_from_salted_password(mechanism, salt, salted_password, iterations):
    mech = mechanism_for(mechanism)
    ck = client_key(mech, salted_password)
    return ScramCredential(salt=bytes(salt), stored_key=stored_key(mech, ck),
                           server_key=server_key(mech, salted_password),
                           iterations=int(iterations))


def generate_credential(mechanism, password, iterations=DEFAULT_ITERATIONS, salt=None):
    """Kafka's ``ScramFormatter.generateCredential(password, iterations)``."""
    mech = mechanism_for(mechanism)
    if salt is None:
        salt = generate_salt()
    salted = hi(mech, _to_bytes(_reveal(password)), bytes(salt), int(iterations))
    return credential_from_salted_password(mech, salt, salted, iterations)


def _reveal(value):
    return reveal(value)


def sasl_name(username):
    """Escape a user name for the ``n=`` attribute: ``=`` -> ``=3D``, ``,`` -> ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_from_sasl_name(name):
    """Undo :func:`sasl_name`; ValueError for an ``=`` not starting an escape."""
    unescaped = name.replace("=2C", ",")
    if "=" in unescaped.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return unescaped.replace("=3D", "=")


# ----------------------------------------------------------------- messages
# Kafka's ScramMessages regular expressions, in Python syntax.  Every class is
# ASCII-only, so a message with any other character fails to parse.

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"          # [\x01-\x7F] minus = ,
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"                          # [\x01-\x7F] minus ,
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"                      # [\x21-\x7E] minus ,
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64C = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64C}{{4}})*(?:{_B64C}{{3}}=|{_B64C}{{2}}==)?"
_RESERVED = rf"(?:m=(?P<reserved>{_VALUE}),)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)"
    rf"{_EXTENSIONS}")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_BASE64}){_EXTENSIONS})")

_INT_MAX = 2 ** 31 - 1


class _ParseError(Exception):
    pass


def _text(data):
    # Java decodes with replacement characters; those fail every pattern.
    return bytes(data or b"").decode("utf-8", errors="replace")


def _b64(text):
    # Only ever given what a message pattern matched as _BASE64 (the
    # alphabet, padding only at the end), which is all b64decode's
    # validate=True checks before this same C decoder.
    return binascii.a2b_base64(text)


def parse_extensions(text):
    """Kafka's ``Utils.parseMap(ext, "=", ",")`` for ``a=1,b=2``."""
    out = {}
    if text:
        for item in text.split(","):
            if not item:
                continue
            key, _, value = item.partition("=")
            out[key] = value
    return out


@dataclass
class ClientFirstMessage:
    sasl_name: str
    nonce: str
    authorization_id: str = ""
    extensions: dict = None
    bare: str = None

    @classmethod
    def parse(cls, data):
        m = _CLIENT_FIRST.fullmatch(_text(data))
        if m is None:
            raise _ParseError("Invalid SCRAM client first message format")
        if m.group("reserved") is not None:
            raise _ParseError("Unsupported mandatory extension in SCRAM client first message")
        ext = m.group("extensions")
        return cls(sasl_name=m.group("saslname"), nonce=m.group("nonce"),
                   authorization_id=m.group("authzid") or "",
                   extensions=parse_extensions(ext[1:] if ext.startswith(",") else ""),
                   bare=m.group("bare"))

    def gs2_header(self):
        return f"n,{'a=' + self.authorization_id if self.authorization_id else ''},"

    def client_first_message_bare(self):
        if self.bare is not None:
            return self.bare
        ext = ",".join(f"{k}={v}" for k, v in (self.extensions or {}).items())
        return f"n={self.sasl_name},r={self.nonce}" + (f",{ext}" if ext else "")

    def to_bytes(self):
        return (self.gs2_header() + self.client_first_message_bare()).encode("utf-8")


@dataclass
class ServerFirstMessage:
    nonce: str
    salt: bytes
    iterations: int
    text: str = None

    @classmethod
    def parse(cls, data):
        text = _text(data)
        nonce, salt, iterations = _parse_server_first(text)
        return cls(nonce=nonce, salt=salt, iterations=iterations, text=text)

    def to_message(self):
        if self.text is not None:
            return self.text
        return (f"r={self.nonce},s={base64.b64encode(self.salt).decode('ascii')},"
                f"i={self.iterations}")

    def to_bytes(self):
        return self.to_message().encode("utf-8")


@dataclass
class ClientFinalMessage:
    channel_binding: bytes
    nonce: str
    proof: bytes = None
    without_proof: str = None

    @classmethod
    def parse(cls, data):
        m = _CLIENT_FINAL.fullmatch(_text(data))
        if m is None:
            raise _ParseError("Invalid SCRAM client final message format")
        return cls(channel_binding=_b64(m.group("channel")), nonce=m.group("nonce"),
                   proof=_b64(m.group("proof")), without_proof=m.group("without_proof"))

    def client_final_message_without_proof(self):
        if self.without_proof is not None:
            return self.without_proof
        return f"c={base64.b64encode(self.channel_binding).decode('ascii')},r={self.nonce}"

    def to_bytes(self):
        return (self.client_final_message_without_proof() + ",p="
                + base64.b64encode(self.proof).decode("ascii")).encode("utf-8")


@dataclass
class ServerFinalMessage:
    error: str = None
    server_signature: bytes = None

    @classmethod
    def parse(cls, data):
        m = _SERVER_FINAL.fullmatch(_text(data))
        if m is None:
            raise _ParseError("Invalid SCRAM server final message format")
        if m.group("error") is not None:
            return cls(error=m.group("error"))
        return cls(server_signature=_b64(m.group("signature")))

    def to_bytes(self):
        if self.error is not None:
            return f"e={self.error}".encode("utf-8")
        return b"v=" + base64.b64encode(self.server_signature)


def auth_message(client_first, server_first, client_final):
    return ",".join((client_first.client_first_message_bare(), server_first.to_message(),
                     client_final.client_final_message_without_proof())).encode("utf-8")


def _parse_server_first(text):
    """(nonce, salt, iterations) of a server-first message (for
    ``ServerFirstMessage.parse`` and the client's string path alike)."""
    m = _SERVER_FIRST.fullmatch(text)
    if m is None:
        raise _ParseError("Invalid SCRAM server first message format")
    if m.group("reserved") is not None:
        raise _ParseError("Unsupported mandatory extension in SCRAM server first message")
    iterations = int(m.group("iterations"))
    if iterations <= 0 or iterations > _INT_MAX:
        raise _ParseError(
            f"Invalid SCRAM server first message format: invalid iterations {iterations}")
    return m.group("nonce"), _b64(m.group("salt")), iterations


def _b64encode(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


_CLIENT_GS2_HEADER = "n,,"
_CLIENT_CHANNEL_BINDING = _b64encode(_CLIENT_GS2_HEADER.encode("ascii"))    # "biws"
_DEBUG = logging.DEBUG


# ------------------------------------------------------ client key cache

class SaltedPasswordCache:
    """Bounded LRU of (ClientKey, ServerKey) per (password, salt, iterations,
    mechanism).

    The dict key is an HMAC of those four under a random per-process key, so
    neither the password nor a fast unsalted hash of it sits in memory as a
    key.  ``hits`` / ``misses`` count lookups.
    """

    def __init__(self, maxsize=128):
        self.maxsize = maxsize
        self._entries = OrderedDict()
        self._lock = threading.Lock()
        self._key = os.urandom(32)
        self.hits = 0
        self.misses = 0

    def _cache_key(self, mech, password, salt, iterations):
        # (one C call over the joined, length-prefixed parts: the same MAC as
        # updating it part by part; spelt out rather than a generator, which
        # cost five interpreted calls per connection)
        name = mech.mechanism_name.encode()
        salt = bytes(salt)
        count = str(iterations).encode()
        data = b"".join((len(name).to_bytes(4, "big"), name, len(salt).to_bytes(4, "big"), salt,
                         len(count).to_bytes(4, "big"), count,
                         len(password).to_bytes(4, "big"), password))
        return _hmac_digest(self._key, data, "sha256")

    def keys_for(self, mech, password, salt, iterations):
        """Return ``(client_key, server_key)``, deriving them on a miss."""
        key = self._cache_key(mech, password, salt, iterations)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
        salted = hi(mech, password, salt, iterations)
        entry = (client_key(mech, salted), server_key(mech, salted))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return entry

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self):
        return len(self._entries)


SALTED_PASSWORD_CACHE = SaltedPasswordCache()


# ------------------------------------------------------------------ client

class ScramSaslClient(SaslClientMechanism):
    """Kafka's ``ScramSaslClient``.

    ``username``/``password`` come from the JAAS options of
    ``ScramLoginModule``; ``tokenauth=true`` adds the ``tokenauth=true``
    extension (delegation-token login: the user name is the token id and the
    password the token's HMAC in base64).
    """

    SEND_CLIENT_FIRST_MESSAGE = "SEND_CLIENT_FIRST_MESSAGE"
    RECEIVE_SERVER_FIRST_MESSAGE = "RECEIVE_SERVER_FIRST_MESSAGE"
    RECEIVE_SERVER_FINAL_MESSAGE = "RECEIVE_SERVER_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    def __init__(self, mechanism, username, password, extensions=None, nonce=None,
                 cache=SALTED_PASSWORD_CACHE):
        self.mech = mechanism_for(mechanism)
        self.mechanism_name = self.mech.mechanism_name
        self._username = username
        self._password = password
        self._extensions = dict(extensions or {})
        self._fixed_nonce = nonce
        self._cache = cache
        self._client_nonce = None
        self._client_first = None
        self._server_first = None
        self._client_final = None
        self._server_key = None
        self._auth_message = None
        self.state = self.SEND_CLIENT_FIRST_MESSAGE

    def __repr__(self):
        return f"ScramSaslClient({self.mechanism_name}, state={self.state})"

    def has_initial_response(self):
        return True

    def is_complete(self):
        return self.state == self.COMPLETE

    def _set_state(self, state):
        # (asked first: log.debug would ask too, in a second interpreted call)
        if log.isEnabledFor(_DEBUG):
            log.debug("Setting SASL/%s client state to %s", self.mech, state)
        self.state = state

    def _fail(self, message):
        self._set_state(self.FAILED)
        self._server_key = None
        raise errors.SaslAuthenticationError(message, mechanism=self.mechanism_name)

    # The client's messages are built and read as strings here, not through
    # the message classes (which the server and the tests use): a connection
    # paid ~30 interpreted calls for them.  The bytes are the same: the
    # gs2 header is always "n,," (no authorization id, no channel binding),
    # so the channel-binding attribute is always "biws".
    def evaluate_challenge(self, challenge):
        state = self.state
        if state == self.SEND_CLIENT_FIRST_MESSAGE:
            if challenge:
                self._fail("Expected empty challenge")
            if self._username is None or self._password is None:
                self._fail(f"SASL/{self.mechanism_name}: JAAS options 'username' and "
                           "'password' must be set")
            nonce = self._client_nonce = self._fixed_nonce or secure_random_string()
            bare = f"n={sasl_name(self._username)},r={nonce}"
            if self._extensions:
                bare += "," + ",".join(f"{k}={v}" for k, v in self._extensions.items())
            self._client_first = bare
            self._set_state(self.RECEIVE_SERVER_FIRST_MESSAGE)
            return (_CLIENT_GS2_HEADER + bare).encode("utf-8")

        if state == self.RECEIVE_SERVER_FIRST_MESSAGE:
            text = _text(challenge)
            try:
                nonce, salt, iterations = _parse_server_first(text)
            except (_ParseError, binascii.Error, ValueError) as exc:
                self._fail(f"{exc}: {text[:200]}")
            if not nonce.startswith(self._client_nonce):
                self._fail("Invalid server nonce: does not start with client nonce")
            if len(nonce) == len(self._client_nonce):
                self._fail("Invalid server nonce: server did not add a nonce of its own")
            mech = self.mech
            if iterations < mech.min_iterations:
                self._fail(f"Requested iterations {iterations} is less than "
                           f"the minimum {mech.min_iterations} for {mech}")
            password = reveal(self._password)
            if type(password) is not bytes:
                password = _to_bytes(password)
            ck, sk = self._cache.keys_for(mech, password, salt, iterations)
            self._server_key = sk
            without_proof = f"c={_CLIENT_CHANNEL_BINDING},r={nonce}"
            # The server signature is over the same AuthMessage: kept for
            # the final step rather than built twice.
            self._auth_message = message = ",".join(
                (self._client_first, text, without_proof)).encode("utf-8")
            hash_name = mech.hash_name
            signature = _hmac_digest(_hash(mech, ck), message, hash_name)
            proof = (int.from_bytes(ck, "big") ^ int.from_bytes(signature, "big")).to_bytes(
                len(ck), "big")
            self._set_state(self.RECEIVE_SERVER_FINAL_MESSAGE)
            return (without_proof + ",p=" + _b64encode(proof)).encode("utf-8")

        if state == self.RECEIVE_SERVER_FINAL_MESSAGE:
            text = _text(challenge)
            m = _SERVER_FINAL.fullmatch(text)
            if m is None:
                self._fail(f"Invalid SCRAM server final message format: {text[:200]}")
            error = m.group("error")
            if error is not None:
                # An e= attribute is a failure whatever the response's error
                # code said.
                self._fail(f"Sasl authentication using {self.mech} failed with error: "
                           f"{error}")
            expected = _hmac_digest(self._server_key, self._auth_message, self.mech.hash_name)
            if not hmac.compare_digest(binascii.a2b_base64(m.group("signature")), expected):
                self._fail("Invalid server signature in server final message")
            self._server_key = None
            self._auth_message = None
            self._set_state(self.COMPLETE)
            return None

        raise errors.IllegalSaslStateError(
            f"Unexpected challenge in Sasl client state {self.state}")

    def dispose(self):
        self._server_key = None
        self._auth_message = None
        self._password = None


# ------------------------------------------------------------------ server

_PROCESS_SECRET = os.urandom(32)

# secret -> HMAC-SHA-256 keyed with it, ready to be copied: keying costs a
# hash of the key, paid once per secret (one per credential store) rather
# than once per login.
_KEYED_MACS = {}


def _keyed_mac(secret):
    mac = _KEYED_MACS.get(secret)
    if mac is None:
        if len(_KEYED_MACS) >= 64:   # a process opens few stores; stay bounded
            _KEYED_MACS.clear()
        mac = _KEYED_MACS[secret] = hmac.new(secret, digestmod="sha256")
    return mac


def stand_in_credential(mech, username, secret=None):
    """The stand-in credential for ``username``: :func:`_fake_credential`,
    derived at every login (about 7 us).

    Not cached: a cache makes a name asked recently answer faster than a
    name never asked, and a real user logs in often, so probing names would
    tell active users from unknown names (benchmarks/scram_timing.py showed
    it: +8-17 us in the mechanism, +30-38 us over the network, with a cache
    of 1,024 names).
    """
    return _fake_credential(mech, username, secret)


def _fake_credential(mech, username, secret=None):
    """A credential for a user that does not exist.

    Everything is derived from an HMAC of the mechanism and user name under
    a secret, so asking twice gives the same credential, as for a real user,
    and the salt has the shape of Kafka's salts.  ``secret`` is the
    credential store's (``ServerCallbacks.scram_secret``), so every server
    sharing that store, and a restarted server, answers with the same salt;
    without one a per-process secret is used.  No password matches the keys
    (and the server fails an unknown user whatever the proof).

    The server looks this up for every login, existing user or not, so that
    both paths do the same work before the server-first message (through
    :func:`stand_in_credential`, derived at every login, whether or not the
    name exists).
    """
    mac = _keyed_mac(secret or _PROCESS_SECRET).copy()
    mac.update(f"{mech.mechanism_name}\0{username}".encode("utf-8"))
    digest = mac.digest()
    salt = _pbkdf2.base36(digest[:17], 6).encode("ascii")
    return ScramCredential(salt=salt, stored_key=_hash(mech, b"StoredKey" + digest),
                           server_key=_hash(mech, b"ServerKey" + digest),
                           iterations=DEFAULT_ITERATIONS)


class ScramSaslServer(SaslServerMechanism):
    """Kafka's ``ScramSaslServer``.

    ``callbacks.scram_credential(username, mechanism)`` supplies user
    credentials; with the ``tokenauth=true`` extension
    ``callbacks.token_credential(token_id, mechanism, now)`` supplies the
    delegation token's credential, the authorization id becomes the token
    owner and ``CREDENTIAL.LIFETIME.MS`` the token expiry.
    """

    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    SUPPORTED_EXTENSIONS = frozenset({TOKEN_AUTH})

    def __init__(self, mechanism, callbacks, nonce=None):
        self.mech = mechanism_for(mechanism)
        self.mechanism_name = self.mech.mechanism_name
        self._callbacks = callbacks
        self._fixed_nonce = nonce
        self._client_first = None
        self._server_first = None
        self._credential = None
        self._unknown = False
        self._authorization_id = None
        self._token_auth = False
        self._token_expiry_ms = None
        self.extensions = {}
        self.state = self.RECEIVE_CLIENT_FIRST_MESSAGE

    def __repr__(self):
        return f"ScramSaslServer({self.mechanism_name}, state={self.state})"

    def _set_state(self, state):
        if log.isEnabledFor(_DEBUG):
            log.debug("Setting SASL/%s server state to %s", self.mech, state)
        self.state = state

    def _clear(self):
        self._credential = None
        self._client_first = None
        self._server_first = None

    def _fail(self, reason, client_message=None):
        """Fail closed.  ``reason`` stays in the server log; the client sees
        ``client_message`` or Kafka's generic invalid-credentials text."""
        self._clear()
        self._set_state(self.FAILED)
        log.debug("SASL/%s authentication failed: %s", self.mechanism_name, reason)
        raise errors.SaslAuthenticationError(
            client_message or ("Authentication failed during authentication due to invalid "
                               f"credentials with SASL mechanism {self.mechanism_name}"),
            mechanism=self.mechanism_name)

    def evaluate_response(self, response, now=None):
        if self.state == self.RECEIVE_CLIENT_FIRST_MESSAGE:
            return self._client_first_message(response, now)
        if self.state == self.RECEIVE_CLIENT_FINAL_MESSAGE:
            return self._client_final_message(response)
        # Fail closed: nothing may be processed after COMPLETE or FAILED.
        self._set_state(self.FAILED)
        raise errors.SaslAuthenticationError(
            f"Unexpected challenge in Sasl server state {self.state}",
            mechanism=self.mechanism_name)

    def _lookup(self, username, now):
        """Return (credential or None, authorization id, expiry ms)."""
        cb = self._callbacks
        if self._token_auth:
            fn = cb.token_credential if cb is not None else None
            token = fn(username, self.mechanism_name, now) if fn is not None else None
            if token is None or token.owner is None:
                return None, username, None
            if token.expiry_ms is not None and now is not None and token.expiry_ms <= now:
                return None, username, None
            return token.credential, token.owner.name, token.expiry_ms
        fn = cb.scram_credential if cb is not None else None
        credential = fn(username, self.mechanism_name) if fn is not None else None
        return credential, username, None

    def _client_first_message(self, response, now):
        try:
            client_first = ClientFirstMessage.parse(response)
            username = username_from_sasl_name(client_first.sasl_name)
            authzid = (username_from_sasl_name(client_first.authorization_id)
                       if client_first.authorization_id else "")
        except (_ParseError, ValueError) as exc:
            self._fail(str(exc))
        self.extensions = dict(client_first.extensions)
        unsupported = set(self.extensions) - self.SUPPORTED_EXTENSIONS
        if unsupported:
            log.debug("Unsupported extensions will be ignored, supported %s, provided %s",
                      sorted(self.SUPPORTED_EXTENSIONS), sorted(self.extensions))
        # Boolean.parseBoolean semantics.
        self._token_auth = self.extensions.get(TOKEN_AUTH, "").lower() == "true"
        # Checked before the credential lookup, so the answer is the same
        # whether or not the user exists.
        if authzid and authzid != username:
            self._fail("authorization id differs from user name",
                       "Authentication failed: Client requested an authorization id that is "
                       "different from username")
        try:
            credential, authorization_id, expiry = self._lookup(username, now)
        except Exception as exc:  # a broken store must not leak details
            log.warning("SASL/%s: credentials could not be obtained: %s",
                        self.mechanism_name, exc)
            self._fail("Authentication failed: Credentials could not be obtained")
        # The stand-in is derived whether or not the user exists: the two
        # paths do the same work, so the time to the server-first message
        # does not tell them apart (benchmarks/scram_timing.py).
        stand_in = stand_in_credential(self.mech, username,
                                       self._callbacks.scram_secret
                                       if self._callbacks is not None else None)
        if credential is not None and credential.iterations < self.mech.min_iterations:
            log.warning("SASL/%s: stored credential has %d iterations, less than the minimum "
                        "%d", self.mechanism_name, credential.iterations,
                        self.mech.min_iterations)
            credential = None
        # Carry on with the stand-in for an unknown user, so the exchange
        # looks the same as for a real user with a wrong password.
        self._unknown = credential is None
        if self._unknown:
            credential = stand_in
        self._credential = credential
        self._authorization_id = authorization_id
        self._token_expiry_ms = expiry
        self._client_first = client_first
        server_nonce = self._fixed_nonce or secure_random_string()
        self._server_first = ServerFirstMessage(
            nonce=client_first.nonce + server_nonce, salt=credential.salt,
            iterations=credential.iterations)
        self._set_state(self.RECEIVE_CLIENT_FINAL_MESSAGE)
        return self._server_first.to_bytes()

    def _client_final_message(self, response):
        try:
            final = ClientFinalMessage.parse(response)
        except (_ParseError, binascii.Error, ValueError) as exc:
            self._fail(str(exc))
        if final.channel_binding != self._client_first.gs2_header().encode("ascii"):
            self._fail("Invalid channel binding in the final client message")
        if final.nonce != self._server_first.nonce:
            self._fail("Invalid client nonce in the final client message.")
        credential = self._credential
        message = auth_message(self._client_first, self._server_first, final)
        signature = _hmac(self.mech, credential.stored_key, message)
        if len(final.proof) != len(signature):
            self._fail("Invalid client proof length")
        computed = _hash(self.mech, _xor(signature, final.proof))
        ok = hmac.compare_digest(computed, credential.stored_key)
        if self._unknown or not ok:
            self._fail("unknown user" if self._unknown else "Invalid client credentials")
        server_signature = _hmac(self.mech, credential.server_key, message)
        self._clear()
        self._set_state(self.COMPLETE)
        return ServerFinalMessage(server_signature=server_signature).to_bytes()

    def is_complete(self):
        return self.state == self.COMPLETE

    def get_authorization_id(self):
        if not self.is_complete():
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def get_negotiated_property(self, name):
        if not self.is_complete():
            return None
        if name == CREDENTIAL_LIFETIME_MS:
            return self._token_expiry_ms
        if name == TOKEN_AUTH:
            return self._token_auth
        return None

    @property
    def token_authenticated(self):
        return self.is_complete() and self._token_auth

    def dispose(self):
        self._clear()


# ---------------------------------------------------------------- registry

def create_client(mechanism, *, jaas_options, configs, server_host, username=None,
                  password=None, extensions=None, nonce=None, cache=SALTED_PASSWORD_CACHE,
                  **_kw):
    if username is None:
        username = jaas_option(jaas_options, "username")
    if password is None:
        password = (jaas_options or {}).get("password")
    ext = dict(extensions or {})
    token = jaas_option(jaas_options, TOKEN_AUTH)
    if token is not None and str(token).lower() == "true":
        ext[TOKEN_AUTH] = "true"
    return ScramSaslClient(mechanism, username, password, extensions=ext, nonce=nonce,
                           cache=cache)


def create_server(mechanism, *, jaas_options, configs, callbacks, server_host, now,
                  nonce=None, **_kw):
    return ScramSaslServer(mechanism, callbacks, nonce=nonce)

