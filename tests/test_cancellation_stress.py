"""Cancellation and Ctrl-C, exercised in child processes under asyncio's debug mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONASYNCIODEBUG": "1", "PYTHONPATH": str(ROOT)}


@pytest.mark.timeout(600)  # the child's own limit (300 s) fires first, with its output
@pytest.mark.parametrize("seed", [7, 2, 5])
def test_random_cancellations_lose_nothing_and_warn_about_nothing(seed: int) -> None:
    """300 runs cancelled at random points, with warnings as errors: every run either
    finishes or raises CancelledError, its trace holds exactly the tasks that completed, and
    no "never awaited" or "TaskGroup is shutting down" noise appears."""
    result = subprocess.run(
        [sys.executable, "-W", "error", "-m", "tests.stress.cancel_at_random", "300", str(seed)],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cancelled" in result.stdout
    for noise in ("never awaited", "shutting down", "Task was destroyed", "Traceback"):
        assert noise not in result.stderr, result.stderr[-3000:]


def test_the_first_ctrl_c_stops_a_sync_run_inside_asyncio_run() -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.stress.ctrl_c_in_asyncio_run"],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "reached"
        child.send_signal(signal.SIGINT)  # once
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert "cancelled" in out  # the run's work was cancelled, not abandoned
    assert "KeyboardInterrupt" in err
    assert child.returncode != 0
