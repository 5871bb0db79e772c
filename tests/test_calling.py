"""`is_awaitable`: inspect's answer, with a fast one for what sync callables mostly return."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Generator
from typing import Any

import pytest

from agentensemble._calling import is_awaitable


class Deferred:
    def __await__(self) -> Generator[Any, None, str]:
        yield from ()
        return "later"


class AwaitableText(str):
    """Text that can be awaited: its type is not plain `str`, so inspect decides."""

    def __await__(self) -> Generator[Any, None, str]:
        yield from ()
        return str(self)


async def _answer() -> str:
    return "now"


@pytest.mark.parametrize(
    "value",
    [None, "done", "", True, False, 0, 1.5, b"raw", ["a"], {"k": 1}, object(), Deferred()],
    ids=repr,
)
def test_it_answers_as_inspect_does(value: object) -> None:
    assert is_awaitable(value) is inspect.isawaitable(value)


def test_text_of_a_subclass_that_can_be_awaited_is_awaitable() -> None:
    assert is_awaitable(AwaitableText("x"))


async def test_coroutines_and_futures_are_awaitable() -> None:
    coroutine = _answer()
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    assert is_awaitable(coroutine)
    assert is_awaitable(future)
    future.set_result("set")
    assert await coroutine == "now"
    assert await future == "set"
