"""`CalculatorTool` (``calculator``): arithmetic on an expression string (BEHAVIOUR 7.7).

A small recursive-descent parser of exactly this grammar; nothing is handed to `eval`::

    expression := term (('+'|'-') term)*
    term       := unary (('*'|'/'|'%') unary)*
    unary      := ('-'|'+') unary | power
    power      := primary ('^' unary)?        # right-associative, the exponent may be signed
    primary    := '(' expression ')' | number  # number = [0-9.]+

Numbers are floats (IEEE doubles, as in the Java original). Whitespace separates tokens and is
otherwise ignored (``"2 3"`` is an error, not 23). ``%`` takes the sign of the dividend
(``-7 % 3`` is -1, as Java's ``%``; Python's own ``%`` would give 2).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field

from agentensemble.tools._function import tool
from agentensemble.tools._result import ToolResult

__all__ = ["CalculatorTool"]

MAX_EXPRESSION_LENGTH = 1_000
"""Longer expressions are refused (characters, whitespace included)."""
MAX_NESTING = 100
"""Deepest nesting of parentheses, unary signs and exponents; keeps recursion bounded."""
_INTEGRAL_LIMIT = 1e15
"""Integral results below this magnitude are shown without decimals."""
_NUMBER_CHARACTERS = frozenset("0123456789.")


class CalculationError(Exception):
    """An expression that cannot be evaluated; the message is shown to the model."""


class CalculatorTool:
    """Give it to an agent (``tools=[CalculatorTool()]``) so that it computes arithmetic
    exactly instead of guessing.

    Supports ``+ - * / % ^``, unary ``+``/``-`` and parentheses. ``^`` is right-associative
    and binds tighter than unary minus (``-2^2`` is -4). Integral results print without
    decimals (``"14"``), others as Python's float repr (``"0.125"``).
    """

    @tool(name="calculator")
    def calculator(
        self,
        expression: Annotated[
            str,
            Field(description="Arithmetic expression, for example '(2 + 3) * 4 ^ 2 / 7 % 3'"),
        ],
    ) -> ToolResult:
        """Evaluate an arithmetic expression with + - * / % ^ (power), unary minus and
        parentheses. Returns the numeric result."""
        try:
            value = evaluate(expression)
        except CalculationError as error:
            return ToolResult.failure(str(error))
        return ToolResult.success(format_number(value), structured=value)

    def __repr__(self) -> str:
        return "CalculatorTool()"


def evaluate(expression: str) -> float:
    """The value of `expression`; raises `CalculationError` with the message for the model."""
    if not expression.strip():
        raise CalculationError("Expression must not be blank")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(
            f"Expression is too long ({len(expression)} characters; "
            f"the limit is {MAX_EXPRESSION_LENGTH})"
        )
    return _Parser(expression).parse()


def format_number(value: float) -> str:
    """``"5"`` for integral values below 1e15 in magnitude, else the float's repr."""
    if value.is_integer() and abs(value) < _INTEGRAL_LIMIT:
        return str(int(value))
    return repr(value)


class _Parser:
    """One pass over one expression; `position` indexes the original text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.depth = 0

    def parse(self) -> float:
        value = self._expression()
        character = self._peek()
        if character is not None:
            raise _syntax_error(f"Unexpected character '{character}' at position {self.position}")
        return value

    def _expression(self) -> float:
        value = self._term()
        while (operator := self._peek()) in ("+", "-"):
            self.position += 1
            right = self._term()
            value = _checked(value + right if operator == "+" else value - right)
        return value

    def _term(self) -> float:
        value = self._unary()
        while (operator := self._peek()) in ("*", "/", "%"):
            self.position += 1
            value = _apply_multiplicative(value, operator, self._unary())
        return value

    def _unary(self) -> float:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise CalculationError(
                f"Expression is nested too deeply (more than {MAX_NESTING} levels)"
            )
        sign = self._peek()
        if sign in ("+", "-"):
            self.position += 1
            operand = self._unary()
            value = -operand if sign == "-" else operand
        else:
            value = self._power()
        self.depth -= 1
        return value

    def _power(self) -> float:
        base = self._primary()
        if self._peek() != "^":
            return base
        self.position += 1
        return _power(base, self._unary())

    def _primary(self) -> float:
        character = self._peek()
        if character is None:
            raise _syntax_error("Unexpected end of expression")
        if character == "(":
            self.position += 1
            value = self._expression()
            if self._peek() != ")":
                raise _syntax_error("Missing closing parenthesis")
            self.position += 1
            return value
        if character in _NUMBER_CHARACTERS:
            return self._number()
        raise _syntax_error(f"Unexpected character '{character}'")

    def _number(self) -> float:
        start = self.position
        while self.position < len(self.text) and self.text[self.position] in _NUMBER_CHARACTERS:
            self.position += 1
        literal = self.text[start : self.position]
        try:
            value = float(literal)
        except ValueError:
            raise _syntax_error(f"Invalid number: {literal}") from None
        if math.isinf(value):
            raise CalculationError("Number is too large")
        return value

    def _peek(self) -> str | None:
        """The next non-whitespace character (skipping the whitespace), or None at the end."""
        while self.position < len(self.text) and self.text[self.position].isspace():
            self.position += 1
        return self.text[self.position] if self.position < len(self.text) else None


def _syntax_error(detail: str) -> CalculationError:
    return CalculationError(f"Invalid expression: {detail}")


def _apply_multiplicative(left: float, operator: str, right: float) -> float:
    if operator == "*":
        return _checked(left * right)
    if right == 0:
        raise CalculationError("Division by zero" if operator == "/" else "Modulo by zero")
    if operator == "/":
        return _checked(left / right)
    return math.fmod(left, right)  # sign of the dividend, like Java's %


def _power(base: float, exponent: float) -> float:
    if base == 0 and exponent < 0:
        raise CalculationError("Division by zero")
    try:
        return _checked(math.pow(base, exponent))
    except OverflowError:
        raise CalculationError("Result is too large") from None
    except ValueError:  # a negative base to a fractional power
        raise CalculationError("Result is not a real number") from None


def _checked(value: float) -> float:
    """Float arithmetic overflows to infinity silently; report it instead."""
    if math.isinf(value):
        raise CalculationError("Result is too large")
    return value
