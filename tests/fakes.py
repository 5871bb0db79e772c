"""Test doubles shared by several test modules."""

from __future__ import annotations

import asyncio


class FakeClock:
    """Virtual time for rate limiters: `sleep` advances the clock instead of waiting, and
    records each wait in `sleeps`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake = self.now + seconds
        await asyncio.sleep(0)
        self.now = max(self.now, wake)
