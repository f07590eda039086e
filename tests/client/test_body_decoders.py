"""NetworkClient decodes a header-v0 response with the schema's body
decoder straight (``_body_decoders``, one interpreted call less per
response than the decoder's wrapper, rt11): the bodies are the wrapper's,
a caller's own decoder registered later (``add_response_decoder``) takes
over, and a pipelined batch keeps its order.  Against a kchannel Server over
PLAINTEXT, whichever twins are loaded (run the file under
KCHANNEL_NO_EXTENSIONS=1 for the pure ones)."""
from kchannel.client import NetworkClient
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import response_decoder
from kchannel.server import Server

METADATA = int(ApiKey.METADATA)


def _metadata_server():
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    seen = []

    def handle(ctx):
        seen.append(ctx.header.correlation_id)
        # a body that varies per request: the decode is checked per response
        return {"brokers": [{"node_id": len(seen), "host": "h" * len(seen), "port": 9092,
                             "rack": None}],
                "controller_id": len(seen), "topics": []}
    server.register_handler(ApiKey.METADATA, handle)
    server.start()
    return server


def _pipelined_metadata(net, n, depth):
    sent = got = 0
    out = []
    while got < n:
        while sent < n and sent - got < depth:
            net.send(0, METADATA, {"topics": []}, 1)
            sent += 1
        for resp in net.poll(1000):
            assert resp.exception is None, resp.exception
            out.append(resp)
            got += 1
    return out


def test_header_v0_bodies_decoded_straight_and_factories_take_over():
    server = _metadata_server()
    net = NetworkClient({"client.id": "body-decoders"})
    try:
        net.connect(0, "127.0.0.1", server.bound_port("PLAINTEXT"))
        while not net.is_ready(0):
            net.poll(100)
        first = _pipelined_metadata(net, 30, depth=10)
        key = (METADATA << 16) | 1
        assert key in net._body_decoders         # the straight path is the one taken
        assert [r.correlation_id for r in first] == sorted(r.correlation_id for r in first)
        for i, r in enumerate(first, 1):
            assert r.body == {"brokers": [{"node_id": i, "host": "h" * i, "port": 9092,
                                           "rack": None}],
                              "controller_id": i, "topics": []}
            assert (r.api_key, r.api_version, r.node_id) == (METADATA, 1, 0)
            assert r.receive_time_ms >= r.request_time_ms > 0

        made = []

        def make(version, generic):
            made.append(version)

            def decode(payload):
                return {"mine": generic(payload)["controller_id"]}
            return decode
        net.add_response_decoder(METADATA, make)
        assert key not in net._body_decoders
        later = _pipelined_metadata(net, 5, depth=5)
        assert made == [1]
        assert [r.body for r in later] == [{"mine": i} for i in range(31, 36)]
    finally:
        net.close()
        server.shutdown()


def test_body_decoder_is_the_wrappers_decoder():
    decode = response_decoder(METADATA, 1)
    payload = (7).to_bytes(4, "big") + bytes.fromhex("00000000" "00000001" "00000000")
    assert decode.body_decoder(payload, 4) == decode(payload) == {
        "brokers": [], "controller_id": 1, "topics": []}
    # header v1 (flexible) responses keep their wrapper only
    assert not hasattr(response_decoder(METADATA, 9), "body_decoder")
