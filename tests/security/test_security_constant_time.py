"""Secret comparisons run in constant time.

A behavioural check per comparison site (the comparison goes through
``hmac.compare_digest``, seen by a pass-through wrapper) and a source audit:
no ``==``/``!=``/``in`` in the security modules has an operand whose name says
it holds a secret.
"""
import ast
import hmac
import os

import pytest

from kchannel.config.types import Password
import kchannel
from kchannel.security.sasl import plain as plain_mod
from kchannel.security.sasl import scram as scram_mod
from kchannel.security.sasl.mechanism import ServerCallbacks, create_client, create_server

from tests.fixtures.sasl import plain_jaas, scram_store

# The directory holding the imported kchannel package: the checkout, or
# site-packages when the tests run against an installed wheel.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kchannel.__file__)))
SECURITY_SOURCES = [
    "kchannel/config/types.py",
    "kchannel/security/sasl/plain.py",
    "kchannel/security/sasl/scram.py",
    "kchannel/security/sasl/_scram_py.py",
    "kchannel/security/sasl/scram_store.py",
    "kchannel/server/scram_handlers.py",
    "kchannel/security/sasl/oauthbearer.py",
    "kchannel/security/sasl/server_authenticator.py",
    "kchannel/security/sasl/client_authenticator.py",
    "kchannel/tokens/manager.py",
    "kchannel/tokens/token.py",
    "kchannel/server/token_handlers.py",
    "kchannel/tokens/admin.py",
]
SECRET_WORDS = ("password", "hmac", "proof", "signature", "stored_key", "server_key",
                "client_key", "salted", "secret")


@pytest.fixture
def digest_calls(monkeypatch):
    calls = []
    original = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    return calls


def test_password_equality_is_constant_time(digest_calls):
    assert Password("s3cret") == Password("s3cret")
    assert Password("s3cret") != Password("s3creT")
    assert Password(b"k") == Password(b"k")
    assert Password("k") != Password(b"k")
    assert Password("k") != "k"
    assert len(digest_calls) == 3


def test_plain_password_check_is_constant_time(digest_calls):
    auth = plain_mod.jaas_plain_authenticator(plain_jaas())
    assert auth("alice", "alice-secret")
    assert not auth("alice", "alice-secreT")
    assert not auth("nobody", "x")
    assert len(digest_calls) == 3


def _scram_exchange(password):
    callbacks = ServerCallbacks.default(jaas_options={}, store=scram_store())
    client = create_client("SCRAM-SHA-256",
                           jaas_options={"username": "alice", "password": password})
    server = create_server("SCRAM-SHA-256", callbacks=callbacks)
    msg = client.evaluate_challenge(b"")
    msg = client.evaluate_challenge(server.evaluate_response(msg))
    return client, server, msg


def test_scram_proof_and_signature_checks_are_constant_time(digest_calls):
    client, server, final = _scram_exchange("alice-secret")
    server_final = server.evaluate_response(final)
    assert len(digest_calls) == 1       # the server's proof check
    client.evaluate_challenge(server_final)
    assert len(digest_calls) == 2       # the client's signature check
    assert client.is_complete() and server.is_complete()


def _secret_name(node):
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Call):
        return _secret_name(node.func)
    elif isinstance(node, ast.Subscript):
        return _secret_name(node.value)
    else:
        return None
    low = name.lower()
    return name if any(w in low for w in SECRET_WORDS) else None


def plain_secret_comparisons(source, path="<source>"):
    tree = ast.parse(source, path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
            continue
        # Checks of a *name* or type (``key == "password"``) are not
        # comparisons of a secret.
        if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
            continue
        names = [n for n in map(_secret_name, operands) if n]
        if names:
            found.append(f"{path}:{node.lineno} compares {names}")
    return found


def test_audit_flags_plain_equality():
    assert plain_secret_comparisons("ok = given_password == expected\n")
    assert plain_secret_comparisons("if final.server_signature != sig: pass\n")
    assert not plain_secret_comparisons("if key == 'password': pass\n")
    assert not plain_secret_comparisons("ok = hmac.compare_digest(proof, expected)\n")


@pytest.mark.parametrize("path", SECURITY_SOURCES)
def test_no_plain_equality_on_secrets(path):
    source = open(os.path.join(ROOT, path)).read()
    assert plain_secret_comparisons(source, path) == []
