"""First-fit-decreasing bin packing (BEHAVIOUR 16.5) and output token counts (16.4)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from agentensemble.observability import TaskMetrics
from agentensemble.outputs import TaskOutput
from agentensemble.workflows._token_budget import TokenCounter, pack_first_fit_decreasing


def packed(sizes: list[int], budget: int) -> list[list[int]]:
    return [[sizes[index] for index in bin_] for bin_ in pack_first_fit_decreasing(sizes, budget)]


def test_the_reference_example() -> None:
    assert packed([30, 60, 40, 50], 100) == [[60, 40], [50, 30]]


def test_nothing_to_pack() -> None:
    assert pack_first_fit_decreasing([], 100) == []


def test_an_oversized_size_gets_a_bin_nothing_joins() -> None:
    assert packed([10, 150, 5], 100) == [[150], [10, 5]]
    assert packed([0, 101], 100) == [[101], [0]]


def test_ties_keep_their_order() -> None:
    assert pack_first_fit_decreasing([50, 50, 50], 100) == [[0, 1], [2]]


def first_fit_by_scanning(sizes: list[int], budget: int) -> list[list[int]]:
    """The plain quadratic algorithm, to check the tree-based one against."""
    order = sorted(range(len(sizes)), key=lambda index: -sizes[index])
    bins: list[list[int]] = []
    used: list[int] = []
    for index in order:
        size = sizes[index]
        if size > budget:
            bins.append([index])
            used.append(budget + 1)
            continue
        for number, total in enumerate(used):
            if total + size <= budget:
                bins[number].append(index)
                used[number] += size
                break
        else:
            bins.append([index])
            used.append(size)
    return bins


@pytest.mark.parametrize("seed", range(20))
def test_the_same_bins_as_scanning_every_bin(seed: int) -> None:
    generator = random.Random(seed)
    for _ in range(50):
        budget = generator.randint(1, 100)
        sizes = [generator.randint(0, 130) for _ in range(generator.randint(0, 60))]
        assert pack_first_fit_decreasing(sizes, budget) == first_fit_by_scanning(sizes, budget)


def output(raw: str, *, output_tokens: int, calls: int) -> TaskOutput[None]:
    return TaskOutput(
        raw=raw,
        task_description="t",
        agent_role="Writer",
        completed_at=datetime.now(UTC),
        duration=timedelta(0),
        metrics=TaskMetrics(output_tokens=output_tokens, llm_call_count=calls),
    )


def test_the_provider_count_wins_when_a_model_wrote_the_output() -> None:
    counter = TokenCounter(lambda text: 999)
    assert counter.count(output("x" * 40, output_tokens=7, calls=1)) == 7


def test_the_estimator_counts_when_the_provider_did_not() -> None:
    counter = TokenCounter(lambda text: len(text.split()))
    assert counter.count(output("three short words", output_tokens=-1, calls=1)) == 3


def test_a_handler_output_is_estimated_not_counted_as_zero() -> None:
    assert TokenCounter().count(output("x" * 40, output_tokens=0, calls=0)) == 10


def test_without_an_estimate_characters_over_four() -> None:
    assert TokenCounter(lambda text: None).count(output("x" * 41, output_tokens=-1, calls=1)) == 10
