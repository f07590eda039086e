"""The ZooKeeper token store against a real ZooKeeper: Kafka's
``/delegation_token`` layout and JSON, change notifications and watch-driven
caches shared by several stores.  (Two ``kchannel serve`` processes sharing
ZooKeeper are in test_tokens_serve.py.)"""
import json

import pytest

from kchannel.protocol.errors import Errors
from kchannel.tokens.manager import TokenManager
from kchannel.utils import now_ms

from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.slow


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
