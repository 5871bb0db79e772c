"""The durable Redis queue: worker fleets of 1, 2 and 4 processes against one Redis, and the
same driver against arq and taskiq-redis. Prints JSON.

    python bench/network.py [--requests 10000] [--rss-requests 100000] [--reclaims 10]
                            [--no-peers]

A `redis-server` (AOF on, ``appendfsync everysec``) on a free loopback port; fleets started
with ``agentensemble worker`` serving `bench/_network_app.py`; this process drives them
(`network_peers/_drive.py`). Per fleet size and model (``instant``, and ``slow``: 50 ms of
latency): throughput with 500 requests in flight; then end-to-end p50/p99 and pickup
(enqueue to start of work) p50/p99 with half as many requests in flight as the fleet has
slots (processes x concurrency), so that latency is the queue's, not a backlog's.

Then the reclaim time after a SIGKILL (a worker holding a request is killed; time until a
peer has claimed it), p99 over `--reclaims`; a worker process's RSS before and after
`--rss-requests` instant requests; and arq and taskiq-redis, each in a virtualenv of its
own (``.venv-bench-arq``, ``.venv-bench-taskiq``, made on first use), serving the same two
jobs with their default settings and 4 processes (their clients wait for results by
polling every 50 ms: neither announces a result).

Budgets (issue 24): pickup p99 <= 50 ms, reclaim p99 <= 3 s, >= 1,500 instant requests/s
with 4 workers, and >= 2x the better of arq and taskiq-redis.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "network_peers"
sys.path.insert(0, str(PEERS))

from _drive import drive, percentile  # noqa: E402

IN_FLIGHT = 500
CONCURRENCY = {"instant": 16, "slow": 64}
"""Requests per worker process at once: enough to keep an instant model busy, and to wait
on many 50 ms calls at a time."""
PEER_PACKAGES = {"arq": ["arq"], "taskiq": ["taskiq", "taskiq-redis"]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    import redis

    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=port)
        try:
            for _ in range(500):
                with contextlib.suppress(redis.ConnectionError):
                    if client.ping():
                        break
                time.sleep(0.01)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            client.close()
            process.terminate()
            process.wait()


def flush(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushall()


@contextlib.contextmanager
def fleet(kind: str, url: str, processes: int, concurrency: int) -> Iterator[list[Any]]:
    """Worker processes of `kind` (ours, arq or taskiq), killed (with their children) at
    the end: a drain is not what is measured."""
    env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_CONCURRENCY": str(concurrency)}
    if kind == "ours":
        commands = [[sys.executable, "-m", "agentensemble.cli", "worker", "_network_app:bench",
                     "--redis", url, "--processes", str(processes),
                     "--concurrency", str(concurrency)]]  # fmt: skip
        cwd = HERE
    elif kind == "arq":
        commands = [[str(venv("arq") / "bin" / "arq"), "arq_app.WorkerSettings"]] * processes
        cwd = PEERS
    else:
        taskiq = str(venv("taskiq") / "bin" / "taskiq")
        commands = [[taskiq, "worker", "taskiq_app:broker", "--workers", str(processes),
                     "--max-async-tasks", str(concurrency)]]  # fmt: skip
        cwd = PEERS
    started = [
        subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for command in commands
    ]
    try:
        yield started
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def venv(peer: str) -> Path:
    """The peer's own virtualenv, made on first use."""
    path = ROOT / f".venv-bench-{peer}"
    if not (path / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        uv = Path(sys.executable).parent / "uv"
        installer = [str(uv), "pip", "install", "--quiet", "--python", str(path / "bin" / "python")]
        subprocess.run([*installer, *PEER_PACKAGES[peer]], check=True)
    return path


# ---- our driver ----------------------------------------------------------------------------


async def drive_ours(
    url: str, task: str, requests: int, latency_in_flight: int | None = None
) -> dict[str, Any]:
    from agentensemble.network import NetworkClient, ResponseStatus, Transport

    async with Transport.redis("bench", url) as transport:
        client = NetworkClient(transport, caller="bench")

        async def call() -> float:
            request_id = await client.submit("bench", task, "{}")
            response = await transport.result(request_id, 120)
            assert response is not None, f"no response to {request_id}"
            assert response.status is ResponseStatus.COMPLETED, response
            return float(response.result or 0)

        await drive(call, min(200, requests), IN_FLIGHT)  # warm-up: the fleet is up
        figures = await drive(call, requests, IN_FLIGHT)
        if latency_in_flight:
            figures.update(latency(await drive(call, min(requests, 2000), latency_in_flight)))
        return figures


def latency(figures: dict[str, Any]) -> dict[str, Any]:
    """The latency figures of a run below the fleet's capacity."""
    return {
        "end_to_end_ms": figures["end_to_end_ms"],
        "pickup_ms": figures["pickup_ms"],
        "latency_in_flight": figures["in_flight"],
    }


def run_peer(peer: str, url: str, task: str, requests: int, in_flight: int) -> dict[str, Any]:
    python = venv(peer) / "bin" / "python"
    env = {**os.environ, "BENCH_REDIS_URL": url}
    command = [str(python), str(PEERS / "drive_peer.py"), peer, task, str(requests)]
    throughput = subprocess.run(
        [*command, str(IN_FLIGHT)],
        cwd=PEERS, env=env, capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    below_capacity = subprocess.run(
        [*command[:-1], str(min(requests, 2000)), str(in_flight)],
        cwd=PEERS, env=env, capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    figures = dict(json.loads(throughput.stdout.strip().splitlines()[-1]))
    figures.update(latency(json.loads(below_capacity.stdout.strip().splitlines()[-1])))
    return figures


# ---- reclaim and memory ----------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid and stat[0] != "Z":
                    found.append(int(entry.name))
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def pending_owners(client: Any) -> dict[str, str]:
    stream, group = "agentensemble:queue:bench:NORMAL", "agentensemble:group:bench"
    with contextlib.suppress(Exception):
        entries = client.xpending_range(stream, group, min="-", max="+", count=1000)
        return {entry["message_id"].decode(): entry["consumer"].decode() for entry in entries}
    return {}


async def reclaim_seconds(url: str, reclaims: int) -> list[float]:
    """Per round: submit a long request, SIGKILL the worker that took it, time until a peer
    owns it (polled every 5 ms)."""
    import redis

    from agentensemble.network import NetworkClient, Transport

    times = []
    with fleet("ours", url, 2, 4) as (parent,), redis.Redis.from_url(url) as client:
        async with Transport.redis("bench", url) as transport:
            await NetworkClient(transport).call("bench", "instant", "{}", timeout=60)
            for _ in range(reclaims):
                seen = set(pending_owners(client))
                await NetworkClient(transport).submit("bench", "hold", "{}")
                entry, owner = await _new_entry(client, seen)
                killed_at = time.perf_counter()
                os.kill(int(owner.split(":")[-2]), signal.SIGKILL)
                while pending_owners(client).get(entry, owner) == owner:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)  # polling Redis is the measurement
                times.append(time.perf_counter() - killed_at)
                await _wait_for_processes(parent.pid, 2)
    return times


async def _new_entry(client: Any, seen: set[str]) -> tuple[str, str]:
    while True:
        fresh = {k: v for k, v in pending_owners(client).items() if k not in seen}
        if fresh:
            return next(iter(fresh.items()))
        await asyncio.sleep(0.005)


async def _wait_for_processes(parent: int, count: int) -> None:
    while len(children_of(parent)) < count:  # noqa: ASYNC110 (a process table has no event)
        await asyncio.sleep(0.05)


async def memory(url: str, requests: int) -> dict[str, float]:
    with fleet("ours", url, 1, CONCURRENCY["instant"]) as (parent,):
        await drive_ours(url, "instant", 1000)
        (child,) = children_of(parent.pid)
        before = rss_mb(child)
        await drive_ours(url, "instant", requests)
        after = rss_mb(child)
    return {"requests": requests, "rss_mb_after_warmup": before, "rss_mb_after": after,
            "growth_mb": round(after - before, 1)}  # fmt: skip


# ---- the whole bench ----------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rss-requests", type=int, default=100_000)
    parser.add_argument("--reclaims", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"fleets": {}, "peers": {}}
    with redis_server() as url:
        for workers in map(int, args.workers.split(",")):
            for task in ("instant", "slow"):
                flush(url)
                slots = workers * CONCURRENCY[task]
                with fleet("ours", url, workers, CONCURRENCY[task]):
                    figures = asyncio.run(drive_ours(url, task, args.requests, slots // 2))
                results["fleets"][f"{workers} workers, {task}"] = figures
                print(f"{workers} workers, {task}: {figures}", file=sys.stderr)
        flush(url)
        reclaims = asyncio.run(reclaim_seconds(url, args.reclaims))
        results["reclaim_s"] = {"p50": round(percentile(reclaims, 0.5), 2),
                                "p99": round(percentile(reclaims, 0.99), 2),
                                "rounds": len(reclaims)}  # fmt: skip
        flush(url)
        results["memory"] = asyncio.run(memory(url, args.rss_requests))
        if not args.no_peers:
            for peer in ("arq", "taskiq"):
                flush(url)
                with fleet(peer, url, 4, CONCURRENCY["instant"]):
                    results["peers"][peer] = run_peer(
                        peer, url, "instant", args.requests, 4 * CONCURRENCY["instant"] // 2
                    )
                print(f"{peer}: {results['peers'][peer]}", file=sys.stderr)
    results["budgets"] = budgets(results)
    print(json.dumps(results, indent=2))


def budgets(results: dict[str, Any]) -> dict[str, Any]:
    fleets = results["fleets"]
    four = fleets.get("4 workers, instant", {}).get("throughput_per_s", 0.0)
    pickup = max(figures["pickup_ms"]["p99"] for figures in fleets.values())
    checks: dict[str, Any] = {
        "pickup_p99_ms<=50": {"value": pickup, "met": pickup <= 50},
        "reclaim_p99_s<=3": {
            "value": results["reclaim_s"]["p99"],
            "met": results["reclaim_s"]["p99"] <= 3,
        },
        "instant_4_workers_per_s>=1500": {"value": four, "met": four >= 1500},
    }
    if results["peers"]:
        best = max(peer["throughput_per_s"] for peer in results["peers"].values())
        ratio = round(four / best, 2)
        checks["vs_best_peer>=2x"] = {"value": ratio, "met": ratio >= 2}
    return checks


if __name__ == "__main__":
    main()
