"""The network client's frame for a request body given as parts (the
producer's Produce request with its record batch): the size prefix and
header written from a cached ``(head, tail)`` per API version
(``request_header_parts``) instead of a call of the request encoder per
request.  The frame must be the bytes ``request_encoder`` (and so
``encode_request``) writes, for every Produce version (header v1 and v2),
and follow a change of client id.  Also the cluster's leader map, which
the producer's ready scan and drain read instead of calling
``leader_for`` per partition."""
import pytest

from kchannel.client import ConnectionState, NetworkClient
from kchannel.client.metadata import Cluster, PartitionInfo, TopicPartition
from kchannel.client.network_client import _Node
from kchannel.protocol import messages
from kchannel.protocol.headers import request_encoder

PRODUCE = messages.PRODUCE.api_key


class _Sends:
    """A selector stand-in keeping what the client queues."""

    def __init__(self):
        self.frames = []

    def send(self, id, frame, already_framed=False):
        assert already_framed
        self.frames.append(frame)


def _client_to_node_1(client_id):
    net = NetworkClient({"bootstrap.servers": "127.0.0.1:1", "client.id": client_id})
    node = _Node(1, "127.0.0.1", 1, 0, 0, 10000)
    node.state = ConnectionState.READY
    net._nodes[1] = node
    net.selector.close()
    net.selector = _Sends()
    return net, node


@pytest.mark.parametrize("version", range(messages.PRODUCE.min_version,
                                          messages.PRODUCE.max_version + 1))
def test_parts_frame_is_the_request_encoders(version):
    net, node = _client_to_node_1("frames")
    body = (b"\x00\x01head", b"\x00" * 3, b"r" * 20000, b"\x00\x00\x00")
    before = node.stats.txbytes
    corr = net.send(1, PRODUCE, body, version)
    frame = net.selector.frames[-1]
    assert type(frame) is tuple and frame[-len(body):] == body    # the records uncopied
    joined = b"".join(frame)
    expected = request_encoder(PRODUCE, version, "frames", framed=True)(corr, b"".join(body))
    assert joined == expected
    assert node.stats.txbytes - before == len(joined)
    assert node.in_flight[corr].version == version


def test_a_new_client_id_is_in_the_next_frame():
    net, _ = _client_to_node_1("first")
    body = (b"abc", b"d" * 100)
    corr = net.send(1, PRODUCE, body, 9)
    assert b"".join(net.selector.frames[-1]) == request_encoder(
        PRODUCE, 9, "first", framed=True)(corr, b"".join(body))
    net.client_id = "second-id"
    corr = net.send(1, PRODUCE, body, 9)
    assert b"".join(net.selector.frames[-1]) == request_encoder(
        PRODUCE, 9, "second-id", framed=True)(corr, b"".join(body))


def test_a_too_large_frame_is_refused():
    class _Huge(bytes):
        def __len__(self):
            return 0x7FFFFFFF
    net, _ = _client_to_node_1("big")
    with pytest.raises(ValueError, match="too large"):
        net.send(1, PRODUCE, (b"x", _Huge(b"y")), 9)


def test_cluster_leaders_are_leader_for():
    nodes = {1: ("h", 1, None), 2: ("h", 2, None)}
    parts = [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, -1), PartitionInfo("t", 2, None),
             PartitionInfo("t", 3, 7), PartitionInfo("u", 0, 2)]
    cluster = Cluster(nodes=nodes, partitions=parts)
    assert cluster.leaders == {TopicPartition("t", 0): 1, TopicPartition("u", 0): 2}
    for p in parts + [PartitionInfo("v", 0, 1)]:
        tp = TopicPartition(p.topic, p.partition)
        assert cluster.leader_for(tp) == cluster.leaders.get(tp)
        assert cluster.leader_for(tp) == (p.leader if p.topic != "v" and p.leader in nodes
                                          else None)
