"""``agentensemble worker``: a fleet of processes serving one ensemble from Redis.

The parent loads the ensemble once (bad input exits 2 before any process starts), then
keeps `--processes` children serving it: a child that dies is started again (after a short
pause when children keep dying at once), a child that took `--max-requests` requests exits
and is replaced, and SIGTERM or Ctrl-C is forwarded to every child, which drains (finishes
its requests in flight within the ensemble's ``drain_timeout``, hands the rest to its
peers), after which the parent exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentensemble.ensemble import Ensemble

__all__ = ["add_worker_command", "worker_command"]

_EXIT_BAD_INPUT = 2
_QUICK_DEATH = 10.0
"""A child that exits with an error sooner than this many seconds after starting is
restarted after a pause that doubles each time (up to `_MAX_PAUSE`), so a broken setup
does not spin."""
_MAX_PAUSE = 10.0
_GIVE_UP_AFTER = 5
"""Children dying quickly one after the other that make the parent stop (exit 1): a setup
that fails in every process (Redis refusing the password, say) is not retried forever."""


def add_worker_command(commands: Any) -> None:
    """The ``worker`` subcommand."""
    worker = commands.add_parser(
        "worker", help="serve an ensemble's shared tasks and tools from a Redis queue"
    )
    worker.add_argument(
        "target",
        help="MODULE:ATTRIBUTE naming an Ensemble (or a function returning one), or an "
        "ensemble YAML file with shared_tasks or shared_tools",
    )
    worker.add_argument(
        "--redis",
        default=os.environ.get("AGENTENSEMBLE_REDIS_URL", "redis://127.0.0.1:6379/0"),
        help="Redis URL (default: $AGENTENSEMBLE_REDIS_URL, else redis://127.0.0.1:6379/0)",
    )
    worker.add_argument("--name", help="the queue to serve (default: the ensemble's name)")
    worker.add_argument(
        "--concurrency", type=int, default=8, help="requests per process at once (default 8)"
    )
    worker.add_argument("--processes", type=int, default=1, help="worker processes (default 1)")
    worker.add_argument(
        "--max-requests",
        type=int,
        metavar="N",
        help="replace a process after it took N requests (bounds slow leaks)",
    )
    worker.add_argument(
        "--heartbeat-ttl",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds without a heartbeat after which a process's requests go to its peers "
        "(default 3)",
    )
    worker.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def worker_command(args: argparse.Namespace) -> int:
    """Load the ensemble, then serve it: as one child process (``--child``) or as the
    parent of ``--processes`` children."""
    problem = _bad_numbers(args) or _bad_redis_url(args.redis)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return _EXIT_BAD_INPUT
    try:
        ensemble = load_ensemble(args.target)
    except Exception as error:
        print(f"error: cannot load {args.target}: {error}", file=sys.stderr)
        return _EXIT_BAD_INPUT
    name: str = args.name or ensemble.name or ""
    problem = _cannot_serve(ensemble, name)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return _EXIT_BAD_INPUT
    if args.child:
        return asyncio.run(_serve_child(ensemble, name, args))
    return _Supervisor(args, name).run()


def _bad_redis_url(url: str) -> str | None:
    """Why `url` cannot be used (the ``redis`` extra missing, or not a Redis URL)."""
    from agentensemble._extras import require

    try:
        connection = require("redis.asyncio.connection", "redis")
        connection.parse_url(url)
    except (ImportError, ValueError) as error:
        return f"--redis {shown_url(url)}: {error}"
    return None


def _cannot_serve(ensemble: Ensemble, name: str) -> str | None:
    """What stops `ensemble` from serving (checked before any process starts)."""
    from agentensemble.errors import ValidationError
    from agentensemble.network._shared import SharedWork

    if not name:
        return "the ensemble has no name: pass --name"
    if not ensemble.shared_tasks and not ensemble.shared_tools:
        return "the ensemble shares nothing: give it shared_tasks or shared_tools"
    try:
        SharedWork(ensemble)  # checks each shared task as its requests' runs will
    except ValidationError as error:
        return str(error)
    return None


def shown_url(url: str) -> str:
    """`url` with its password hidden."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.password:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _bad_numbers(args: argparse.Namespace) -> str | None:
    for option, value in (
        ("--concurrency", args.concurrency),
        ("--processes", args.processes),
        ("--max-requests", args.max_requests),
    ):
        if value is not None and value < 1:
            return f"{option} must be >= 1, got: {value}"
    if not math.isfinite(args.heartbeat_ttl) or args.heartbeat_ttl <= 0:
        return f"--heartbeat-ttl must be a number of seconds > 0, got: {args.heartbeat_ttl}"
    return None


def load_ensemble(target: str) -> Ensemble:
    """The `Ensemble` that ``MODULE:ATTRIBUTE`` names (calling it when it is a function),
    or that a YAML file (or a directory of them) declares."""
    from agentensemble.ensemble import Ensemble

    if target.endswith((".yaml", ".yml")) or os.path.isdir(target):
        return Ensemble.from_yaml(target)
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got: {target!r}")
    sys.path.insert(0, os.getcwd())
    value = getattr(importlib.import_module(module_name), attribute)
    if callable(value) and not isinstance(value, Ensemble):
        value = value()
    if not isinstance(value, Ensemble):
        raise TypeError(f"{target} is not an Ensemble, got: {value!r}")
    return value


async def _serve_child(ensemble: Ensemble, name: str, args: argparse.Namespace) -> int:
    from agentensemble.network import EnsembleServer, Transport

    transport = Transport.redis(
        name, args.redis, heartbeat_ttl=timedelta(seconds=args.heartbeat_ttl)
    )
    async with transport:
        server = EnsembleServer(
            ensemble, transport, concurrency=args.concurrency, max_requests=args.max_requests
        )
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, server.drain)  # SIGTERM: serve() drains
        await server.serve()
    return 0


class _Supervisor:
    """Keeps `processes` children serving until told to stop."""

    def __init__(self, args: argparse.Namespace, name: str) -> None:
        self.args = args
        self.name = name
        self.children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        self.stopping = False
        self.pause = 0.0
        self.quick_deaths = 0
        self.failed = False

    def run(self) -> int:
        previous = {
            number: signal.signal(number, self._stop) for number in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            for _ in range(self.args.processes):
                self._start_child()
            print(
                f"Serving '{self.name}' from {shown_url(self.args.redis)} with "
                f"{self.args.processes} process(es) (SIGTERM or Ctrl-C drains and stops)",
                file=sys.stderr,
            )
            self._supervise()
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        return 1 if self.failed else 0

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        for pid in self.children:  # only _supervise reaps them, so each pid is still ours
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue

    def _supervise(self) -> None:
        while self.children:
            try:
                pid, status = os.wait()  # a signal runs _stop and the wait goes on
            except ChildProcessError:  # nothing left to wait for
                return
            child, started = self.children.pop(pid, (None, 0.0))
            if child is None:
                continue
            child.returncode = os.waitstatus_to_exitcode(status)
            if not self.stopping:
                self._replace(child, time.monotonic() - started)

    def _replace(self, child: subprocess.Popen[bytes], lived: float) -> None:
        if child.returncode != 0:
            print(
                f"Worker process {child.pid} ended with {child.returncode}; starting another",
                file=sys.stderr,
            )
        # an error of its own soon after starting (a kill by a signal is not its fault)
        quick = lived < _QUICK_DEATH and child.returncode > 0
        self.quick_deaths = self.quick_deaths + 1 if quick else 0
        if self.quick_deaths >= _GIVE_UP_AFTER:
            print(
                f"error: {self.quick_deaths} worker processes in a row died at once; stopping",
                file=sys.stderr,
            )
            self.failed = True
            self._stop(signal.SIGTERM, None)
            return
        self.pause = min(max(self.pause * 2, 0.1), _MAX_PAUSE) if quick else 0.0
        if self.pause:
            time.sleep(self.pause)
        if not self.stopping:
            self._start_child()

    def _start_child(self) -> None:
        command = [sys.executable, "-m", "agentensemble.cli", "worker", *self._child_arguments()]
        # the URL (it may hold a password) goes by the environment, not the command line
        env = {**os.environ, "AGENTENSEMBLE_REDIS_URL": self.args.redis}
        child = subprocess.Popen(command, env=env)
        self.children[child.pid] = (child, time.monotonic())
        if self.stopping:  # told to stop while this one started
            os.kill(child.pid, signal.SIGTERM)

    def _child_arguments(self) -> list[str]:
        args = self.args
        arguments = [
            args.target,
            "--child",
            "--name",
            self.name,
            "--concurrency",
            str(args.concurrency),
            "--heartbeat-ttl",
            str(args.heartbeat_ttl),
        ]
        if args.max_requests:
            arguments += ["--max-requests", str(args.max_requests)]
        return arguments
