"""A real `redis-server` on loopback, and fleets of `agentensemble worker` processes on it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis.asyncio as aioredis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
_READY_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """A `redis-server` process with AOF on, in its own directory and on its own port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        self._process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.directory),
                "--appendonly", "yes",
                "--save", "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self) -> None:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=1.0, socket_connect_timeout=1.0)
        deadline = time.monotonic() + _READY_TIMEOUT
        try:
            while True:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self._process.returncode}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise
                    # the socket refused at once: wait on the process a moment, not a sleep
                    try:
                        self._process.wait(timeout=0.02)
                    except subprocess.TimeoutExpired:
                        continue
        finally:
            client.close()

    def stop(self) -> None:
        """Shut the server down (``SHUTDOWN SAVE``) and wait for the process to end."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=20) as conn,
            contextlib.suppress(ConnectionResetError),
        ):
            conn.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n")
            while conn.recv(1024):  # the server closes the connection as it exits
                continue
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """``SHUTDOWN SAVE``, then start again on the same directory and port."""
        self.stop()
        self.start()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh Redis server for one test (skipped when redis-server is not installed,
    failed instead under CI=true)."""
    if not os.path.exists(REDIS_SERVER):
        reason = f"redis-server is not installed ({REDIS_SERVER} not found)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client of `redis_server`, to look at (and tamper with) what is in Redis."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of `redis_server`."""
    return redis_server.url


ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0
"""Seconds any wait of these tests may take before it fails (it returns as soon as the
thing waited for happens)."""


@dataclass
class Fleet:
    """Starts worker fleets (`agentensemble worker` parents) and stops them after the test."""

    url: str
    parents: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self,
        processes: int = 1,
        *options: str,
        target: str = "tests.network.fleet:ensemble",
        **environment: str,
    ) -> subprocess.Popen[bytes]:
        env = {**os.environ, "AGENTENSEMBLE_REDIS_URL": self.url, **environment}
        command = [
            sys.executable,
            "-m",
            "agentensemble.cli",
            "worker",
            target,
            "--redis",
            self.url,
            "--processes",
            str(processes),
            "--concurrency",
            "4",
            "--heartbeat-ttl",
            "1",
            *options,
        ]
        parent = subprocess.Popen(command, cwd=ROOT, env=env)
        self.parents.append(parent)
        return parent

    def stop_all(self) -> None:
        for parent in self.parents:
            if parent.poll() is None:
                parent.send_signal(signal.SIGTERM)
        for parent in self.parents:
            try:
                parent.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                parent.kill()
                parent.wait()


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    workers = Fleet(redis_server.url)
    try:
        yield workers
    finally:
        workers.stop_all()
