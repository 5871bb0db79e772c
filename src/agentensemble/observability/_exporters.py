"""Trace exporters: where a finished run's `ExecutionTrace` goes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    from agentensemble.observability._trace import ExecutionTrace

__all__ = ["JsonTraceExporter", "TraceExporter", "write_atomically"]


@runtime_checkable
class TraceExporter(Protocol):
    """Receives the trace of every run (successful or not). May be sync or async; a sync
    exporter runs in a worker thread. Errors are logged, never raised into the run."""

    def export(self, trace: ExecutionTrace) -> Awaitable[None] | None:
        """Store or send `trace`."""
        ...


class JsonTraceExporter:
    """Writes traces as pretty-printed JSON, atomically (never a partial file).

    A `path` ending in ``.json`` is one file, overwritten by each run; any other path is a
    directory (created when missing) holding one ``{ensemble_id}.json`` per run.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from pathlib import Path  # with the first JSON exporter

        self.path = Path(path)

    def __repr__(self) -> str:
        return f"JsonTraceExporter({str(self.path)!r})"

    def target(self, trace: ExecutionTrace) -> Path:
        """The file a trace is written to."""
        if self.path.suffix.lower() == ".json":
            return self.path
        return self.path / f"{trace.ensemble_id}.json"

    def export(self, trace: ExecutionTrace) -> None:
        """Write `trace` to its target file."""
        write_atomically(self.target(trace), trace.to_json())


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: readers see the old
    file or the whole new one, never part of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # with the first write: it loads shutil and more

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
