"""Server + KafkaClient over PLAINTEXT on 127.0.0.1, and hostile input.

Every bad-input case checks two things: the offending connection is closed by
the server, and another client on the same server keeps being served.
"""
import socket
import struct

import pytest

from kchannel.client import ConnectionState, KafkaClient, NetworkClient
from kchannel.errors import UnsupportedVersionError
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.server import Server


@pytest.fixture
def server():
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=7)
    s.start()
    yield s
    s.shutdown()


def client_for(server, listener="PLAINTEXT", **configs):
    c = KafkaClient({"bootstrap.servers": f"127.0.0.1:{server.bound_port(listener)}",
                     **configs})
    return c.connect()


def raw(server, listener="PLAINTEXT"):
    s = socket.create_connection(("127.0.0.1", server.bound_port(listener)))
    s.settimeout(10)
    return s


def raw_request(sock, api_key, version, body, correlation_id=1, client_id="raw"):
    payload = encode_request(RequestHeader(api_key, version, correlation_id, client_id), body)
    sock.sendall(encode_frame(payload))


def raw_response(sock):
    dec = FrameDecoder()
    while True:
        frame = dec.next_frame()
        if frame is not None:
            return frame
        data = sock.recv(65536)
        if not data:
            raise EOFError("closed")
        dec.feed(data)


def assert_closed(sock):
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
    except ConnectionResetError:
        return


def test_api_versions_negotiated(server):
    with client_for(server) as c:
        assert c.api_versions[ApiKey.API_VERSIONS] == (0, messages.API_VERSIONS.max_version)
        assert c.api_versions[ApiKey.METADATA] == (0, messages.METADATA.max_version)
        # the SASL APIs are listed on a PLAINTEXT listener too, as by Kafka
        assert c.api_versions[ApiKey.SASL_HANDSHAKE] == (0, messages.SASL_HANDSHAKE.max_version)
        body = c.request(ApiKey.API_VERSIONS, {"client_software_name": "t",
                                               "client_software_version": "1"})
        assert body["error_code"] == 0


@pytest.mark.parametrize("version", range(0, messages.METADATA.max_version + 1))
def test_metadata_every_version(server, version):
    with client_for(server) as c:
        body = c.request(ApiKey.METADATA, {"topics": [] if version else []}, version=version)
        assert body["brokers"][0]["node_id"] == 7
        assert body["brokers"][0]["host"] == "127.0.0.1"
        assert body["brokers"][0]["port"] == server.bound_port("PLAINTEXT")
        if version >= 1:
            assert body["controller_id"] == 7
            assert body["brokers"][0]["rack"] is None
        if version >= 2:
            assert body["cluster_id"] == server.cluster_id
        assert body["topics"] == []


def test_cluster_id_is_kafka_style(server):
    import base64
    cid = server.cluster_id
    assert len(cid) == 22
    assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_metadata_unknown_topic(server):
    with client_for(server) as c:
        body = c.request(ApiKey.METADATA, {"topics": [{"name": "nope"}]})
        assert body["topics"][0]["name"] == "nope"
        assert body["topics"][0]["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_advertised_listener_per_listener():
    s = Server({
        "listeners": "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": "EXTERNAL://kafka.example.com:19092,INTERNAL://broker-0.internal:0",
        "inter.broker.listener.name": "INTERNAL",
        "node.id": "3",
        "kchannel.cluster.id": "AAAAAAAAAAAAAAAAAAAAAA",
    })
    s.start()
    try:
        with client_for(s, "EXTERNAL") as c:
            b = c.request(ApiKey.METADATA, {"topics": []})
            assert b["brokers"] == [{"node_id": 3, "host": "kafka.example.com", "port": 19092,
                                     "rack": None}]
            assert b["cluster_id"] == "AAAAAAAAAAAAAAAAAAAAAA"
        with client_for(s, "INTERNAL") as c:
            b = c.request(ApiKey.METADATA, {"topics": []})
            # advertised port 0 means "the port actually bound"
            assert b["brokers"][0]["host"] == "broker-0.internal"
            assert b["brokers"][0]["port"] == s.bound_port("INTERNAL")
    finally:
        s.shutdown()


def test_registered_handler_and_context(server):
    seen = []

    def describe_cluster(ctx):
        seen.append(ctx)
        return {"error_code": 0, "cluster_id": ctx.server.cluster_id,
                "controller_id": ctx.server.node_id, "brokers": []}

    server.register_handler(ApiKey.DESCRIBE_CLUSTER, describe_cluster, 0, 0)
    with client_for(server, **{"client.id": "me"}) as c:
        assert c.api_versions[ApiKey.DESCRIBE_CLUSTER] == (0, 0)
        body = c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert body["cluster_id"] == server.cluster_id
    ctx = seen[0]
    assert str(ctx.principal) == "User:ANONYMOUS"
    assert ctx.listener_name == "PLAINTEXT"
    assert ctx.security_protocol == "PLAINTEXT"
    assert ctx.client_id == "me"
    assert ctx.api_version == 0
    assert ctx.client_address[0] == "127.0.0.1"
    assert ctx.session.principal == ctx.principal


def test_client_refuses_version_the_broker_does_not_support(server):
    server.register_handler(ApiKey.DESCRIBE_CLUSTER, lambda ctx: {}, 0, 0)
    with client_for(server) as c:
        with pytest.raises(UnsupportedVersionError):
            c.request(ApiKey.FIND_COORDINATOR, {})


def test_api_versions_fallback_keeps_connection_usable(server):
    s = raw(server)
    raw_request(s, ApiKey.API_VERSIONS, 99, b"\x00\x01\x02", correlation_id=42)
    payload = raw_response(s)
    corr, body = decode_response(payload, ApiKey.API_VERSIONS, 0)
    assert corr == 42
    assert body["error_code"] == Errors.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0,
                                 "max_version": messages.API_VERSIONS.max_version}]
    raw_request(s, ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                            "client_software_version": "1.0"},
                correlation_id=43)
    corr, body = decode_response(raw_response(s), ApiKey.API_VERSIONS, 3)
    assert corr == 43 and body["error_code"] == 0
    s.close()


def test_client_falls_back_when_broker_has_older_api_versions(server):
    # The broker only supports ApiVersions v0-2: the client's v4 request gets
    # the v0 UNSUPPORTED_VERSION answer and the client retries with v2.
    from kchannel.server.handlers import handle_api_versions
    server.register_handler(ApiKey.API_VERSIONS, handle_api_versions, 0, 2)
    with client_for(server) as c:
        assert c.api_versions[ApiKey.API_VERSIONS] == (0, 2)
        assert c.network._nodes[c.node_id].api_versions_version == 2


def test_api_versions_answer_follows_handler_changes(server):
    """The encoded ApiVersions answer is kept between connections, and made
    again once a handler is registered or unregistered."""
    def keys(version=3):
        s = raw(server)
        try:
            raw_request(s, ApiKey.API_VERSIONS, version,
                        {"client_software_name": "raw", "client_software_version": "1.0"})
            _, body = decode_response(raw_response(s), ApiKey.API_VERSIONS, version)
        finally:
            s.close()
        assert body["error_code"] == 0
        return {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]}

    first = keys()
    assert keys() == first
    assert server.api_versions_body_bytes(3) is server.api_versions_body_bytes(3)
    server.register_handler(ApiKey.HEARTBEAT, lambda ctx: None, 1, 2)
    assert keys()[ApiKey.HEARTBEAT] == (1, 2)
    server.handlers.unregister(ApiKey.HEARTBEAT)
    assert keys() == first and ApiKey.HEARTBEAT not in first


def test_invalid_client_software_name_gets_invalid_request(server):
    s = raw(server)
    raw_request(s, ApiKey.API_VERSIONS, 3, {"client_software_name": "bad name!",
                                            "client_software_version": "1"})
    _, body = decode_response(raw_response(s), ApiKey.API_VERSIONS, 3)
    assert body["error_code"] == Errors.INVALID_REQUEST
    s.close()


def _bad_inputs():
    hdr = struct.pack(">hhi", ApiKey.METADATA, 12, 1)
    return {
        "garbage-frame": encode_frame(b"\x01\x02\x03"),
        "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "negative-size": b"\x80\x00\x00\x00",
        "huge-size": b"\x7f\xff\xff\xff",
        "unknown-api-key": encode_frame(struct.pack(">hhih", 999, 0, 1, -1)),
        "unsupported-version": encode_frame(struct.pack(">hhih", ApiKey.METADATA, 99, 1, -1)),
        "no-handler": encode_frame(encode_request(
            RequestHeader(ApiKey.FIND_COORDINATOR, 0, 1, "x"), {"key": "g"})),
        "truncated-body": encode_frame(hdr + b"\x00\x01\x00\x00\xff"),
        "bad-client-id-length": encode_frame(struct.pack(">hhih", ApiKey.METADATA, 1, 1, 500)),
        "random": bytes(range(7, 250, 3)) * 3,
    }


@pytest.mark.parametrize("name", sorted(_bad_inputs()))
def test_bad_input_closes_only_that_connection(server, name):
    good = client_for(server)
    bad = raw(server)
    bad.sendall(_bad_inputs()[name])
    assert_closed(bad)
    bad.close()
    body = good.request(ApiKey.METADATA, {"topics": []})
    assert body["brokers"][0]["node_id"] == 7
    good.close()


def test_truncated_frame_then_close(server):
    good = client_for(server)
    bad = raw(server)
    bad.sendall(struct.pack(">i", 1000) + b"partial")
    bad.close()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()


def test_tls_client_hello_to_plaintext_port(server):
    import ssl
    good = client_for(server)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = raw(server)
    with pytest.raises((ssl.SSLError, OSError)):
        ctx.wrap_socket(s, server_hostname="localhost")
    s.close()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()


def test_handler_exception_closes_connection_only(server):
    def boom(ctx):
        raise RuntimeError("handler bug")

    server.register_handler(ApiKey.DESCRIBE_CLUSTER, boom)
    good = client_for(server)
    bad = client_for(server)
    with pytest.raises(Exception):
        bad.request(ApiKey.DESCRIBE_CLUSTER, {})
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()
    bad.close()


def test_network_client_many_connections(server):
    net = NetworkClient({"client.id": "many"})
    port = server.bound_port("PLAINTEXT")
    n = 300
    try:
        for i in range(n):
            net.connect(i, "127.0.0.1", port)
        for _ in range(3000):
            if all(net.is_ready(i) for i in range(n)):
                break
            net.poll(10)
        assert all(net.is_ready(i) for i in range(n))
        corrs = {net.send(i, ApiKey.METADATA, {"topics": []}): i for i in range(n)}
        got = []
        for _ in range(3000):
            got += net.poll(10)
            if len(got) == n:
                break
        assert len(got) == n
        assert all(r.exception is None and r.body["brokers"][0]["node_id"] == 7 for r in got)
        assert {r.node_id for r in got} == set(range(n))
    finally:
        net.close()


def test_connect_refused_raises_quickly():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = KafkaClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    from kchannel.errors import ChannelConnectionError
    with pytest.raises(ChannelConnectionError):
        c.connect()
    assert c.network.connection_state(c.node_id) is ConnectionState.DISCONNECTED
    c.close()


def test_server_metrics_count_requests(server):
    with client_for(server) as c:
        c.request(ApiKey.METADATA, {"topics": []})
    server.shutdown()      # join the server thread: its last records are in
    snap = server.metrics.snapshot()
    assert snap["response-total"] >= 2       # ApiVersions + Metadata received
    assert snap["request-total"] >= 2        # and answered
    assert snap["successful-authentication-total"] >= 1


def test_listener_spec_forms():
    s = Server(listeners=[("A", "127.0.0.1", 0, "PLAINTEXT"),
                          {"name": "B", "host": "127.0.0.1", "port": 0,
                           "security_protocol": "PLAINTEXT"}])
    try:
        assert s.bound_port("A") != s.bound_port("B")
        assert s.listener("a").security_protocol == "PLAINTEXT"
    finally:
        s.shutdown()


def test_duplicate_listener_names_rejected():
    from kchannel.errors import ConfigError
    with pytest.raises(ConfigError):
        Server(listeners=["PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"])


@pytest.mark.parametrize("text, message", [
    ("PLAINTEXT://localhost",
     "Error creating broker listeners from 'PLAINTEXT://localhost': Unable to parse "
     "PLAINTEXT://localhost to a broker endpoint"),
    ("PLAINTEXT://127.0.0.1:99999999999",
     "Error creating broker listeners from 'PLAINTEXT://127.0.0.1:99999999999': For input "
     'string: "99999999999"'),
])
def test_keyword_listeners_fail_as_the_config_parser_does(text, message):
    """Kafka: SocketServerConfigs.listenerListToEndPoints (the keyword API
    and the properties go through the one listener parser)."""
    from kchannel.config import ServerConfig
    from kchannel.errors import ConfigError
    with pytest.raises(ConfigError) as from_keyword:
        Server(listeners=[text])
    with pytest.raises(ConfigError) as from_properties:
        ServerConfig({"listeners": text})
    assert str(from_keyword.value) == str(from_properties.value) == message
    assert from_keyword.value.key == "listeners"


def test_keyword_listeners_take_kafkas_comma_separated_text():
    """``listeners`` as one string is Kafka's list form, not a sequence of
    characters."""
    from kchannel.config import ServerConfig
    from kchannel.errors import ConfigError
    text = "PLAINTEXT://127.0.0.1:0"
    s = Server(listeners=text)
    try:
        assert [(l.name, l.host, l.port) for l in s.listeners] == [
            (e.listener_name, e.host, e.port) for e in ServerConfig({"listeners": text}).listeners]
    finally:
        s.shutdown()
    with pytest.raises(ConfigError) as err:
        Server(listeners="PLAINTEXT://127.0.0.1:0,P")
    assert str(err.value) == ("Error creating broker listeners from 'PLAINTEXT://127.0.0.1:0,P': "
                              "Unable to parse P to a broker endpoint")


# ------------------------------------------------------------------ fuzzing
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@pytest.fixture(scope="module")
def fuzz_server():
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=7)
    s.start()
    good = client_for(s)
    yield s, good
    good.close()
    s.shutdown()


def _framed_junk():
    header = st.tuples(st.integers(-5, 80), st.integers(-3, 20), st.integers(-2**31, 2**31 - 1))
    return st.builds(
        lambda h, rest: encode_frame(struct.pack(">hhi", *h) + rest),
        header, st.binary(max_size=200))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(min_size=1, max_size=300), _framed_junk()))
def test_any_bytes_fail_closed_and_others_keep_being_served(fuzz_server, data):
    server, good = fuzz_server
    s = raw(server)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)      # whatever was sent is all there is
    # The server answers a valid request or closes the connection; it never
    # hangs on a complete input and never crashes.
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    s.close()
    assert server._thread.is_alive()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 7


def test_sasl_requests_after_authentication_get_illegal_sasl_state(server):
    s = raw(server)
    raw_request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, correlation_id=5)
    corr, body = decode_response(raw_response(s), ApiKey.SASL_HANDSHAKE, 1)
    assert corr == 5 and body["error_code"] == Errors.ILLEGAL_SASL_STATE
    raw_request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"x"}, correlation_id=6)
    corr, body = decode_response(raw_response(s), ApiKey.SASL_AUTHENTICATE, 1)
    assert corr == 6 and body["error_code"] == Errors.ILLEGAL_SASL_STATE
    # the connection stays usable
    raw_request(s, ApiKey.METADATA, 1, {"topics": []}, correlation_id=7)
    corr, body = decode_response(raw_response(s), ApiKey.METADATA, 1)
    assert corr == 7 and body["brokers"][0]["node_id"] == 7
    s.close()


def test_client_reconnects_after_idle_expiry():
    class Clock:
        now = 1_700_000_000_000

        def __call__(self):
            return self.now

    clock = Clock()
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=60_000,
               time=clock)
    s.start()
    try:
        with client_for(s) as c:
            assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]
            clock.now += 60_001          # the server expires the idle connection
            for _ in range(1000):
                c.network.poll(10)
                if not c.is_connected():
                    break
            assert not c.is_connected()
            # the next request reconnects once and succeeds
            assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]
            assert c.is_connected()
        assert s.metrics.snapshot()["connection-creation-total"] == 2
    finally:
        s.shutdown()
