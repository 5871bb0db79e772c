"""`CostConfiguration`: token prices, and the cost of a task from its token counts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import TypeAlias

from agentensemble.errors import ValidationError

__all__ = ["CostConfiguration"]

_EIGHT_PLACES = Decimal("0.00000001")


Rate: TypeAlias = Decimal | str | float | int
"""A price: a Decimal, or a number or numeric string converted exactly as written."""


@dataclass(frozen=True, slots=True, init=False)
class CostConfiguration:
    """Prices per token (not per thousand), as decimals: ``CostConfiguration("0.00000015",
    "0.0000006")``. Floats and ints are accepted and converted exactly as written."""

    input_token_rate: Decimal
    """Price of one input (prompt) token."""
    output_token_rate: Decimal
    """Price of one output (completion) token."""
    currency: str
    """Currency of the rates, for display."""

    def __init__(
        self, input_token_rate: Rate, output_token_rate: Rate, currency: str = "USD"
    ) -> None:
        set_ = object.__setattr__
        set_(self, "input_token_rate", _decimal(input_token_rate, "input_token_rate"))
        set_(self, "output_token_rate", _decimal(output_token_rate, "output_token_rate"))
        set_(self, "currency", currency)

    def estimate(self, input_tokens: int, output_tokens: int) -> Decimal | None:
        """Cost of the given counts, each side rounded half-up to 8 places; None if either
        count is unknown (negative)."""
        if input_tokens < 0 or output_tokens < 0:
            return None
        return _round(self.input_token_rate * input_tokens) + _round(
            self.output_token_rate * output_tokens
        )


def _round(value: Decimal) -> Decimal:
    return value.quantize(_EIGHT_PLACES, rounding=ROUND_HALF_UP)


def _decimal(value: object, field: str) -> Decimal:
    try:
        rate = Decimal(str(value)) if isinstance(value, (int, float, str)) else value
    except InvalidOperation:
        rate = None
    if not isinstance(rate, Decimal) or not rate.is_finite() or rate < 0:
        raise ValidationError(
            f"CostConfiguration {field} must be a non-negative number, got: {value!r}"
        )
    return rate
