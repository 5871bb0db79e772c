"""Calling user code that may be sync or async, without ever blocking the event loop."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["call_user_code"]


async def call_user_code(
    function: Callable[..., Any], /, *args: Any, is_async: bool | None = None, **kwargs: Any
) -> Any:
    """Await `function` if it is a coroutine function; otherwise run it in a worker thread.

    Either way, an awaitable it returns is awaited too. `is_async` skips the inspection when
    the caller already knows (hot paths cache it).
    """
    if is_async is None:
        is_async = inspect.iscoroutinefunction(function)
    if is_async:
        return await function(*args, **kwargs)
    import asyncio

    result = await asyncio.to_thread(function, *args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result
