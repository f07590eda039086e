"""Out of file descriptors, the server waits instead of spinning.

``kchannel serve`` runs with a low ``RLIMIT_NOFILE`` (set in the child before
it starts) and an unauthenticated peer opens more connections than it can
accept.  accept() then fails with EMFILE while the listening socket stays
readable: retrying at once would spin at full CPU and log a line per
attempt.  The server instead stops watching its listeners for a back-off,
logs one rate-limited line, keeps serving the connections it has, and
accepts again (a legitimate login succeeds) once descriptors are free.

CPU use is read from /proc in CPU seconds of the server process, not wall
time.
"""
import os
import resource
import socket
import struct
import time

import pytest

from kchannel.framing import encode_frame
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"),
                                reason="needs Linux /proc to read the server's CPU time")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
NOFILE = 64
ATTACKERS = 150
WINDOW_S = 3.0
ACCEPT_ERROR = "Error accepting connection"


def _limit_fds():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, hard))


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15 of stat(5), 12 and 13 after ")"
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    """A raw SASL/PLAIN client (blocking, with a generous timeout)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation_id = 0

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the server")
            buf += chunk
        return bytes(buf)

    def request(self, api_key, version, body):
        self.correlation_id += 1
        header = RequestHeader(int(api_key), version, self.correlation_id, "fd-test")
        self.sock.sendall(encode_frame(encode_request(header, body)))
        frame = self._exact(struct.unpack(">i", self._exact(4))[0])
        correlation_id, response = decode_response(frame, int(api_key), version)
        assert correlation_id == self.correlation_id
        return response

    def login(self, user, password):
        r = self.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert r["error_code"] == 0, r
        token = f"\0{user}\0{password}".encode()
        return self.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})

    def close(self):
        self.sock.close()


@pytest.mark.slow
def test_out_of_file_descriptors_no_spin_then_login(kchannel_server):
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
            f'user_admin="admin-secret" user_alice="alice-secret";',
        "kchannel.scram.credential.store": "memory",
        "kchannel.delegation.token.store": "memory",
    }
    server = kchannel_server(props, preexec=_limit_fds)
    port = server.port("SASL_PLAINTEXT")

    # An authenticated connection made before the descriptors run out.
    alice = Client(port)
    assert alice.login("alice", "alice-secret")["error_code"] == 0

    mark = server.mark()
    attackers = [socket.create_connection(("127.0.0.1", port), timeout=30)
                 for _ in range(ATTACKERS)]
    try:
        assert server.wait_for_log(ACCEPT_ERROR, timeout=30, start=mark), \
            "the server never ran out of descriptors: " + server.log()[-2000:]
        assert "Too many open files" in server.log()

        before = _cpu_seconds(server.pid)
        deadline = time.monotonic() + WINDOW_S
        served = 0
        while time.monotonic() < deadline:
            # existing connections keep being served meanwhile
            r = alice.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "fd-test",
                                                       "client_software_version": "1"})
            assert r["error_code"] == 0
            served += 1
            time.sleep(0.25)
        cpu = _cpu_seconds(server.pid) - before
    finally:
        for sock in attackers:
            sock.close()
    assert served >= 2
    # Spinning on accept() burns a whole core over the window.
    assert cpu < WINDOW_S * 0.25, f"server used {cpu:.2f} CPU s in a {WINDOW_S} s window"

    # Descriptors come back as the server sees the attackers' FINs: a new
    # login succeeds (its connection waits in the listen backlog meanwhile).
    bob = Client(port)
    assert bob.login("alice", "alice-secret")["error_code"] == 0
    bob.close()
    alice.close()

    errors = [line for line in server.log_lines()[mark:] if ACCEPT_ERROR in line]
    assert 1 <= len(errors) <= 3, "".join(errors[:10])
    assert server.alive()
