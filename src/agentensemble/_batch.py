"""Running one ensemble over many inputs (`Ensemble.run_many`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from agentensemble._checks import require_int
from agentensemble._inputs import Inputs, check_inputs
from agentensemble.errors import ValidationError

if TYPE_CHECKING:
    from agentensemble.options import RunOptions

__all__ = ["run_batch"]

R = TypeVar("R")


async def run_batch(
    run: Callable[[Inputs, RunOptions | None], Awaitable[R]],
    inputs_list: Iterable[Inputs],
    options: RunOptions | None,
    *,
    max_concurrency: int | None,
) -> list[R | Exception]:
    """`run(inputs, options)` for each inputs mapping, at most `max_concurrency` at once;
    each result or error at its inputs' index."""
    if isinstance(inputs_list, Mapping):
        raise ValidationError(
            "run_many inputs_list must be a list of inputs mappings, got one mapping: "
            f"wrap it in a list, [{inputs_list!r}]"
        )
    if isinstance(inputs_list, str | bytes) or not isinstance(inputs_list, Iterable):
        raise ValidationError(
            f"run_many inputs_list must be a list of inputs mappings, got: {inputs_list!r}"
        )
    batch = [
        check_inputs(item, f"run_many inputs_list[{index}]")
        for index, item in enumerate(inputs_list)
    ]
    if (
        max_concurrency is not None
        and require_int(max_concurrency, "run_many max_concurrency") <= 0
    ):
        raise ValidationError(f"run_many max_concurrency must be > 0, got: {max_concurrency}")
    if options is not None and getattr(options, "run_id", None) is not None:
        raise ValidationError(
            f"run_many options must not set run_id: each run gets its own (got: {options.run_id!r})"
        )
    results: list[R | Exception] = [ValidationError("not run")] * len(batch)
    gate = asyncio.Semaphore(max_concurrency or max(len(batch), 1))

    async def one(index: int, inputs: Inputs) -> None:
        async with gate:
            try:
                results[index] = await run(inputs, options)
            except Exception as error:  # recorded in its place; the other runs go on
                results[index] = error

    async with asyncio.TaskGroup() as group:
        for index, inputs in enumerate(batch):
            group.create_task(one(index, inputs))
    return results
