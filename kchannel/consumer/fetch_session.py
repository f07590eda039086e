"""Incremental fetch sessions (KIP-227), as Kafka's ``FetchSessionHandler``:
one per broker the consumer fetches from.  Sans-I/O: ``build`` says what
the next Fetch request carries, ``handle_response``/``handle_error`` what
came of it.

The first request of a session is a full one (epoch 0, every partition);
the broker answers with a session id, and from then on a request carries
only the partitions whose fetch offset changed or that joined, names those
that left in ``forgotten_topics_data``, and bumps the epoch; the broker
answers only for partitions with something new.  A session error
(FETCH_SESSION_ID_NOT_FOUND: the broker evicted it or restarted;
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR...) or a failed
request makes the next request a full one again, closing the old session.
A broker that answers a full request with session id 0 keeps no session
(Kafka's cache is full, or a server without sessions): requests stay full,
each asking for one, as Java's client does.  Bookkeeping is per request,
never per record.
"""
from kchannel.log import get_logger
from kchannel.protocol.errors import Errors, exception_for

__all__ = ["FetchSessionHandler", "FetchRequestData", "INVALID_SESSION_ID", "INITIAL_EPOCH",
           "FINAL_EPOCH"]

log = get_logger("kchannel.consumer.fetch_session")

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0       # a full request: create a session (or close one and create another)
FINAL_EPOCH = -1        # close the session (or: no session at all)
_MAX_EPOCH = 2 ** 31 - 1


class FetchRequestData:
    """What one Fetch request carries: ``to_send`` ({tp: fetch offset}, the
    partitions in the request), ``to_forget`` ([tp]), the session id and
    epoch, and whether it is a full request."""

    __slots__ = ("session_id", "epoch", "to_send", "to_forget", "full", "topic_ids")

    def __init__(self, session_id, epoch, to_send, to_forget, full, topic_ids):
        self.session_id = session_id
        self.epoch = epoch
        self.to_send = to_send
        self.to_forget = to_forget
        self.full = full
        self.topic_ids = topic_ids        # {topic: id} of the forgotten partitions


class FetchSessionHandler:
    __slots__ = ("node", "session_id", "epoch", "partitions", "topic_ids", "version")

    def __init__(self, node):
        self.node = node
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH       # of the next request
        self.partitions = {}             # tp -> fetch offset, as the broker's session has it
        self.topic_ids = {}              # topic -> topic id the session knows it by
        self.version = None              # Fetch version the session speaks

    def build(self, positions, version, topic_ids):
        """The next request to this node for ``positions`` ({tp: fetch
        offset}, the partitions wanted now); ``topic_ids`` ({topic: id})."""
        known = self.topic_ids
        if self.epoch > INITIAL_EPOCH and (
                version != self.version or
                any(topic_ids.get(tp.topic) != known[tp.topic] for tp in positions
                    if tp.topic in known)):
            # Topic ids appeared or changed (a topic re-created): start over.
            self.epoch = INITIAL_EPOCH
        self.version = version
        if self.epoch <= INITIAL_EPOCH:
            self.partitions = dict(positions)
            self.topic_ids = {tp.topic: topic_ids.get(tp.topic) for tp in positions}
            return FetchRequestData(self.session_id, INITIAL_EPOCH, positions, [], True, {})
        session = self.partitions
        to_send = {tp: offset for tp, offset in positions.items() if session.get(tp) != offset}
        to_forget = [tp for tp in session if tp not in positions]
        forgotten_ids = {tp.topic: self.topic_ids.get(tp.topic) for tp in to_forget}
        self.partitions = dict(positions)
        for tp in to_send:
            self.topic_ids[tp.topic] = topic_ids.get(tp.topic)
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget, False,
                                forgotten_ids)

    def handle_response(self, body, sent):
        """What came of the request ``sent`` (its FetchRequestData); False
        if its partitions are not to be read (a session error)."""
        code = body.get("error_code", 0)
        if code:
            if code == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            log.info("Node %s was unable to process the fetch request with (sessionId=%s, "
                     "epoch=%s): %s.", self.node, sent.session_id, sent.epoch,
                     exception_for(code).name)
            self.epoch = INITIAL_EPOCH
            return False
        session_id = body.get("session_id", INVALID_SESSION_ID)
        if sent.full:
            if session_id == INVALID_SESSION_ID:
                log.debug("Node %s sent a full fetch response with no session", self.node)
                self.session_id = INVALID_SESSION_ID
                self.epoch = INITIAL_EPOCH
            else:
                log.debug("Node %s sent a full fetch response that created a new incremental "
                          "fetch session %s", self.node, session_id)
                self.session_id = session_id
                self.epoch = 1
        elif session_id == INVALID_SESSION_ID:
            log.info("Node %s sent an incremental fetch response closing session %s",
                     self.node, sent.session_id)
            self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        return True

    def handle_error(self):
        """The request failed (disconnection, timeout): the next request is
        a full one, closing this session on the broker and opening
        another."""
        self.epoch = INITIAL_EPOCH

    def close_request(self):
        """``(session id, FINAL_EPOCH)`` to close the session, or None when
        there is none; the handler starts over."""
        session_id = self.session_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
        self.topic_ids = {}
        if session_id == INVALID_SESSION_ID:
            return None
        return session_id, FINAL_EPOCH

    def __repr__(self):
        return (f"FetchSessionHandler(node={self.node}, sessionId={self.session_id}, "
                f"epoch={self.epoch}, partitions={len(self.partitions)})")
