"""The ``agentensemble`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentensemble.observability import ExecutionTrace

__all__ = ["main"]


_DESCRIPTION = (
    "Orchestrate teams of LLM agents: run ensembles declared in YAML, start a project, "
    "serve an ensemble from a Redis queue, read saved execution traces."
)


def _parser() -> argparse.ArgumentParser:
    from agentensemble._cli_run import add_run_commands
    from agentensemble._cli_worker import add_worker_command
    from agentensemble._scaffold import add_new_command
    from agentensemble._version import __version__

    parser = argparse.ArgumentParser(prog="agentensemble", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"agentensemble {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_run_commands(commands)
    add_new_command(commands)
    add_worker_command(commands)
    commands.add_parser("schema", help="print the JSON Schema of ensemble files")
    demo = commands.add_parser("demo", help="run a small research-and-write ensemble")
    demo.add_argument(
        "--model",
        default=os.environ.get("AGENTENSEMBLE_MODEL"),
        help="'provider:model', e.g. openai:gpt-4o-mini or ollama:llama3.2 "
        "(default: $AGENTENSEMBLE_MODEL, else an offline simulated model)",
    )
    demo.add_argument("--topic", default="honeybees", help="what to research (default: honeybees)")
    demo.add_argument("-v", "--verbose", action="store_true", help="log each step")
    demo.add_argument("--trace", metavar="DIR", help="write the run's trace to DIR")
    trace = commands.add_parser("trace", help="work with saved execution traces")
    trace_commands = trace.add_subparsers(dest="trace_command", required=True)
    show = trace_commands.add_parser("show", help="print a readable summary of a trace file")
    show.add_argument("file", help="a trace written by JsonTraceExporter")
    export = trace_commands.add_parser(
        "export", help="print a trace as JSON (upgraded to this version's schema) or events"
    )
    export.add_argument("file", help="a trace written by JsonTraceExporter")
    export.add_argument(
        "--format",
        choices=("json", "events"),
        default="json",
        help="json: the whole trace; events: its event stream, one JSON object per line",
    )
    dashboard = commands.add_parser(
        "dashboard", help="serve the live dashboard's page over a saved trace"
    )
    dashboard.add_argument("file", help="a trace written by JsonTraceExporter")
    dashboard.add_argument("--port", type=int, default=7329, help="port (default 7329; 0: any)")
    dashboard.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    dashboard.add_argument(
        "--token",
        default=os.environ.get("AGENTENSEMBLE_DASHBOARD_TOKEN"),
        help="required off loopback: pages and API calls must carry it "
        "(default: $AGENTENSEMBLE_DASHBOARD_TOKEN)",
    )
    return parser


def _demo(args: argparse.Namespace) -> int:
    from agentensemble._demo import build_demo_ensemble, simulated_model
    from agentensemble.errors import AgentEnsembleError
    from agentensemble.models import resolve_model
    from agentensemble.observability import ConsoleProgress, JsonTraceExporter
    from agentensemble.observability._console import plural

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
    exporter = JsonTraceExporter(args.trace) if args.trace else None
    ensemble = build_demo_ensemble(llm, listeners=[ConsoleProgress()], trace_exporter=exporter)
    try:
        output = ensemble.run(inputs={"topic": args.topic})
    except AgentEnsembleError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for task_output in output.task_outputs:
        print(f"\n== {task_output.agent_role}: {task_output.task_description}\n")
        print(task_output.raw)
    metrics = output.metrics
    tokens = "unknown" if metrics.total_tokens < 0 else str(metrics.total_tokens)
    print(
        f"\n{plural(len(output.task_outputs), 'task')}, "
        f"{plural(output.total_tool_calls, 'tool call')}, "
        f"{plural(metrics.total_llm_call_count, 'model call')}, {tokens} tokens, "
        f"{output.total_duration.total_seconds():.2f}s"
    )
    return 0


def _trace(args: argparse.Namespace) -> int:
    import json

    trace = _read_trace(args.file)
    if trace is None:
        return 2
    if args.trace_command == "show":
        from agentensemble.observability import summarize_trace

        print(summarize_trace(trace))
    elif args.format == "json":
        print(trace.to_json())
    else:
        from agentensemble.observability import serialize_event
        from agentensemble.observability._trace_events import trace_events

        for event in trace_events(trace):
            print(json.dumps(serialize_event(event), ensure_ascii=False))
    return 0


def _schema(_: argparse.Namespace) -> int:
    import json

    from agentensemble.declarative import ensemble_file_schema

    print(json.dumps(ensemble_file_schema(), indent=2))
    return 0


def _read_trace(path: str) -> ExecutionTrace | None:
    """The trace in `path`, or None after saying on stderr why it cannot be read."""
    import pydantic

    from agentensemble.observability import load_trace

    try:
        return load_trace(path)
    except OSError as error:
        print(f"error: cannot read {path}: {error.strerror or error}", file=sys.stderr)
    except (pydantic.ValidationError, ValueError) as error:
        print(
            f"error: {path} is not an agentensemble trace ({_first_problem(error)})",
            file=sys.stderr,
        )
    return None


def _dashboard(args: argparse.Namespace) -> int:
    """Serve a saved trace's page until Ctrl-C (exit 130) or SIGTERM."""
    import signal
    import threading

    from agentensemble.errors import ValidationError
    from agentensemble.web import WebDashboard

    trace = _read_trace(args.file)
    if trace is None:
        return 2
    try:
        dashboard = WebDashboard.for_trace(trace, port=args.port, host=args.host, token=args.token)
        dashboard.start()
    except (ValidationError, OSError) as error:
        print(f"error: cannot serve the dashboard: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"Dashboard of {args.file} at {dashboard.url} (Ctrl-C stops it)", file=sys.stderr)
    try:
        stop.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        dashboard.stop()
    return 0


def _first_problem(error: Exception) -> str:
    import pydantic

    if isinstance(error, pydantic.ValidationError):
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = error.error_count() - 1
        return f"{where}: {first['msg']}" + (f", and {more} more problems" if more else "")
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentensemble`` command."""
    from agentensemble._cli_run import run_command, validate_command
    from agentensemble._cli_worker import worker_command
    from agentensemble._scaffold import new_command

    args = _parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": run_command,
        "validate": validate_command,
        "new": new_command,
        "schema": _schema,
        "trace": _trace,
        "dashboard": _dashboard,
        "demo": _demo,
        "worker": worker_command,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
