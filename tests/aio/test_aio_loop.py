"""kchannel.aio's loop machinery on its own (no broker): how the Driver's
greenlet is woken."""
import asyncio

from kchannel.aio._loop import Driver, LoopSelector


class _CountingLoop(asyncio.SelectorEventLoop):
    """asyncio's own loop, counting the callbacks scheduled with call_soon."""

    def __init__(self):
        super().__init__()
        self.soon = 0

    def call_soon(self, *args, **kwargs):
        self.soon += 1
        return super().call_soon(*args, **kwargs)


def test_wakeups_while_the_driver_waits_resume_it_once():
    # An application appending while the Sender waits calls wakeup() per
    # batch it opens: one resume per wait, as the Selector's waker writes
    # one byte while one is unread; the next wait is woken again.
    async def main():
        loop = asyncio.get_running_loop()
        sel = LoopSelector()
        driver = Driver()
        sel.bridge = driver
        passes = []

        def sender_loop():
            while len(passes) < 2:
                sel.select(None)        # waits: no event, no timeout
                passes.append(loop.soon)

        driver.start(loop, sender_loop)
        for _ in range(3):
            await asyncio.sleep(0)      # the greenlet's first run: it waits
        assert passes == [] and driver.busy
        scheduled = loop.soon
        for _ in range(100):
            sel.wakeup()
        assert loop.soon == scheduled + 1
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(passes) == 1         # one pass, waiting again
        scheduled = loop.soon
        sel.wakeup()
        sel.wakeup()
        assert loop.soon == scheduled + 1
        await asyncio.wait_for(driver.done, 5)
        assert len(passes) == 2
        sel.close()

    # (a loop of our own, not asyncio.Runner: that is Python 3.11+)
    loop = _CountingLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
