"""`PerLoop`: one value per event loop (an SDK client), closed when that loop shuts down.

HTTP clients hold connections that belong to the loop that opened them. A `PerLoop` makes
one per loop and closes it on that loop when the loop shuts down: `asyncio.run()`, an
`asyncio.Runner` and agentensemble's own loops (a thread's, the background one) all
finalize pending async generators before closing, and a started generator per value is
what closes it. A loop closed without that leaves its value to the garbage collector,
forgotten at the next use.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ["PerLoop"]

T = TypeVar("T")


class PerLoop(Generic[T]):
    """Makes a value on first use in each event loop; closes it when the loop shuts down."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[object]]) -> None:
        self._make = make
        self._close = close
        self._values: dict[asyncio.AbstractEventLoop, T] = {}
        self._keepers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}

    def __len__(self) -> int:
        return len(self._values)

    async def get(self) -> T:
        """The running loop's value, made now if it has none."""
        import asyncio

        loop = asyncio.get_running_loop()
        value = self._values.get(loop)
        if value is None:
            self._forget_closed_loops()
            value = self._values[loop] = self._make()
            keeper = _keep(weakref.ref(self), loop, value, self._close)
            await keeper.__anext__()  # started: the loop will finalize it when it shuts down
            self._keepers[loop] = keeper
        return value

    async def aclose(self) -> None:
        """Close the running loop's value now (the next `get` makes a new one)."""
        import asyncio

        keeper = self._keepers.get(asyncio.get_running_loop())
        if keeper is not None:
            await keeper.aclose()

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._values if loop.is_closed()]:
            self._values.pop(loop, None)
            self._keepers.pop(loop, None)


async def _keep(
    owner: weakref.ref[PerLoop[T]],
    loop: asyncio.AbstractEventLoop,
    value: T,
    close: Callable[[T], Awaitable[object]],
) -> AsyncGenerator[None, None]:
    """Holds `value` until its loop finalizes this generator (at shutdown, or when the
    `PerLoop` is dropped), then closes it on that loop. It refers to its owner weakly: no
    reference cycle, so a dropped owner is freed by reference counting and the close runs
    before the value's transports are finalized."""
    import asyncio

    try:
        yield
    finally:
        per_loop = owner()
        if per_loop is not None:
            per_loop._values.pop(loop, None)
            per_loop._keepers.pop(loop, None)
        await close(value)
        # Transports finish closing in callbacks the loop runs next; let them run before a
        # shutting-down loop closes.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
