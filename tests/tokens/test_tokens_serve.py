"""Several ``kchannel serve`` processes sharing delegation tokens: through a
real ZooKeeper (``kchannel.delegation.token.store=zookeeper``) and through the
default SQLite store in a shared data directory.  A token created through one
server authenticates on the other; renewing or expiring it on one is seen by
the other."""
import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from kchannel.security.sasl.scram_store import credential_from_password, open_store
from kchannel.tokens.admin import DelegationTokenAdmin

from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


class ServeProcess:
    """``kchannel serve`` in a subprocess; learns its port from the log."""

    def __init__(self, tmp_path, name, store_props, data_dir=None):
        data = data_dir or (tmp_path / name)
        data.mkdir(exist_ok=True)
        store = open_store(data_dir=str(data))
        store.put("alice", "SCRAM-SHA-256",
                  credential_from_password("SCRAM-SHA-256", "alice-secret"))
        store.close()
        props = {
            "node.id": "1" if name == "a" else "2",
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
            "log.dirs": str(data),
            "delegation.token.secret.key": "shared-secret",
        }
        props.update(store_props)
        cfg = tmp_path / f"{name}.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen([sys.executable, "-m", "kchannel", "serve", "--config",
                                      str(cfg)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     env=env, cwd=ROOT)
        self.log = []
        self.port = self._wait_for_port()

    def _wait_for_port(self, timeout=60):
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stderr.fileno()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buf += chunk
                m = re.search(rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.", buf)
                if m and b"started" in buf:
                    self.log.append(buf.decode("utf-8", "replace"))
                    return int(m.group(1))
            elif self.proc.poll() is not None:
                break
        self.stop()
        raise AssertionError(f"kchannel serve did not start: {buf.decode('utf-8', 'replace')}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stderr.close()
        return self.proc.returncode


def scram_client(port, username, password, token=False, mechanism="SCRAM-SHA-256"):
    extra = ' tokenauth="true"' if token else ""
    c = KafkaClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                     "sasl.jaas.config": f'{SCRAM} required username="{username}" '
                                         f'password="{password}"{extra};'})
    return c.connect("127.0.0.1", port)


def token_login_ok(port, token, mechanism="SCRAM-SHA-256"):
    try:
        scram_client(port, token.token_info.token_id, token.hmac_base64, True, mechanism).close()
        return True
    except SaslAuthenticationError:
        return False


def start_pair(tmp_path, store_props, shared_dir=None):
    a = ServeProcess(tmp_path, "a", store_props, shared_dir)
    try:
        b = ServeProcess(tmp_path, "b", store_props, shared_dir)
    except BaseException:
        a.stop()
        raise
    return a, b


@pytest.fixture(params=["zookeeper", "sqlite"])
def server_pair(request, tmp_path):
    if request.param == "zookeeper":
        zk = request.getfixturevalue("zookeeper")
        a, b = start_pair(tmp_path, {"kchannel.delegation.token.store": "zookeeper",
                                     "zookeeper.connect": zk.chroot()})
    else:
        a, b = start_pair(tmp_path, {}, tmp_path / "shared")
    yield a, b
    assert (b.stop(), a.stop()) == (0, 0)


def test_two_serve_processes_share_tokens(server_pair):
    a, b = server_pair
    with scram_client(a.port, "alice", "alice-secret") as c:
        token = DelegationTokenAdmin(c).create(renewers=["User:bob"])
    # Created through A, it authenticates on B (and A).
    assert wait_until(lambda: token_login_ok(b.port, token, "SCRAM-SHA-512"))
    assert token_login_ok(a.port, token)
    with scram_client(b.port, "alice", "alice-secret") as c:
        assert DelegationTokenAdmin(c).describe() == [token]
        # Renewed on B, seen on A.
        expiry = DelegationTokenAdmin(c).renew(token.hmac, 60000)
    with scram_client(a.port, "alice", "alice-secret") as c:
        assert wait_until(lambda: DelegationTokenAdmin(c).describe()[0]
                          .token_info.expiry_timestamp == expiry)
        # Expired on A: logins end on both.
        DelegationTokenAdmin(c).expire(token.hmac, -1)
    assert not token_login_ok(a.port, token)
    assert wait_until(lambda: not token_login_ok(b.port, token))
    with scram_client(b.port, "alice", "alice-secret") as c:
        assert DelegationTokenAdmin(c).describe() == []
