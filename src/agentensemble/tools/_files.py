"""`FileReadTool` (``file_read``) and `FileWriteTool` (``file_write``): text files inside one
sandbox directory (BEHAVIOUR 7.6, 7.7).

Every path the model gives is taken relative to the sandbox directory (an absolute path is
accepted when it lies inside it) and is checked twice: first as written, after removing
``.`` and ``..`` (``../x`` and ``a/../../x`` are refused: "Access denied: path is outside the
sandbox directory"), then with every symbolic link resolved, so that a link inside the
sandbox cannot lead outside it, whether it is a directory on the way, a directory followed by
``..``, or the file itself ("Access denied: path resolves outside the sandbox directory").
Files are read and written through their resolved path, as UTF-8 text.

A link swapped in by another process between the check and the access is not guarded
against: the sandbox keeps a model's mistakes inside the directory, it does not defend it
from other programs on the machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from agentensemble._calling import call_user_code
from agentensemble.errors import ValidationError
from agentensemble.review._model import Edit, ExitEarly
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import tool
from agentensemble.tools._result import ToolResult

__all__ = ["DEFAULT_MAX_READ_BYTES", "FileReadTool", "FileWriteTool"]

DEFAULT_MAX_READ_BYTES = 1_000_000
"""The largest file `FileReadTool` reads unless told otherwise (about a megabyte)."""

OUTSIDE = "Access denied: path is outside the sandbox directory"
RESOLVES_OUTSIDE = "Access denied: path resolves outside the sandbox directory"

_PathArgument = Annotated[
    str, Field(description="Path of the file, relative to the sandbox directory")
]


class PathRefused(Exception):
    """A path or file the tool will not touch; the message is shown to the model."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The directory a file tool may use, and the checks that keep paths inside it."""

    root: str
    """The directory as given, made absolute and normalised."""
    real_root: str
    """The directory with its symbolic links resolved."""

    @classmethod
    def of(cls, base_dir: object) -> Sandbox:
        """The sandbox of `base_dir`, which must be an existing directory."""
        try:
            path = os.fspath(base_dir)  # type: ignore[call-overload]
        except TypeError:
            path = None
        if not isinstance(path, str) or not path or not os.path.isdir(path):
            raise ValidationError(f"base_dir must be an existing directory: {base_dir}")
        return cls(os.path.abspath(path), os.path.realpath(path))

    def resolve(self, path: str, blank_message: str) -> str:
        """The real path `path` names inside the sandbox; raises `PathRefused` otherwise.

        Touches the file system (symbolic links are read): call it off the event loop.
        """
        if not path.strip():
            raise PathRefused(blank_message)
        if "\0" in path:
            raise PathRefused("Path must not contain NUL bytes")
        joined = os.path.join(self.root, path)
        normalised = os.path.normpath(joined)
        if not (_within(normalised, self.root) or _within(normalised, self.real_root)):
            raise PathRefused(OUTSIDE)
        if path.rstrip().endswith(("/", os.sep)):  # realpath would drop it, the OS would not
            raise PathRefused(f"Not a regular file: {path}")
        try:
            real = os.path.realpath(joined)  # `..` applies after the links before it
        except (OSError, ValueError) as error:
            raise PathRefused(f"Invalid path: {path} ({error})") from error
        if os.path.realpath(real) != real:  # a link loop stopped the resolution part-way
            raise PathRefused(f"Invalid path: {path} (a loop of symbolic links)")
        if not _within(real, self.real_root):
            raise PathRefused(RESOLVES_OUTSIDE)
        return real


def _within(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _failure(error: OSError, verb: str, path: str) -> ToolResult:
    return ToolResult.failure(f"Could not {verb} {path}: {error.strerror or error}")


class FileReadTool:
    """Give it to an agent (``tools=[FileReadTool(workdir)]``) so that it can read text files
    in `base_dir` and below, and nowhere else.

    Files larger than `max_bytes` are refused; bytes that are not UTF-8 are read as U+FFFD.
    Raises `ValidationError` when `base_dir` is not an existing directory.
    """

    def __init__(
        self, base_dir: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValidationError(f"FileReadTool max_bytes must be > 0, got: {max_bytes!r}")
        self.sandbox = Sandbox.of(base_dir)
        self.max_bytes = max_bytes

    @tool(name="file_read")
    def file_read(self, path: _PathArgument) -> ToolResult:
        """Read a UTF-8 text file from the sandbox directory and return its content."""
        try:
            real = self.sandbox.resolve(path, "File path must not be blank")
            return ToolResult.success(self._read(real, path))
        except PathRefused as error:
            return ToolResult.failure(str(error))
        except OSError as error:
            return _failure(error, "read", path)

    def _read(self, real: str, shown: str) -> str:
        try:
            info = os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            raise PathRefused(f"File not found: {shown}") from None
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"Not a regular file: {shown}")
        self._check_size(shown, info.st_size)
        with open(real, "rb") as handle:
            data = handle.read(self.max_bytes + 1)
            if len(data) > self.max_bytes:  # it grew since `stat`
                self._check_size(shown, os.fstat(handle.fileno()).st_size)
        return data.decode("utf-8", errors="replace")

    def _check_size(self, shown: str, size: int) -> None:
        if size > self.max_bytes:
            raise PathRefused(
                f"File too large: {shown} is {size} bytes; the limit is {self.max_bytes} bytes"
            )

    def __repr__(self) -> str:
        return f"FileReadTool({self.sandbox.root!r}, max_bytes={self.max_bytes})"


class FileWriteTool:
    """Give it to an agent (``tools=[FileWriteTool(workdir)]``) so that it can write text
    files in `base_dir` and below, and nowhere else.

    A write creates missing parent directories and replaces the whole file atomically: the
    text goes to a temporary file in the same directory, which then takes the file's place,
    so a failed write leaves the old content intact. With `require_approval` each write is
    first shown to the ensemble's review handler: it may allow it, edit the content, or
    refuse it (the model is told "File write rejected by reviewer: {path}"); a run without a
    review handler then fails with `ToolConfigurationError`. Raises `ValidationError` when
    `base_dir` is not an existing directory.
    """

    def __init__(self, base_dir: str | os.PathLike[str], *, require_approval: bool = False) -> None:
        if not isinstance(require_approval, bool):
            raise ValidationError(
                f"FileWriteTool require_approval must be True or False, got: {require_approval!r}"
            )
        self.sandbox = Sandbox.of(base_dir)
        self.require_approval = require_approval

    @tool(name="file_write")
    async def file_write(
        self,
        context: ToolContext,
        path: _PathArgument,
        content: Annotated[str, Field(description="The complete new content of the file")],
    ) -> ToolResult:
        """Write text to a file in the sandbox directory, creating missing parent
        directories. An existing file is replaced entirely."""
        try:
            real = await call_user_code(self._resolve, path, is_async=False)
            if self.require_approval:
                target = real.removeprefix(self.sandbox.real_root.rstrip(os.sep) + os.sep)
                decision = await context.request_approval(
                    f"Write to {target}:\n{content}", require_handler=True
                )
                if isinstance(decision, ExitEarly):
                    return ToolResult.failure(f"File write rejected by reviewer: {path}")
                if isinstance(decision, Edit):
                    content = decision.revised_output
            await call_user_code(self._write, path, content, is_async=False)
        except PathRefused as error:
            return ToolResult.failure(str(error))
        except OSError as error:
            return _failure(error, "write", path)
        return ToolResult.success(f"Successfully wrote to: {path}")

    def _resolve(self, path: str) -> str:
        return self.sandbox.resolve(path, "Path must not be blank")

    def _write(self, path: str, content: str) -> None:
        real = self._resolve(path)  # again: links may have changed during the approval
        parent = os.path.dirname(real)
        os.makedirs(parent, exist_ok=True)
        try:
            info = os.stat(real)
        except FileNotFoundError:
            mode = None
        else:
            if not stat.S_ISREG(info.st_mode):
                raise PathRefused(f"Not a regular file: {path}")
            if not os.access(real, os.W_OK):  # replacing needs only the directory's permission
                raise PathRefused(f"Permission denied: {path}")
            mode = stat.S_IMODE(info.st_mode)
        write_atomically(real, content.encode("utf-8", errors="replace"), mode)

    def __repr__(self) -> str:
        return f"FileWriteTool({self.sandbox.root!r}, require_approval={self.require_approval})"


def write_atomically(target: str, data: bytes, mode: int | None) -> None:
    """Replace `target` with `data`: written and synced to a temporary file beside it, which
    then takes its place. On failure the temporary file is removed and `target` is untouched.
    `mode` is the permission bits to keep (None: new file, the process umask applies)."""
    directory = os.path.dirname(target)
    temporary = os.path.join(directory, f".agentensemble-{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
