"""``Sender.wakeup`` (what ``send()`` calls when a record opens or fills a
batch) wakes the network thread once per ready() scan: the flag the scan
sets is cleared with the wakeup, and appends before the next scan are seen
by it."""
from kchannel.client.metadata import TopicPartition
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator
from kchannel.producer.sender import Sender
from kchannel.utils import now_ms


class _Client:
    def __init__(self):
        self.wakeups = 0

    def wakeup(self):
        self.wakeups += 1


def _sender(acc, client):
    # Only what wakeup() and wakeup_now() use.
    sender = Sender.__new__(Sender)
    sender.accumulator = acc
    sender.client = client
    return sender


def test_one_wakeup_per_scan_for_the_batches_opened_before_it():
    acc = RecordAccumulator(1024, 5, 100, 1000, 120000, 1 << 20, now_ms)
    client = _Client()
    sender = _sender(acc, client)
    assert acc.wakeup_needed            # a new accumulator: the Sender may sleep
    for partition in range(7):
        acc.append(TopicPartition("t", partition), QueuedRecord(0, None, b"v", ()), 40, None,
                   -1, 1, 1000)
        sender.wakeup()
    assert client.wakeups == 1 and not acc.wakeup_needed
    # A ready() scan sets the flag again (under the lock): the next batch
    # wakes the thread again.
    acc.wakeup_needed = True
    sender.wakeup()
    sender.wakeup()
    assert client.wakeups == 2
    # flush, close and metadata waits wake it whatever the flag
    sender.wakeup_now()
    assert client.wakeups == 3
