"""Token counts of outputs, and first-fit-decreasing bin packing under a token budget
(BEHAVIOUR 16.4, 16.5)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError
from agentensemble.outputs import TaskOutput

__all__ = ["TokenCounter", "pack_first_fit_decreasing"]

logger = get_logger("agentensemble.mapreduce")

TokenEstimator = Callable[[str], "float | None"]
"""Counts the tokens of a text (rounded up); None defers to the built-in heuristic."""


class TokenCounter:
    """The tokens of an output: the provider's count of its output tokens when a model
    wrote it and reported usage, else the custom estimator's, else ``len(raw) // 4``. (A
    handler's output counts zero model tokens, which says nothing about its size.)"""

    __slots__ = ("_estimator", "_warned")

    def __init__(self, estimator: TokenEstimator | None = None) -> None:
        self._estimator = estimator
        self._warned = False

    def count(self, output: TaskOutput[Any]) -> int:
        """The output's token count (never negative)."""
        provided = output.metrics.output_tokens
        if provided >= 0 and output.metrics.llm_call_count > 0:
            return provided
        if self._estimator is not None:
            estimate = self._estimator(output.raw)
            if estimate is not None:
                return _checked(estimate)
        if not self._warned:  # once per run: the cause is the same for every output
            self._warned = True
            logger.warning(
                "MapReduce: the model reported no output token count for [%s]; estimating "
                "len(text) // 4 (set token_estimator for a better estimate)",
                output.agent_role,
            )
        return len(output.raw) // 4


def _checked(estimate: object) -> int:
    """A token count: a number >= 0, rounded up (``len(text) / 4`` is fine)."""
    if (
        isinstance(estimate, bool)
        or not isinstance(estimate, (int, float))
        or not 0 <= estimate < math.inf
    ):
        raise ValidationError(
            "MapReduceEnsemble token_estimator must return a token count >= 0 (or None), "
            f"got: {estimate!r}"
        )
    return math.ceil(estimate)


def pack_first_fit_decreasing(sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Group the indices of `sizes` into bins whose sizes sum to at most `budget`.

    Largest first (ties keep their order); each goes into the first bin it fits in, else a
    new bin. A size over the budget gets a bin of its own, which nothing joins. The first
    bin with room is found in O(log n), so thousands of bins pack quickly.
    """
    order = sorted(range(len(sizes)), key=lambda index: -sizes[index])  # stable
    bins: list[list[int]] = []
    room = _RoomTree(len(sizes))
    for index in order:
        size = sizes[index]
        number = room.first_with(size) if size <= budget else None
        if number is None:
            number = len(bins)
            bins.append([])
            room.set(number, budget - size if size <= budget else -1)
        else:
            room.set(number, room.left(number) - size)
        bins[number].append(index)
    return bins


class _RoomTree:
    """The room left in each bin, in a max-tree: the first bin with at least some room is a
    walk from the root."""

    __slots__ = ("_leaves", "_tree")

    def __init__(self, capacity: int) -> None:
        leaves = 1
        while leaves < capacity:
            leaves *= 2
        self._leaves = leaves
        self._tree = [-1] * (2 * leaves)  # -1: no bin there (or a full one)

    def left(self, number: int) -> int:
        return self._tree[self._leaves + number]

    def set(self, number: int, room: int) -> None:
        position = self._leaves + number
        tree = self._tree
        tree[position] = room
        position //= 2
        while position:
            tree[position] = max(tree[2 * position], tree[2 * position + 1])
            position //= 2

    def first_with(self, need: int) -> int | None:
        """The first bin with at least `need` room, if any."""
        tree = self._tree
        if tree[1] < need:
            return None
        position = 1
        while position < self._leaves:
            position *= 2
            if tree[position] < need:
                position += 1
        return position - self._leaves
