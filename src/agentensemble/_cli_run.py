"""``agentensemble run`` and ``agentensemble validate``: an ensemble file from a shell.

stdout carries only the result (the final output, or ``--json``); progress, warnings and
errors go to stderr. Exit codes (DESIGN 3c): 0 completed, 1 the run failed, 2 bad input
(before any model call), 3 stopped early with partial output, 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from agentensemble.ensemble import Ensemble
    from agentensemble.options import RunOptions
    from agentensemble.outputs import EnsembleOutput, TaskOutput
    from agentensemble.review import ReviewDecision

__all__ = ["EXIT_BAD_INPUT", "add_run_commands", "run_command", "validate_command"]

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_STOPPED_EARLY = 3
EXIT_INTERRUPTED = 130


def add_run_commands(commands: Any) -> None:
    """The ``run`` and ``validate`` subcommands."""
    run = commands.add_parser("run", help="run an ensemble declared in a YAML file")
    _file_arguments(run)
    run.add_argument("--json", action="store_true", help="print the output as JSON")
    run.add_argument("--trace", metavar="DIR", help="write the run's trace to DIR")
    run.add_argument("--timeout", type=float, metavar="S", help="stop the run after S seconds")
    run.add_argument(
        "--dashboard", action="store_true", help="watch the run in the browser (needs [web])"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    run.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue a run the file's checkpoint recorded (its completed tasks are not run "
        "again)",
    )
    run.add_argument(
        "--decision",
        metavar="continue|exit|edit:TEXT",
        help="with --resume: the decision on the review a paused run waits for",
    )
    validate = commands.add_parser(
        "validate", help="check an ensemble file without running it (exit 0 or 2)"
    )
    _file_arguments(validate)


def _file_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", help="an ensemble YAML file, or a directory with agents.yaml and tasks.yaml"
    )
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a template input (repeatable); overrides the file's inputs",
    )
    parser.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="run every agent on this model (openai:gpt-4o-mini, ollama:llama3.2, or an "
        "import path package.module:model)",
    )


def validate_command(args: argparse.Namespace) -> int:
    """Check the file (every problem at once) and the inputs its templates need."""
    loaded = _load(args.file, args.input, model=args.model, for_validation=True)
    if isinstance(loaded, int):
        return loaded
    ensemble, inputs, _ = loaded
    missing = _missing_inputs(ensemble, inputs)
    tasks = len(ensemble.tasks) + sum(len(phase.tasks) for phase in ensemble.phases)
    note = f" (needs --input for: {', '.join(missing)})" if missing else ""
    for warning in ensemble._validated.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{args.file}: ok, {tasks} tasks{note}", file=sys.stderr)
    return EXIT_COMPLETED


def run_command(args: argparse.Namespace) -> int:
    """Run the file's ensemble and print its result."""
    from pathlib import Path

    from agentensemble.errors import ValidationError
    from agentensemble.options import RunOptions

    loaded = _load(
        args.file, args.input, model=args.model, for_validation=False, resuming=bool(args.resume)
    )
    if isinstance(loaded, int):
        return loaded
    ensemble, inputs, llm = loaded
    resume_with = None
    if ensemble.checkpoint_store is not None:
        resume_with = f"agentensemble run {args.file} --resume"
    completed = _CompletedOutputs()
    listeners: list[object] = [completed]
    if not args.quiet:
        from agentensemble.observability import ConsoleProgress

        listeners.append(ConsoleProgress())
    try:
        options = RunOptions(timeout=args.timeout, listeners=listeners, resume=args.resume)
        decision = _decision(args.decision)
    except ValidationError as error:
        message = str(error).replace("RunOptions timeout", "--timeout")
        return _bad_input(message.replace("RunOptions resume", "--resume"))
    if args.trace and Path(args.trace).exists() and not Path(args.trace).is_dir():
        return _bad_input(f"--trace must be a directory, got a file: {args.trace}")
    run = _run_file(args, inputs, options, llm, decision)
    return _execute(run, completed, as_json=args.json, resume_with=resume_with)


def _decision(text: str | None) -> ReviewDecision | None:
    """``--decision``: ``continue``, ``exit`` or ``edit:TEXT``."""
    from agentensemble.errors import ValidationError
    from agentensemble.review import ReviewDecision

    if text is None:
        return None
    word, _, rest = text.partition(":")
    if word.strip().lower() == "edit" and rest:
        return ReviewDecision.Edit(rest)
    if word.strip().lower() == "continue" and not rest:
        return ReviewDecision.Continue()
    if word.strip().lower() == "exit" and not rest:
        return ReviewDecision.ExitEarly()
    raise ValidationError(f"--decision must be continue, exit or edit:TEXT, got: {text!r}")


async def _run_file(
    args: argparse.Namespace,
    inputs: dict[str, str],
    options: RunOptions,
    llm: object,
    decision: ReviewDecision | None = None,
) -> EnsembleOutput:
    """The file's ensemble (its MCP servers connected), with the trace exporter and the
    dashboard the command asks for, run once."""
    from agentensemble.declarative import open_ensemble
    from agentensemble.ensemble import Ensemble

    async with contextlib.AsyncExitStack() as stack:
        ensemble = await stack.enter_async_context(
            open_ensemble(args.file, Ensemble._checked_from, llm=llm)
        )
        changes: dict[str, Any] = {}
        if args.trace:
            from agentensemble.observability import JsonTraceExporter

            changes["trace_exporter"] = JsonTraceExporter(args.trace)
        if args.dashboard:
            from agentensemble.web import WebDashboard

            web = await stack.enter_async_context(WebDashboard(port=0))
            print(f"Dashboard: {web.url}", file=sys.stderr)
            changes["web_dashboard"] = web
        if changes:
            ensemble = dataclasses.replace(ensemble, **changes)
        resumed_inputs = (inputs or None) if options.resume else inputs
        return await ensemble.arun(resumed_inputs, options, decision=decision)


def _execute(
    run: Coroutine[Any, Any, EnsembleOutput],
    completed: _CompletedOutputs,
    *,
    as_json: bool,
    resume_with: str | None = None,
) -> int:
    import asyncio

    from agentensemble.errors import AgentEnsembleError, PromptTemplateError, ValidationError

    try:
        output = asyncio.run(run)
    except KeyboardInterrupt:
        print("\nStopped by Ctrl-C.", file=sys.stderr)
        _print_partial(completed.outputs, as_json, reason="INTERRUPTED")
        return EXIT_INTERRUPTED
    except (ValidationError, PromptTemplateError, ImportError) as error:
        return _bad_input(str(error))
    except AgentEnsembleError as error:
        print(f"error: {error}", file=sys.stderr)
        run_id = getattr(error, "run_id", None)
        if resume_with and run_id:
            print(f"resume with: {resume_with} {run_id}", file=sys.stderr)
        done = getattr(error, "completed_outputs", ()) or completed.outputs
        _print_partial(done, as_json, reason="ERROR", error=str(error))
        return EXIT_FAILED
    _print_output(output, as_json)
    return _exit_code(output, resume_with)


def _load(
    file: str,
    raw_inputs: Sequence[str],
    *,
    model: str | None,
    for_validation: bool,
    resuming: bool = False,
) -> tuple[Ensemble, dict[str, str], object] | int:
    from agentensemble.declarative import load_ensemble, model_from_text, omit_mcp
    from agentensemble.ensemble import Ensemble
    from agentensemble.errors import AgentEnsembleError, EnsembleFileError

    inputs = _parse_inputs(raw_inputs)
    if isinstance(inputs, int):
        return inputs
    _importable_from(file)
    try:
        llm = model_from_text(model, field="--model") if model else None
    except AgentEnsembleError as error:
        text = str(error)
        return _bad_input(text if text.startswith("--model") else f"--model: {text}")
    try:
        ensemble = load_ensemble(
            file, Ensemble._checked_from, llm=llm, mcp=omit_mcp
        )  # nothing connects
    except EnsembleFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        count = len(error.problems)
        print(f"{count} problem{'s' if count != 1 else ''} in {file}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ImportError as error:
        return _bad_input(str(error))
    if not for_validation and not resuming:  # a resumed run takes its recorded inputs
        missing = _check_templates(ensemble, inputs)
        if missing is not None:
            return _bad_input(missing)
    return ensemble, inputs, llm


def _parse_inputs(raw: Sequence[str]) -> dict[str, str] | int:
    inputs: dict[str, str] = {}
    for item in raw:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            return _bad_input(f"--input must look like NAME=VALUE, got: {item!r}")
        inputs[name.strip()] = value
    return inputs


def _importable_from(file: str) -> None:
    """Import paths in the file resolve from the file's directory and the current one, as
    ``python -m`` resolves them from the current directory."""
    from pathlib import Path

    for directory in (str(Path(file).resolve().parent), str(Path.cwd())):
        if directory not in sys.path:
            sys.path.insert(0, directory)


def _missing_inputs(ensemble: Ensemble, inputs: dict[str, str]) -> list[str]:
    """The template inputs a run of `ensemble` needs and neither the file nor `inputs` give,
    found by the run's own resolution of task and agent texts."""
    from agentensemble.errors import PromptTemplateError, ValidationError
    from agentensemble.execution._planning import resolve_agents, resolve_texts

    given = {**cast("Mapping[str, str]", ensemble.inputs), **inputs}  # text since built
    shape = ensemble._validated
    tasks = shape.all_tasks  # every task a run resolves, loop bodies included
    agents = shape.templated_agents
    missing: dict[str, None] = {}
    for resolve in (lambda: resolve_texts(tasks, given), lambda: resolve_agents(agents, given)):
        try:
            resolve()
        except PromptTemplateError as error:
            missing.update(dict.fromkeys(error.missing_variables))
        except ValidationError:
            continue  # a text blank once filled in: the run says so, naming it
    return list(missing)


def _check_templates(ensemble: Ensemble, inputs: dict[str, str]) -> str | None:
    missing = _missing_inputs(ensemble, inputs)
    if not missing:
        return None
    flags = " ".join(f"--input {name}=..." for name in missing)
    return f"the file's tasks need inputs it does not set: {', '.join(missing)} (pass {flags})"


class _CompletedOutputs:
    """A listener keeping each completed task's output, for a run stopped by Ctrl-C."""

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def on_task_complete(self, event: Any) -> None:
        self.outputs.append(event)


def _print_output(output: EnsembleOutput, as_json: bool) -> None:
    if as_json:
        from agentensemble._output_json import output_json

        _print_json(output_json(output))
    else:
        print(output.raw)


def _print_partial(
    done: Sequence[TaskOutput[Any] | Any], as_json: bool, *, reason: str, error: str | None = None
) -> None:
    """What completed before the run stopped: each output (or `--json`: an object with
    them, the reason and the error)."""
    from agentensemble._output_json import partial_json

    if as_json:
        _print_json(partial_json(done, reason=reason, error=error))
        return
    for item in done:
        label = getattr(item, "name", None) or item.task_description
        print(f"== {label}\n{item.raw}\n")
    print(f"{len(done)} task{'s' if len(done) != 1 else ''} completed", file=sys.stderr)


def _print_json(data: object) -> None:
    import json

    print(json.dumps(data, indent=2, ensure_ascii=False))


def _exit_code(output: EnsembleOutput, resume_with: str | None = None) -> int:
    from agentensemble.enums import ExitReason

    if output.exit_reason is ExitReason.COMPLETED:
        return EXIT_COMPLETED
    print(
        f"Stopped early ({output.exit_reason.value}): {len(output.task_outputs)} tasks completed",
        file=sys.stderr,
    )
    pending = output.pending_review
    if pending is not None:
        print(
            f"Waiting for a review of task '{pending.task_description}':\n{pending.task_output}",
            file=sys.stderr,
        )
    if resume_with:
        decision = " --decision continue|exit|edit:TEXT" if pending is not None else ""
        print(f"resume with: {resume_with} {output.run_id}{decision}", file=sys.stderr)
    return EXIT_STOPPED_EARLY


def _bad_input(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
