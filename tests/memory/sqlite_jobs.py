"""Jobs for the SQLite worker's tests: a table of numbers, and what writing it looks like."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Job = Callable[[sqlite3.Connection], object]


def numbers_table(connection: sqlite3.Connection) -> None:
    connection.execute("CREATE TABLE IF NOT EXISTS numbers (n INTEGER)")


def insert_number(n: int) -> Callable[[sqlite3.Connection], None]:
    def run(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO numbers VALUES (?)", (n,))

    return run


def insert_then_fail(connection: sqlite3.Connection) -> None:
    connection.execute("INSERT INTO numbers VALUES (99)")
    raise ValueError("this write changes its mind")


def numbers(connection: sqlite3.Connection) -> list[int]:
    return [n for (n,) in connection.execute("SELECT n FROM numbers ORDER BY n")]


def heads(statements: Sequence[str]) -> list[str]:
    """The statements without their parameters."""
    return [statement.split(" (")[0] for statement in statements]


THREE_WRITES_THE_MIDDLE_ONE_FAILING = [
    "BEGIN IMMEDIATE",
    "SAVEPOINT batch",
    "INSERT INTO numbers VALUES",
    "INSERT INTO numbers VALUES",
    "ROLLBACK TO batch",
    *("SAVEPOINT job", "INSERT INTO numbers VALUES", "RELEASE job"),
    *("SAVEPOINT job", "INSERT INTO numbers VALUES", "ROLLBACK TO job", "RELEASE job"),
    *("SAVEPOINT job", "INSERT INTO numbers VALUES", "RELEASE job"),
    "COMMIT",
]
"""The statements of three writes in one transaction when the second raises: all three
ran, were rolled back to before them, then ran each in a savepoint; one transaction
throughout, so another process never got the write lock in between."""
