"""A channel's states: Kafka's ``ChannelState`` (:class:`State` plus, for
failures, the exception and the remote address) and ``KafkaChannel``'s
mute states and events.

Moved out of ``channel.py`` unchanged; ``kchannel.network.channel`` still
exports every name.
"""
import enum

__all__ = ["State", "ChannelState", "ChannelMuteState", "ChannelMuteEvent"]


class State(enum.Enum):
    NOT_CONNECTED = "NOT_CONNECTED"
    AUTHENTICATE = "AUTHENTICATE"
    READY = "READY"
    EXPIRED = "EXPIRED"
    FAILED_SEND = "FAILED_SEND"
    FAILED_RECEIVE = "FAILED_RECEIVE"
    LOCAL_CLOSE = "LOCAL_CLOSE"
    AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"


class ChannelState:
    """Kafka's ChannelState: a :class:`State` plus, for failures, the
    exception and the remote address.

    The shared constants (``ChannelState.READY`` ...) carry no exception.
    Equality compares the :class:`State` only, so
    ``disconnected[id] == ChannelState.EXPIRED`` works as in Kafka.
    """

    __slots__ = ("state", "exception", "remote_address")

    def __init__(self, state, exception=None, remote_address=None):
        self.state = state
        self.exception = exception
        self.remote_address = remote_address

    @property
    def name(self):
        return self.state.name

    def __eq__(self, other):
        if isinstance(other, ChannelState):
            return self.state is other.state
        if isinstance(other, State):
            return self.state is other
        return NotImplemented

    def __hash__(self):
        return hash(self.state)

    def __repr__(self):
        extra = ""
        if self.exception is not None:
            extra = f", {type(self.exception).__name__}: {self.exception}"
        if self.remote_address is not None:
            extra += f", remote={self.remote_address}"
        return f"ChannelState({self.state.name}{extra})"

    __str__ = __repr__


for _s in State:
    setattr(ChannelState, _s.name, ChannelState(_s))


class ChannelMuteState(enum.Enum):
    """Kafka's KafkaChannel.ChannelMuteState (the server's response-pending
    states are kept for name compatibility; the selector uses the first two)."""
    NOT_MUTED = "NOT_MUTED"
    MUTED = "MUTED"
    MUTED_AND_RESPONSE_PENDING = "MUTED_AND_RESPONSE_PENDING"
    MUTED_AND_THROTTLED = "MUTED_AND_THROTTLED"
    MUTED_AND_THROTTLED_AND_RESPONSE_PENDING = "MUTED_AND_THROTTLED_AND_RESPONSE_PENDING"


_NOT_MUTED = ChannelMuteState.NOT_MUTED


class ChannelMuteEvent(enum.Enum):
    """Kafka's KafkaChannel.ChannelMuteEvent (server side)."""
    REQUEST_RECEIVED = "REQUEST_RECEIVED"
    RESPONSE_SENT = "RESPONSE_SENT"
    THROTTLE_STARTED = "THROTTLE_STARTED"
    THROTTLE_ENDED = "THROTTLE_ENDED"


# Kafka's valid mute-state transitions per event.
_MUTE_TRANSITIONS = {
    ChannelMuteEvent.REQUEST_RECEIVED: {
        ChannelMuteState.MUTED: ChannelMuteState.MUTED_AND_RESPONSE_PENDING},
    ChannelMuteEvent.RESPONSE_SENT: {
        ChannelMuteState.MUTED_AND_RESPONSE_PENDING: ChannelMuteState.MUTED,
        ChannelMuteState.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING:
            ChannelMuteState.MUTED_AND_THROTTLED},
    ChannelMuteEvent.THROTTLE_STARTED: {
        ChannelMuteState.MUTED_AND_RESPONSE_PENDING:
            ChannelMuteState.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING},
    ChannelMuteEvent.THROTTLE_ENDED: {
        ChannelMuteState.MUTED_AND_THROTTLED: ChannelMuteState.MUTED,
        ChannelMuteState.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING:
            ChannelMuteState.MUTED_AND_RESPONSE_PENDING},
}
