"""A sync `run()` inside `asyncio.run(main())`: the first Ctrl-C must stop it.

Prints "reached" when the model is called, then waits; the test sends SIGINT then. Prints
"cancelled" when the run's work is cancelled, and exits with KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from agentensemble import Ensemble, FunctionModel, Task
from agentensemble.models import Message, ToolSpec


async def endless(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    print("reached", flush=True)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        print("cancelled", flush=True)
        raise


async def main() -> None:
    ensemble = Ensemble(tasks=[Task("Wait")], llm=FunctionModel(endless))
    ensemble.run()  # a sync call inside a running loop, as in a notebook or a sync handler


if __name__ == "__main__":
    assert threading.current_thread() is threading.main_thread()
    asyncio.run(main())
