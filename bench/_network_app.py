"""The ensemble `bench/network.py` serves with ``agentensemble worker _network_app:bench``.

Each shared tool answers with the wall-clock time it started (for pickup latency): ``instant``
at once, ``slow`` after `LATENCY` seconds (a model's latency), ``hold`` after a minute (for
the reclaim measurement: its worker is killed long before)."""

from __future__ import annotations

import asyncio
import time

from agentensemble import Ensemble, tool

LATENCY = 0.05


@tool
async def instant() -> str:
    """Answer at once."""
    return repr(time.time())


@tool
async def slow() -> str:
    """Answer after a model's latency."""
    started = time.time()
    await asyncio.sleep(LATENCY)
    return repr(started)


@tool
async def hold() -> str:
    """Answer after a minute (the bench kills the worker first)."""
    started = time.time()
    await asyncio.sleep(60)
    return repr(started)


bench = Ensemble(name="bench", shared_tools={"instant": instant, "slow": slow, "hold": hold})
