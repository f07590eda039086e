"""network_client._Node's per-request fields are NodeState's (the client
loop twin's base class: C fields of the compiled twin, which
ClientLoop._send and _handle_response and the Sender read as loads)."""
from kchannel.client import network_client
from kchannel.client.connection_state import ConnectionState

_FIELDS = ("id", "state", "in_flight", "api_versions", "stats")


def test_node_fields_are_node_states_not_shadowed():
    # A slot of the same name on _Node would shadow the base's field: the
    # Python-level attribute and the compiled twin's C field would then be
    # two different values (the compiled _send read a None stats).
    node_type = network_client._Node
    assert issubclass(node_type, network_client.NodeState)
    assert not set(_FIELDS) & set(node_type.__slots__)
    for name in _FIELDS:
        assert name in network_client.NodeState.__dict__, name
        assert name not in node_type.__dict__, name


def test_send_and_response_use_the_nodes_own_fields():
    net = network_client.NetworkClient({"bootstrap.servers": "127.0.0.1:1"})
    try:
        node = network_client._Node(7, "127.0.0.1", 1, 0, 0, 10000)
        node.state = ConnectionState.READY
        net._nodes[7] = node
        sent = []

        class _Sends:
            def send(self, id, frame, already_framed=False):
                sent.append((id, frame))

        real, net.selector = net.selector, _Sends()
        try:
            corr = net._send(node, 18, 3, (b"x" * 10,), False)
        finally:
            net.selector = real
        assert sent[0][0] == 7                    # node.id, read by _send
        assert node.stats.tx == 1 and node.stats.txbytes == len(b"".join(sent[0][1]))
        assert list(node.in_flight) == [corr]
    finally:
        net.close()
