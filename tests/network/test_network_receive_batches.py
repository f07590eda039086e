"""Selector ``max_receives_per_channel``: Kafka's one receive per channel per
poll by default; with more, frames already read are handed over together,
in order, and a server's responses to such a channel still all arrive."""
import pytest

from tests.fixtures.selectors import selector_pair


@pytest.mark.parametrize("batch", [1, 16])
def test_frames_in_order_and_per_poll_bound(batch):
    server, client, ls = selector_pair(batch)
    try:
        payloads = [b"%03d" % i * (i + 1) for i in range(40)]
        for p in payloads:
            client.send("c", p)
        while client.channel("c").has_send():
            client.poll(10)
        got = []
        per_poll = []
        for _ in range(500):
            server.poll(10)
            frames = [p for cid, p in server.completed_receives if cid == "s0"]
            if frames:
                per_poll.append(len(frames))
            got.extend(frames)
            if len(got) == len(payloads):
                break
        assert got == payloads
        assert max(per_poll) <= batch
        if batch > 1:
            assert max(per_poll) > 1
    finally:
        client.close()
        server.close()
        ls.close()


def test_batched_requests_all_answered_in_order():
    server, client, ls = selector_pair(16)
    try:
        n = 30
        for i in range(n):
            client.send("c", b"req-%d" % i)
        answers = []
        for _ in range(1000):
            client.poll(5)
            answers.extend(p for _, p in client.completed_receives)
            server.poll(5)
            for cid, p in server.completed_receives:
                server.send(cid, b"resp-" + p[4:])
            if len(answers) == n:
                break
        assert answers == [b"resp-%d" % i for i in range(n)]
        assert not server.disconnected and not client.disconnected
    finally:
        client.close()
        server.close()
        ls.close()
