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


# Kafka's Selector has 22 fields.  Ours: the C fields of the compiled
# SelectorLoop (its pure twin's slots) plus what Selector.__init__ keeps in
# __dict__ (the channel factory and the on_close hook).  Three of the C
# fields alias state of the OS registrations collaborator (_epoll,
# _fd_to_key, _fd_ops) for speed: reading them through it costs 300 and 324
# more instructions per depth-1 round trip (selector.py says where).
# linger_ms and the metrics registry live in their collaborators
# (LingeringSockets, SelectorMetrics) since session 12: 32 attributes before.
MAX_SELECTOR_ATTRIBUTES = 30


def _selector_attributes(sel):
    slots = {n for cls in type(sel).__mro__ for n in cls.__dict__.get("__slots__", ())}
    # the compiled twin's C fields are member descriptors, not __slots__
    fields = {n for cls in type(sel).__mro__[1:] for n, v in vars(cls).items()
              if type(v).__name__ in ("member_descriptor", "getset_descriptor")
              and not n.startswith("__")}
    return sorted((slots | fields | set(vars(sel))) - {"__dict__", "__weakref__"})


def test_the_selector_has_at_most_the_stated_attributes():
    from kchannel.network.selector import Selector
    sel = Selector()
    try:
        names = _selector_attributes(sel)
        assert len(names) >= 25, names          # the count sees the C fields
        assert len(names) <= MAX_SELECTOR_ATTRIBUTES, (
            f"{len(names)} attributes (at most {MAX_SELECTOR_ATTRIBUTES}): put policy state "
            f"in its collaborator: {names}")
        # policy state lives in the collaborators, read through properties
        assert "linger_ms" not in vars(sel) and "metrics" not in vars(sel)
        sel.linger_ms = 7
        assert sel._lingering.linger_ms == 7 and sel.metrics is sel.sensors.metrics
        # the aliases are the OS registrations' own objects, not copies
        assert sel._fd_ops is sel._os.ops and sel._epoll is sel._os.epoll
        assert sel._fd_to_key is sel._os.fd_to_key
    finally:
        sel.close()
