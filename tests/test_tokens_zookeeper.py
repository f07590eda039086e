"""Delegation tokens shared through a real ZooKeeper: the ZooKeeper store
(Kafka's ``/delegation_token`` layout and JSON, change notifications, watch
-driven caches) and two ``kchannel serve`` processes -- a token created
through one authenticates on the other, and expiring it on one ends logins on
both."""
import json
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
from kchannel.protocol.errors import Errors
from kchannel.security.sasl.scram_store import credential_from_password, open_store
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.manager import TokenManager
from kchannel.utils import now_ms

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def wait_until(predicate, timeout=15.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def test_zk_store_layout_and_cross_store_changes(zookeeper):
    from kazoo.client import KazooClient
    from kchannel.tokens.zk_store import ZkTokenStore
    connect = zookeeper.chroot()
    chroot = "/" + connect.split("/", 1)[1]
    s1, s2 = ZkTokenStore(connect), ZkTokenStore(connect)
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start()
    try:
        m1, m2 = TokenManager("zkKey", store=s1), TokenManager("zkKey", store=s2)
        now = now_ms()
        r = m1.create_token("User:alice", renewers=["User:bob"], now=now)
        data, _ = zk.get(f"{chroot}/delegation_token/tokens/{r.token_id}")
        assert json.loads(data) == {
            "version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice",
            "renewers": ["User%3Abob"], "issueTimestamp": now,
            "maxTimestamp": r.max_timestamp, "expiryTimestamp": r.expiry_timestamp,
            "tokenId": r.token_id}
        changes = zk.get_children(f"{chroot}/delegation_token/token_changes")
        assert [zk.get(f"{chroot}/delegation_token/token_changes/{c}")[0] for c in changes
                if c.startswith("token_change_")] == [r.token_id.encode()]
        assert wait_until(lambda: m2.get_token(r.token_id) is not None)
        assert m2.get_token(r.token_id).hmac == r.hmac

        # A renewal (node data change + notification) reaches the other cache.
        err, expiry = m2.renew_token("User:bob", r.hmac, 1000, now=now + 1)
        assert err is Errors.NONE
        assert wait_until(lambda: m1.get_token(r.token_id).token_info.expiry_timestamp == expiry)

        # A token written by another Kafka-layout writer (no notification
        # needed for a new node) is picked up from the children watch.
        other = TokenManager("zkKey").create_token("User:carol", now=now)
        info = {"version": 3, "owner": "User%3Acarol", "tokenRequester": "User%3Acarol",
                "renewers": [], "issueTimestamp": now, "maxTimestamp": now + 60000,
                "expiryTimestamp": now + 30000, "tokenId": other.token_id}
        zk.create(f"{chroot}/delegation_token/tokens/{other.token_id}",
                  json.dumps(info).encode())
        assert wait_until(lambda: m1.get_token(other.token_id) is not None
                          and m2.get_token(other.token_id) is not None)
        assert m1.get_token(other.token_id).hmac == other.hmac

        assert m1.expire_token("User:alice", r.hmac, -1, now=now + 2)[0] is Errors.NONE
        assert zk.exists(f"{chroot}/delegation_token/tokens/{r.token_id}") is None
        assert wait_until(lambda: m2.get_token(r.token_id) is None)
        assert m2.token_credential(r.token_id, "SCRAM-SHA-256", now + 3) is None
        zk.delete(f"{chroot}/delegation_token/tokens/{other.token_id}")
        assert wait_until(lambda: m1.get_token(other.token_id) is None
                          and m2.get_token(other.token_id) is None)
    finally:
        zk.stop()
        zk.close()
        s1.close()
        s2.close()


class ServeProcess:
    """``kchannel serve`` in a subprocess; learns its port from the log."""

    def __init__(self, tmp_path, name, zk_connect):
        data = tmp_path / name
        data.mkdir()
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
            "delegation.token.secret.key": "shared-zk-secret",
            "kchannel.delegation.token.store": "zookeeper",
            "zookeeper.connect": zk_connect,
        }
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


def test_two_serve_processes_share_tokens(tmp_path, zookeeper):
    connect = zookeeper.chroot()
    a = ServeProcess(tmp_path, "a", connect)
    try:
        b = ServeProcess(tmp_path, "b", connect)
    except BaseException:
        a.stop()
        raise
    try:
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
    finally:
        codes = (b.stop(), a.stop())
    assert codes == (0, 0)
