"""``kchannel.aio.AIOAdmin``: ``kchannel.Admin`` on the running event loop,
with no thread.

Every method of :class:`kchannel.Admin` is here as a coroutine with the
same name, arguments and result.  The admin's own code runs unchanged
through :class:`~kchannel.aio._loop.Bridge`: each broker connection's
selector is a :class:`~kchannel.aio._loop.LoopSelector`, so where the
blocking code would wait for a response it awaits the loop instead.  Calls
are served one at a time, in order, as ``AIOConsumer``'s are.
"""
import asyncio
import functools
import inspect

from kchannel import errors
from kchannel.aio._loop import Bridge, LoopSelector
from kchannel.client.admin import Admin
from kchannel.client.network_client import KafkaClient

__all__ = ["AIOAdmin"]


class _LoopAdmin(Admin):
    """The blocking admin whose broker connections use the loop's selector."""

    def __init__(self, bridge, config):
        self._loop_bridge = bridge
        super().__init__(config)

    def _sleep(self, seconds):
        # The retry back-off, awaited on the loop.
        self._loop_bridge.await_(asyncio.sleep(seconds))

    def _new_client(self):
        selector = LoopSelector()
        selector.bridge = self._loop_bridge
        return KafkaClient(self._client_configs, os_selector=selector)


def _coroutine(name, method):
    @functools.wraps(method)
    async def call(self, *args, **kwargs):
        if self._closed:
            raise errors.KChannelError("This admin client has already been closed.")
        return await self._bridge.run(getattr(self._admin, name), *args, **kwargs)
    return call


class AIOAdmin:
    """An asyncio admin client; ``config`` as ``kchannel.Admin``'s.  Use
    ``async with`` or ``await close()``."""

    def __init__(self, config):
        self._bridge = Bridge()
        self._admin = _LoopAdmin(self._bridge, config)
        self._closed = False

    async def close(self):
        if self._closed:
            return
        self._closed = True
        await self._bridge.run(self._admin.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


# Admin's public methods, as coroutines (listed once here so that the
# class has them as attributes: dir(), help() and autocompletion see them).
ADMIN_METHODS = tuple(name for name, fn in inspect.getmembers(Admin, inspect.isfunction)
                      if not name.startswith("_") and name != "close")
for _name in ADMIN_METHODS:
    setattr(AIOAdmin, _name, _coroutine(_name, getattr(Admin, _name)))
del _name
