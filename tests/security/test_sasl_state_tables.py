"""The SASL authenticators' transition tables are the whole truth.

* Every state change either authenticator makes is one its table lists, and
  every change the table lists is made by some real exchange below (a dead
  entry fails the test as surely as a missing one): the scenarios pair a
  real client and server authenticator where both sides exist, and feed
  hand-built frames only where a peer cannot produce the case.
* Walking each table: from every state, every listed change is accepted and
  every unlisted one refused with ``IllegalStateTransitionError``.
* ``state`` has one writer: ``_set_state``.  An AST scan of the
  authenticator modules fails on any other assignment, and the attribute
  refuses writes at run time.

Kafka counterparts: SaslAuthenticatorTest / SaslServerAuthenticatorTest and
SaslClientAuthenticatorTest cover the same flows without a table.
"""
import ast
import collections
import inspect

import pytest

from kchannel.errors import (AuthenticationError, ChannelConnectionError,
                             IllegalStateTransitionError, InvalidRequestError)
from kchannel.network import authenticator as base_module
from kchannel.network.authenticator import StateMachineAuthenticator
from kchannel.protocol.headers import encode_response, parse_request_header
from kchannel.security.sasl import client_authenticator as client_module
from kchannel.security.sasl import server_authenticator as server_module
from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator
from kchannel.security.sasl.server_authenticator import SaslServerAuthenticator
from kchannel.security.sasl.state import CLIENT_STATES, SERVER_STATES, SaslState

from tests.fixtures.sasl import (NOW, FrameIO, drive, pair, request,
                                            server_callbacks)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
CS = client_module.SaslState
SS = server_module.SaslState


def test_one_sasl_state_enum():
    assert CS is SS is SaslState
    assert CLIENT_STATES | SERVER_STATES == set(SaslState)
    assert CLIENT_STATES & SERVER_STATES == {SaslState.COMPLETE, SaslState.FAILED}
    for cls, states in ((SaslClientAuthenticator, CLIENT_STATES),
                        (SaslServerAuthenticator, SERVER_STATES)):
        assert set(listed(cls.TRANSITIONS)) - {None} <= {
            (a, b) for a in states | {None} for b in states}
LATER = NOW + 9_000


def listed(table):
    return {(a, b) for a, nexts in table.items() for b in nexts}


# ------------------------------------------------------------ test doubles
class BreakingIO(FrameIO):
    """A FrameIO whose socket dies (reset by peer) once ``broken`` is set."""

    broken = False

    def flush(self):
        if self.broken:
            raise ChannelConnectionError("Connection reset by peer")
        return super().flush()


class TwoStepClientMechanism:
    """GSSAPI-shaped client mechanism (a real GSSAPI exchange needs the KDC,
    see test_sasl_e2e_gssapi): it completes while sending its last token, so
    the authenticator has to wait in CLIENT_COMPLETE for the server's
    answer."""

    def __init__(self, fail_at=None):
        self.step = 0
        self.fail_at = fail_at

    def has_initial_response(self):
        return True

    def evaluate_challenge(self, challenge):
        self.step += 1
        if self.step == self.fail_at:
            raise ValueError("mechanism refused the challenge")
        return b"token-%d" % self.step

    def is_complete(self):
        return self.step >= 2

    def dispose(self):
        pass


class RawGssapiServer:
    """Routing double for a 0.9 client's raw GSSAPI token (see
    test_legacy_gssapi_client_without_handshake)."""

    def __init__(self):
        self.tokens = 0

    def evaluate_response(self, response, now):
        self.tokens += 1
        return None

    def is_complete(self):
        return self.tokens >= 1

    def get_authorization_id(self):
        return "client@EXAMPLE.COM"

    def get_negotiated_property(self, name):
        return None

    def dispose(self):
        pass


def table_server(mechanisms=("PLAIN",), **kw):
    kw.setdefault("callbacks", _CALLBACKS)
    kw.setdefault("connections_max_reauth_ms", 10_000)
    return SaslServerAuthenticator(enabled_mechanisms=list(mechanisms), **kw)


def make_client(mechanism="PLAIN", user="alice", **kw):
    return SaslClientAuthenticator(mechanism=mechanism,
                                   jaas_options={"username": user,
                                                 "password": f"{user}-secret"}, **kw)


_CALLBACKS = None


def sent(io):
    (payload,) = io.take()
    return parse_request_header(payload)[0]


def to_handshake_sent(io, client, keys=((17, 0, 1), (36, 0, 2))):
    """Drive ``client`` through ApiVersions; returns the SaslHandshake header."""
    client.authenticate(io, NOW)
    header = sent(io)
    body = {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in keys]}
    io.feed_frame(encode_response(API_VERSIONS, 0, header.correlation_id, body))
    client.authenticate(io, NOW)
    return sent(io)


def drive_to_failure(client, client_io, server, server_io, now=NOW):
    """Run both sides until the server refuses; it then sends its deferred
    error response (as at the delayed close) and the client must fail."""
    with pytest.raises(AuthenticationError):
        drive(client, client_io, server, server_io, now)
    server.handle_authentication_failure()
    with pytest.raises(AuthenticationError):
        client.authenticate(client_io, now)


def authenticated_pair(mechanisms=("PLAIN",), client_io=None, server_io=None):
    if client_io is None:
        client_io, server_io = pair()
    server, client = table_server(mechanisms), make_client()
    drive(client, client_io, server, server_io)
    return client, client_io, server, server_io


# --------------------------------------------------------------- scenarios
# Each scenario runs a real exchange; the recorder below collects the state
# changes it makes.  Expected failures are asserted so that a scenario that
# stops exercising its case is noticed.
def scenario_first_authentication_and_reauthentication():
    client, client_io, server, server_io = authenticated_pair()
    # KIP-368 with fresh authenticators (the channel's swap) ...
    new_client = make_client()
    new_client.reauthenticate(client_io, None, LATER, client)
    new_server = table_server()
    new_server.reauthenticate(server_io, server_io.read_frame(), LATER, server)
    drive(new_client, client_io, new_server, server_io, now=LATER)
    # ... and in place.
    new_client.reauthenticate(client_io, None, LATER + 1)
    new_server.reauthenticate(server_io, server_io.read_frame(), LATER + 1)
    drive(new_client, client_io, new_server, server_io, now=LATER + 1)
    assert new_server.principal().name == "alice"


def scenario_reauthentication_with_another_mechanism():
    client, client_io, server, server_io = authenticated_pair(("PLAIN", "SCRAM-SHA-256"))
    other = make_client("SCRAM-SHA-256")
    other.reauthenticate(client_io, None, LATER, client)
    new_server = table_server(("PLAIN", "SCRAM-SHA-256"))
    new_server.reauthenticate(server_io, server_io.read_frame(), LATER, server)
    assert new_server.state is SS.REAUTH_BAD_MECHANISM
    other.authenticate(client_io, LATER)
    with pytest.raises(AuthenticationError):
        new_server.authenticate(server_io, LATER)


def scenario_reauthentication_with_a_disabled_mechanism():
    client, client_io, server, server_io = authenticated_pair()
    other = make_client("SCRAM-SHA-512")
    other.reauthenticate(client_io, None, LATER, client)
    new_server = table_server()
    with pytest.raises(AuthenticationError):
        new_server.reauthenticate(server_io, server_io.read_frame(), LATER, server)
    new_server.handle_authentication_failure()
    with pytest.raises(AuthenticationError):
        other.authenticate(client_io, LATER)


def scenario_reauthentication_connection_lost():
    client_io, server_io = BreakingIO(), FrameIO()
    client_io.peer, server_io.peer = server_io, client_io
    client, _, _, _ = authenticated_pair(client_io=client_io, server_io=server_io)
    client_io.broken = True
    with pytest.raises(ChannelConnectionError):
        make_client().reauthenticate(client_io, None, LATER, client)


def scenario_reauthentication_mechanism_error():
    client, client_io, server, server_io = authenticated_pair()
    broken = SaslClientAuthenticator(
        mechanism="PLAIN", mechanism_factory=lambda m, **kw: TwoStepClientMechanism(1))
    broken.reauthenticate(client_io, None, LATER, client)
    table_server().reauthenticate(server_io, server_io.read_frame(), LATER, server)
    with pytest.raises(AuthenticationError):
        broken.authenticate(client_io, LATER)


def scenario_server_refusals():
    # A first packet that is neither Kafka nor GSSAPI (GSSAPI not enabled).
    io = FrameIO()
    io.feed_frame(b"\x01\x02\x03\x04 not kafka")
    with pytest.raises(AuthenticationError):
        table_server().authenticate(io, NOW)
    # SaslHandshake (no ApiVersions first) for a disabled mechanism.
    io = FrameIO()
    io.feed_frame(request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}, 1))
    with pytest.raises(AuthenticationError):
        table_server().authenticate(io, NOW)
    # ApiVersions twice.
    io = FrameIO()
    io.feed_frame(request(API_VERSIONS, 0, {}, 1))
    io.feed_frame(request(API_VERSIONS, 0, {}, 2))
    with pytest.raises(InvalidRequestError):
        table_server().authenticate(io, NOW)
    # ApiVersions where re-authentication expects its SaslHandshake.
    client, client_io, server, server_io = authenticated_pair()
    with pytest.raises(InvalidRequestError):
        table_server().reauthenticate(server_io, request(API_VERSIONS, 0, {}, 99), LATER,
                                      server)


def scenario_handshake_without_api_versions_and_bad_password():
    server_io = FrameIO()
    server = table_server()
    # Skip the client's ApiVersions: hand the server its SaslHandshake first.
    server_io.feed_frame(request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 1))
    server.authenticate(server_io, NOW)
    assert server.state is SS.AUTHENTICATE
    server_io.feed_frame(request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0wrong"}, 2))
    with pytest.raises(AuthenticationError):
        server.authenticate(server_io, NOW)
    # And a client refused by a real server.
    client_io, server_io = pair()
    client = SaslClientAuthenticator(mechanism="PLAIN",
                                     jaas_options={"username": "alice",
                                                   "password": "wrong"})
    drive_to_failure(client, client_io, table_server(), server_io)


def scenario_legacy_gssapi_token():
    io = FrameIO()
    server = table_server(("GSSAPI",), mechanism_factory=lambda m, **kw: RawGssapiServer())
    io.feed_frame(b"\x60\x82\x01\x00" + b"\x06\x09*\x86H\x86\xf7\x12\x01\x02\x02" + b"x" * 40)
    assert server.authenticate(io, NOW) == 0
    assert server.complete()


def scenario_client_failures():
    # Connection lost while ApiVersions / SaslHandshake are being written.
    io = BreakingIO()
    io.broken = True
    with pytest.raises(ChannelConnectionError):
        make_client().authenticate(io, NOW)
    io = BreakingIO()
    client = make_client()
    client.authenticate(io, NOW)
    header = sent(io)
    io.feed_frame(encode_response(API_VERSIONS, 0, header.correlation_id,
                                  {"error_code": 0, "api_keys": []}))
    io.broken = True
    with pytest.raises(ChannelConnectionError):
        client.authenticate(io, NOW)
    # A response that is not an ApiVersions response.
    io = FrameIO()
    client = make_client()
    client.authenticate(io, NOW)
    io.take()
    io.feed_frame(b"\x01\x02")
    with pytest.raises(AuthenticationError):
        client.authenticate(io, NOW)
    # The server does not enable the mechanism (a real server answers).
    client_io, server_io = pair()
    drive_to_failure(make_client("SCRAM-SHA-512"), client_io, table_server(), server_io)
    # The mechanism fails on its first token.
    io = FrameIO()
    client = SaslClientAuthenticator(
        mechanism="PLAIN", mechanism_factory=lambda m, **kw: TwoStepClientMechanism(1))
    header = to_handshake_sent(io, client)
    io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                  {"error_code": 0, "mechanisms": ["PLAIN"]}))
    with pytest.raises(AuthenticationError):
        client.authenticate(io, NOW)


def scenario_client_complete_waits_for_final_response():
    for error_code in (0, 58):
        io = FrameIO()
        client = SaslClientAuthenticator(
            mechanism="GSSAPI", mechanism_factory=lambda m, **kw: TwoStepClientMechanism())
        header = to_handshake_sent(io, client)
        io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                      {"error_code": 0, "mechanisms": ["GSSAPI"]}))
        client.authenticate(io, NOW)
        header = sent(io)
        io.feed_frame(encode_response(SASL_AUTHENTICATE, 2, header.correlation_id,
                                      {"error_code": 0, "auth_bytes": b"challenge"}))
        client.authenticate(io, NOW)
        assert client.state is CS.CLIENT_COMPLETE
        header = sent(io)
        io.feed_frame(encode_response(SASL_AUTHENTICATE, 2, header.correlation_id,
                                      {"error_code": error_code, "auth_bytes": b"",
                                       "error_message": "refused" if error_code else None}))
        if error_code:
            with pytest.raises(AuthenticationError):
                client.authenticate(io, NOW)
        else:
            client.authenticate(io, NOW)
            assert client.complete()


def scenario_client_without_handshake():
    io = FrameIO()
    client = make_client(handshake_request_enable=False)
    client.authenticate(io, NOW)
    assert io.take() == [b"\0alice\0alice-secret"]


SCENARIOS = [
    scenario_first_authentication_and_reauthentication,
    scenario_reauthentication_with_another_mechanism,
    scenario_reauthentication_with_a_disabled_mechanism,
    scenario_reauthentication_connection_lost,
    scenario_reauthentication_mechanism_error,
    scenario_server_refusals,
    scenario_handshake_without_api_versions_and_bad_password,
    scenario_legacy_gssapi_token,
    scenario_client_failures,
    scenario_client_complete_waits_for_final_response,
    scenario_client_without_handshake,
]


@pytest.fixture(scope="module", autouse=True)
def _callbacks():
    global _CALLBACKS
    _CALLBACKS = server_callbacks()
    yield
    _CALLBACKS = None


def test_every_state_change_is_listed_and_every_listed_change_is_made(monkeypatch):
    made = collections.defaultdict(set)
    set_state = StateMachineAuthenticator._set_state

    def recording(self, state, *args, **kwargs):
        before = self.state
        try:
            return set_state(self, state, *args, **kwargs)
        finally:
            if self.state is not before:
                made[type(self)].add((before, self.state))

    monkeypatch.setattr(StateMachineAuthenticator, "_set_state", recording)
    for scenario in SCENARIOS:
        scenario()
    for cls in (SaslServerAuthenticator, SaslClientAuthenticator):
        table = listed(cls.TRANSITIONS)
        name = lambda pairs: sorted(f"{getattr(a, 'name', a)} -> {b.name}" for a, b in pairs)
        assert name(table - made[cls]) == [], f"{cls.__name__}: listed, never made"
        assert name(made[cls] - table) == [], f"{cls.__name__}: made, not listed"


# ------------------------------------------------------------ table walks
def _paths(table, start):
    """Shortest list of changes from ``start`` to every state reachable."""
    paths, queue = {start: []}, collections.deque([start])
    while queue:
        state = queue.popleft()
        for nxt in sorted(table.get(state, ()), key=lambda s: s.name):
            if nxt not in paths:
                paths[nxt] = paths[state] + [nxt]
                queue.append(nxt)
    return paths


FACTORIES = {
    "server": (lambda: SaslServerAuthenticator(enabled_mechanisms=["PLAIN"]), SERVER_STATES,
               SaslServerAuthenticator),
    "client": (make_client, CLIENT_STATES, SaslClientAuthenticator),
}


@pytest.mark.parametrize("side", sorted(FACTORIES))
def test_table_walk_accepts_listed_and_refuses_unlisted_changes(side):
    factory, states, cls = FACTORIES[side]
    table = cls.TRANSITIONS
    initial = factory().state
    assert initial in table[None]
    paths = _paths(table, initial)
    assert set(paths) == set(states), "every state is reachable from the initial one"
    assert cls.FAILED not in table, "FAILED is final"
    checked = 0
    for start, route in paths.items():
        for target in states:
            auth = factory()
            for state in route:
                auth._set_state(state)
            assert auth.state is start
            if target in table.get(start, ()):
                auth._set_state(target)
                assert auth.state is target
            else:
                with pytest.raises(IllegalStateTransitionError) as err:
                    auth._set_state(target)
                assert f"from {start.name} to {target.name}" in str(err.value)
                assert auth.state is start
            checked += 1
    assert checked == len(states) ** 2


def test_state_change_waits_for_pending_write_and_failure_does_not():
    io = FrameIO()
    io.flush_ok = False
    client = make_client()
    client.authenticate(io, NOW)
    # The ApiVersions request is still queued: the state has not moved.
    assert client.state is CS.SEND_APIVERSIONS_REQUEST
    client._fail()
    assert client.state is CS.FAILED
    # Nothing still waiting for the gate may take the client out of FAILED.
    io.flush_ok = True
    assert client._flush(io, NOW)
    assert client.state is CS.FAILED


# ------------------------------------------------------------- one writer
AUTHENTICATOR_MODULES = [base_module, server_module, client_module]


def _state_writes(source):
    """(function name, line) of every assignment to an attribute named
    ``state`` / ``_state``, or setattr/delattr of one, in ``source``."""
    tree = ast.parse(source)
    found = []

    class Visitor(ast.NodeVisitor):
        def __init__(self):
            self.function = None

        def visit_FunctionDef(self, node):
            outer, self.function = self.function, node.name
            self.generic_visit(node)
            self.function = outer

        visit_AsyncFunctionDef = visit_FunctionDef

        def _targets(self, target):
            if isinstance(target, (ast.Tuple, ast.List)):
                for elt in target.elts:
                    yield from self._targets(elt)
            elif isinstance(target, ast.Starred):
                yield from self._targets(target.value)
            else:
                yield target

        def _check(self, targets, node):
            for target in targets:
                for t in self._targets(target):
                    if isinstance(t, ast.Attribute) and t.attr in ("state", "_state"):
                        found.append((self.function, node.lineno))

        def visit_Assign(self, node):
            self._check(node.targets, node)
            self.generic_visit(node)

        def visit_AugAssign(self, node):
            self._check([node.target], node)
            self.generic_visit(node)

        def visit_AnnAssign(self, node):
            self._check([node.target], node)
            self.generic_visit(node)

        def visit_Delete(self, node):
            self._check(node.targets, node)
            self.generic_visit(node)

        def visit_NamedExpr(self, node):
            self._check([node.target], node)
            self.generic_visit(node)

        def visit_Call(self, node):
            if (isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in ("state", "_state")):
                found.append((self.function, node.lineno))
            self.generic_visit(node)

    Visitor().visit(tree)
    return found


@pytest.mark.parametrize("module", AUTHENTICATOR_MODULES, ids=lambda m: m.__name__)
def test_set_state_is_the_only_writer_of_state(module):
    writes = _state_writes(inspect.getsource(module))
    assert all(function == "_set_state" for function, _ in writes), \
        f"{module.__name__}: state written outside _set_state at {writes}"
    if module is base_module:
        assert writes, "the scan must see _set_state's own write"


def test_state_scan_catches_direct_writes():
    source = ("class A:\n"
              "    def f(self, x):\n"
              "        self.state = 1\n"
              "        x._state, y = 2, 3\n"
              "        setattr(self, 'state', 4)\n"
              "    def _set_state(self, s):\n"
              "        self._state = s\n")
    assert _state_writes(source) == [("f", 3), ("f", 4), ("f", 5), ("_set_state", 7)]


@pytest.mark.parametrize("side", sorted(FACTORIES))
def test_state_attribute_refuses_writes(side):
    factory, states, _ = FACTORIES[side]
    auth = factory()
    with pytest.raises(AttributeError):
        auth.state = SaslState.FAILED
    assert auth.state is not SaslState.FAILED
