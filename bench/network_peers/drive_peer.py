"""Drive a peer queue from its own venv: ``python drive_peer.py arq|taskiq TASK REQUESTS
IN_FLIGHT`` (``BENCH_REDIS_URL`` set); prints the `_drive.drive` figures as JSON."""

import asyncio
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _drive import drive


async def main(peer: str, task: str, requests: int, in_flight: int) -> None:
    app = importlib.import_module(f"{peer}_app")
    call, close = await app.client_call(task, os.environ["BENCH_REDIS_URL"])
    try:
        await drive(call, min(200, requests), in_flight)  # warm-up
        print(json.dumps(await drive(call, requests, in_flight)))
    finally:
        await close()


if __name__ == "__main__":
    peer, task, requests, in_flight = sys.argv[1:5]
    asyncio.run(main(peer, task, int(requests), int(in_flight)))
