"""The ``agentensemble`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentensemble", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a small research-and-write ensemble")
    demo.add_argument(
        "--model",
        default=os.environ.get("AGENTENSEMBLE_MODEL"),
        help="'provider:model', e.g. openai:gpt-4o-mini or ollama:llama3.2 "
        "(default: $AGENTENSEMBLE_MODEL, else an offline simulated model)",
    )
    demo.add_argument("--topic", default="honeybees", help="what to research (default: honeybees)")
    demo.add_argument("-v", "--verbose", action="store_true", help="log each step")
    return parser


def _demo(args: argparse.Namespace) -> int:
    from agentensemble._demo import build_demo_ensemble, simulated_model
    from agentensemble.errors import AgentEnsembleError
    from agentensemble.models import resolve_model

    if args.model:
        try:
            llm = resolve_model(args.model, field="--model")
        except AgentEnsembleError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"Running on {args.model}.")
    else:
        print(
            "Running offline on a built-in simulated model "
            "(pass --model or set AGENTENSEMBLE_MODEL to use a real provider)."
        )
        llm = simulated_model()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        output = build_demo_ensemble(llm).run(inputs={"topic": args.topic})
    except AgentEnsembleError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for task_output in output.task_outputs:
        print(f"\n== {task_output.agent_role}: {task_output.task_description}\n")
        print(task_output.raw)
    metrics = output.metrics
    tokens = "unknown" if metrics.total_tokens < 0 else str(metrics.total_tokens)
    print(
        f"\n{len(output.task_outputs)} tasks, {output.total_tool_calls} tool calls, "
        f"{metrics.total_llm_call_count} model calls, {tokens} tokens, "
        f"{output.total_duration.total_seconds():.2f}s"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentensemble`` command."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # argparse rejects unknown commands before this


if __name__ == "__main__":
    raise SystemExit(main())
