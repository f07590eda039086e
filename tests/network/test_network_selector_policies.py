"""The Selector's policy collaborators (kchannel.network.selector_policies)
on their own: ids and deadlines in, due ids out, no sockets."""
from types import SimpleNamespace

from kchannel.network.selector_policies import DelayedCloses, SetupDeadlines, WriteScheduler


def test_delayed_closes_due_in_order_and_removable():
    d = DelayedCloses(delay_ms=100)
    server = SimpleNamespace(mode="server")
    assert d.applies_to(server)
    assert not d.applies_to(SimpleNamespace(mode="client"))
    assert not DelayedCloses(0).applies_to(server)
    d.add("b", now=10)
    d.add("a", now=5)
    d.add("c", now=10)
    assert len(d) == 3 and d.ids == {"a", "b", "c"} and d.next_due() == 105
    assert d.pop_due(104) == []
    d.remove("b")                       # closed some other way meanwhile
    assert d.ids == {"a", "c"} and len(d) == 2
    assert d.pop_due(110) == ["a", "c"]
    assert not d.ids and len(d) == 0 and d.next_due() is None


def test_setup_deadlines_due_in_order():
    s = SetupDeadlines()
    for id, deadline in (("x", 30), ("y", 10), ("z", 30)):
        s.add(id, deadline)
    assert s.next_due() == 10
    assert s.pop_due(9) == []
    assert s.pop_due(30) == ["y", "x", "z"]
    assert len(s) == 0 and s.next_due() is None


def test_write_scheduler_write_through_and_reports():
    w = WriteScheduler()
    server = SimpleNamespace(mode="server", disconnected=False, id="s")
    assert w.write_through_allowed(server)
    w.batched.add("s")        # several requests this poll: coalesce responses
    assert not w.write_through_allowed(server)
    assert not w.write_through_allowed(SimpleNamespace(mode="client", disconnected=False,
                                                       id="c"))
    assert not w.has_pending()
    w.to_flush.append(server)
    w.deferred_sends.append((server, [10]))
    w.deferred_failures["s"] = OSError("reset")
    assert w.has_pending()
    assert w.take_flush() == [server] and w.to_flush == []
    assert w.take_deferred_sends() == [(server, [10])]
    assert list(w.take_deferred_failures()) == ["s"]
    assert not w.has_pending()
