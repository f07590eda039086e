"""Client-side cluster metadata (Kafka's ``Metadata``, ``Cluster``,
``TopicPartition``, ``PartitionInfo``), sans-I/O.

:class:`Metadata` tracks the topics a producer or consumer needs, decides
when a Metadata request is due (``metadata.max.age.ms``, an explicit
``request_update()`` after NOT_LEADER_OR_FOLLOWER/UNKNOWN_TOPIC_OR_PARTITION,
``retry.backoff.ms`` between attempts, doubling while they fail up to
``retry.backoff.max.ms``), builds the request body and turns
the response into an immutable :class:`Cluster` snapshot.  Sending the
request is :class:`kchannel.client.cluster_client.ClusterClient`'s job.
"""
import collections
import threading
import uuid

from kchannel.log import get_logger
from kchannel.protocol.errors import Errors, error_name

__all__ = ["TopicPartition", "PartitionInfo", "Cluster", "Metadata"]

log = get_logger("kchannel.metadata")

TopicPartition = collections.namedtuple("TopicPartition", "topic partition")
TopicPartition.__str__ = lambda self: f"{self.topic}-{self.partition}"

_ZERO_UUID = uuid.UUID(int=0)


class PartitionInfo:
    """One partition as the Metadata response describes it."""

    __slots__ = ("topic", "partition", "leader", "leader_epoch", "replicas", "isr",
                 "offline_replicas", "error_code")

    def __init__(self, topic, partition, leader, leader_epoch=-1, replicas=(), isr=(),
                 offline_replicas=(), error_code=0):
        self.topic = topic
        self.partition = partition
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.offline_replicas = tuple(offline_replicas)
        self.error_code = error_code

    def __repr__(self):
        return (f"Partition(topic = {self.topic}, partition = {self.partition}, "
                f"leader = {self.leader}, replicas = {list(self.replicas)}, "
                f"isr = {list(self.isr)})")


class Cluster:
    """An immutable view of the cluster from one Metadata response."""

    def __init__(self, cluster_id=None, nodes=None, partitions=(), topic_ids=None,
                 unauthorized_topics=(), invalid_topics=(), topic_errors=None,
                 controller=-1):
        self.cluster_id = cluster_id
        self.nodes = dict(nodes or {})        # node id -> (host, port, rack)
        self.topic_ids = dict(topic_ids or {})
        self.topic_names = {v: k for k, v in self.topic_ids.items()}
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.topic_errors = dict(topic_errors or {})
        self.controller = controller
        by_topic = collections.defaultdict(dict)
        for p in partitions:
            by_topic[p.topic][p.partition] = p
        self._by_topic = {t: [ps[i] for i in sorted(ps)] for t, ps in by_topic.items()}
        self._by_tp = {TopicPartition(p.topic, p.partition): p for p in partitions}
        # {tp: leader id} of the partitions whose leader is known (in the
        # nodes): leader_for's answers, computed once per Metadata response
        # (this view never changes), read without a call per partition by
        # the producer's ready scan and drain.
        nodes = self.nodes
        self.leaders = {tp: p.leader for tp, p in self._by_tp.items()
                        if p.leader is not None and p.leader >= 0 and p.leader in nodes}
        self._available = {t: [p for p in ps if p.leader is not None and p.leader >= 0
                               and p.leader in self.nodes]
                           for t, ps in self._by_topic.items()}

    @classmethod
    def bootstrap(cls, addresses):
        """Kafka's ``Cluster.bootstrap``: nodes -1, -2, ... for the bootstrap
        servers and no topics."""
        return cls(nodes={-(i + 1): (host, port, None) for i, (host, port) in
                          enumerate(addresses)})

    @property
    def is_bootstrap(self):
        return all(nid < 0 for nid in self.nodes)

    def topics(self):
        return set(self._by_topic)

    def node(self, node_id):
        return self.nodes.get(node_id)

    def partitions_for_topic(self, topic):
        return self._by_topic.get(topic, [])

    def available_partitions_for_topic(self, topic):
        return self._available.get(topic, [])

    def partition(self, tp):
        return self._by_tp.get(tp)

    def leader_for(self, tp):
        """The leader's node id, None when unknown (no partition, no leader,
        or a leader outside the nodes)."""
        return self.leaders.get(tp)

    def partition_count(self, topic):
        ps = self._by_topic.get(topic)
        return len(ps) if ps is not None else None

    def topic_id(self, topic):
        return self.topic_ids.get(topic, _ZERO_UUID)

    def __repr__(self):
        return (f"Cluster(id = {self.cluster_id}, nodes = {sorted(self.nodes)}, "
                f"topics = {sorted(self._by_topic)})")


class Metadata:
    """Kafka's ``Metadata``: when to refresh, what to ask, the current
    :class:`Cluster`.  Times are milliseconds passed in by the caller."""

    def __init__(self, bootstrap_addresses, metadata_max_age_ms=300000,
                 refresh_backoff_ms=100, allow_auto_topic_creation=True,
                 metadata_max_idle_ms=300000, refresh_backoff_max_ms=None):
        self.cluster = Cluster.bootstrap(bootstrap_addresses)
        self.bootstrap_addresses = list(bootstrap_addresses)
        self.metadata_max_age_ms = int(metadata_max_age_ms)
        self.refresh_backoff_ms = int(refresh_backoff_ms)
        # Kafka's Metadata.refreshBackoff: retry.backoff.ms doubling per failed
        # attempt up to retry.backoff.max.ms (no jitter here: the clock is
        # the caller's, and the doubling alone bounds a dead cluster's load).
        self.refresh_backoff_max_ms = max(self.refresh_backoff_ms, int(
            refresh_backoff_ms if refresh_backoff_max_ms is None else refresh_backoff_max_ms))
        self.failed_attempts = 0
        self.metadata_max_idle_ms = int(metadata_max_idle_ms)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._topics = {}              # topic -> last time it was needed (ms)
        self.need_full_update = True
        self.last_refresh_ms = 0
        self.last_successful_refresh_ms = 0
        self.update_version = 0
        self.request_version = 0       # bumps when the set of topics changes
        # Kafka's Metadata.fatalException: an authentication failure, raised
        # once to a caller waiting for metadata (maybe_raise_fatal_error).
        self.fatal_error = None
        # Application threads add topics while the network thread updates.
        self._lock = threading.RLock()
        self._listeners = []

    def add_listener(self, fn):
        """``fn(cluster)`` is called after every successful update and after
        :meth:`set_fatal_error` (waiters wake up to raise it)."""
        self._listeners.append(fn)

    def set_fatal_error(self, exc):
        """Kafka's ``Metadata.fatalError``: ``exc`` (an authentication
        failure on a connection the metadata depends on) is to be raised to
        the next caller waiting for metadata instead of letting it wait out
        its timeout."""
        self.fatal_error = exc
        for fn in self._listeners:
            fn(self.cluster)

    def maybe_raise_fatal_error(self):
        """Kafka's ``maybeThrowFatalException``: raise the fatal error once,
        then forget it (the next authentication failure sets it again)."""
        exc = self.fatal_error
        if exc is not None:
            self.fatal_error = None
            raise exc

    # -- topics ------------------------------------------------------------
    def add_topic(self, topic, now):
        """Keep ``topic`` in the metadata; a new topic asks for an update."""
        topics = self._topics
        if topic in topics:
            # The send path's common case: no lock (replacing a present key
            # never resizes the dict that update() may be iterating).
            topics[topic] = now
            return
        with self._lock:
            if topic not in self._topics:
                self._topics[topic] = now
                self.request_version += 1
                self.need_full_update = True
            else:
                self._topics[topic] = now

    def set_topics(self, topics, now):
        topics = set(topics)
        with self._lock:
            if topics != set(self._topics):
                self._topics = {t: self._topics.get(t, now) for t in topics}
                self.request_version += 1
                self.need_full_update = True

    def topics(self):
        with self._lock:
            return set(self._topics)

    def request_update(self):
        """Ask for a refresh as soon as the backoff allows (Kafka's
        ``requestUpdate``); returns the current update version."""
        self.need_full_update = True
        return self.update_version

    def time_to_next_update(self, now):
        """Milliseconds until a Metadata request is due (0: now)."""
        if self.need_full_update:
            expire = 0
        else:
            expire = max(self.last_successful_refresh_ms + self.metadata_max_age_ms - now, 0)
        backoff = max(self.last_refresh_ms + self.refresh_backoff() - now, 0)
        return max(expire, backoff)

    def refresh_backoff(self):
        """The back-off after the last attempt (ms)."""
        if not self.failed_attempts:
            return self.refresh_backoff_ms
        return min(self.refresh_backoff_ms << min(self.failed_attempts - 1, 30),
                   self.refresh_backoff_max_ms)

    def request_body(self):
        """The Metadata request body for the topics of interest (an empty
        list when there are none, as Kafka's producer asks)."""
        with self._lock:
            topics = sorted(self._topics)
        return {"topics": [{"name": t, "topic_id": _ZERO_UUID} for t in topics],
                "allow_auto_topic_creation": self.allow_auto_topic_creation,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}

    def failed_update(self, now):
        self.last_refresh_ms = now
        self.failed_attempts += 1

    def update(self, body, now):
        """Install the Metadata response ``body``; returns the new Cluster."""
        nodes = {b["node_id"]: (b["host"], b["port"], b.get("rack")) for b in body["brokers"]}
        partitions = []
        topic_ids = {}
        unauthorized, invalid, topic_errors = [], [], {}
        for t in body["topics"]:
            name = t.get("name")
            code = t["error_code"]
            if name is None:
                continue
            tid = t.get("topic_id")
            if tid is not None and tid != _ZERO_UUID:
                topic_ids[name] = tid
            if code == Errors.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.append(name)
            elif code == Errors.INVALID_TOPIC_EXCEPTION:
                invalid.append(name)
            if code:
                topic_errors[name] = code
                if code != Errors.LEADER_NOT_AVAILABLE:
                    continue
            for p in t["partitions"]:
                partitions.append(PartitionInfo(
                    name, p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                    p["replica_nodes"], p["isr_nodes"], p.get("offline_replicas", ()),
                    p["error_code"]))
        self.cluster = Cluster(body.get("cluster_id"), nodes, partitions, topic_ids,
                               unauthorized, invalid, topic_errors,
                               body.get("controller_id", -1))
        self.need_full_update = False
        # A broker answered: an older authentication failure no longer
        # stands in the way.
        self.fatal_error = None
        self.last_refresh_ms = now
        self.last_successful_refresh_ms = now
        self.failed_attempts = 0
        self.update_version += 1
        for name, code in topic_errors.items():
            log.debug("Metadata: topic %s has error %s", name, error_name(code))
        # Forget topics not needed for metadata.max.idle.ms (producer).
        with self._lock:
            stale = [t for t, last in self._topics.items()
                     if now - last > self.metadata_max_idle_ms]
            for t in stale:
                del self._topics[t]
        for fn in self._listeners:
            fn(self.cluster)
        return self.cluster
