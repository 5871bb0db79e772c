"""The sandboxed file tools: file_read and file_write (BEHAVIOUR 7.6, 7.7)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentensemble import Agent, Ensemble, ScriptedModel, Task, TaskExecutionError, tool_call
from agentensemble.errors import ValidationError
from agentensemble.review import ReviewDecision, ReviewTiming
from agentensemble.tools import ToolContext, ToolResult
from agentensemble.tools._files import FileReadTool, FileWriteTool
from agentensemble.tools._resolve import tool_methods
from tests.review.helpers import Scripted, answering

OUTSIDE = "Access denied: path is outside the sandbox directory"
RESOLVES_OUTSIDE = "Access denied: path resolves outside the sandbox directory"

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A sandbox directory holding ``notes.txt`` and ``sub/inner.txt``, beside a directory
    ``outside`` holding ``secret.txt``."""
    root = tmp_path / "sandbox"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("inside notes")
    (root / "sub" / "inner.txt").write_text("inner text")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return root


def context() -> ToolContext:
    return ToolContext(run_id="r", task_id="t", agent_role="Clerk", task_description="Write")


def read(root: Path, path: str) -> ToolResult:
    result = FileReadTool(root).file_read(path)
    assert isinstance(result, ToolResult)
    return result


async def write(root: Path, path: str, content: str) -> ToolResult:
    result = await FileWriteTool(root).file_write(context(), path, content)
    assert isinstance(result, ToolResult)
    return result


def failure(result: ToolResult) -> str | None:
    assert not result.is_success, result
    return result.error_message


# --- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [FileReadTool, FileWriteTool])
def test_the_base_dir_must_be_an_existing_directory(tmp_path: Path, make: type) -> None:
    missing, a_file = tmp_path / "missing", tmp_path / "file.txt"
    a_file.write_text("x")
    for base in (missing, a_file, str(missing)):
        with pytest.raises(ValidationError) as raised:
            make(base)
        assert str(raised.value) == f"base_dir must be an existing directory: {base}"


@pytest.mark.parametrize("max_bytes", [0, -1, True, 1.5])
def test_the_read_limit_must_be_a_positive_integer(sandbox: Path, max_bytes: object) -> None:
    with pytest.raises(ValidationError, match="FileReadTool max_bytes must be > 0"):
        FileReadTool(sandbox, max_bytes=max_bytes)  # type: ignore[arg-type]


def test_the_tools_are_offered_with_their_names_and_arguments(sandbox: Path) -> None:
    (reader,) = tool_methods(FileReadTool(sandbox))
    (writer,) = tool_methods(FileWriteTool(sandbox))
    assert reader.spec.name == "file_read"
    assert reader.spec.parameters["required"] == ["path"]
    assert writer.spec.name == "file_write"
    assert writer.spec.parameters["required"] == ["path", "content"]
    assert "context" not in writer.spec.parameters["properties"]


# --- file_read ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "File path must not be blank"),
        ("   ", "File path must not be blank"),
        ("\t\n", "File path must not be blank"),
        ("a\0b.txt", "Path must not contain NUL bytes"),
        ("../outside/secret.txt", OUTSIDE),
        ("..", OUTSIDE),
        ("sub/../../outside/secret.txt", OUTSIDE),
        ("a/../../x", OUTSIDE),
        ("missing.txt", "File not found: missing.txt"),
        ("sub/missing.txt", "File not found: sub/missing.txt"),
        ("notes.txt/below", "File not found: notes.txt/below"),
        ("sub", "Not a regular file: sub"),
        (".", "Not a regular file: ."),
    ],
)
def test_read_failures(sandbox: Path, path: str, message: str) -> None:
    assert failure(read(sandbox, path)) == message


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("notes.txt", "inside notes"),
        ("sub/inner.txt", "inner text"),
        ("./sub/../notes.txt", "inside notes"),
        ("sub//inner.txt", "inner text"),
    ],
)
def test_read_returns_the_text(sandbox: Path, path: str, text: str) -> None:
    result = read(sandbox, path)
    assert result.is_success
    assert result.output == text


def test_absolute_paths_are_read_only_inside_the_sandbox(sandbox: Path) -> None:
    assert read(sandbox, str(sandbox / "notes.txt")).output == "inside notes"
    assert failure(read(sandbox, str(sandbox.parent / "outside" / "secret.txt"))) == OUTSIDE
    assert failure(read(sandbox, "/")) == OUTSIDE


def test_reads_are_capped(sandbox: Path) -> None:
    (sandbox / "ten.txt").write_text("0123456789")
    (sandbox / "eleven.txt").write_text("0123456789A")
    tool = FileReadTool(sandbox, max_bytes=10)
    assert tool.file_read("ten.txt").output == "0123456789"
    assert failure(tool.file_read("eleven.txt")) == (
        "File too large: eleven.txt is 11 bytes; the limit is 10 bytes"
    )


def test_undecodable_bytes_are_replaced(sandbox: Path) -> None:
    (sandbox / "mixed.bin").write_bytes(b"ok \xff\xfe end\r\n")
    assert read(sandbox, "mixed.bin").output == "ok \ufffd\ufffd end\r\n"


# --- symbolic links -------------------------------------------------------------------------


@needs_symlinks
def test_a_linked_directory_leading_outside_is_refused(sandbox: Path) -> None:
    (sandbox / "link").symlink_to(sandbox.parent / "outside", target_is_directory=True)
    assert failure(read(sandbox, "link/secret.txt")) == RESOLVES_OUTSIDE


@needs_symlinks
def test_dot_dot_inside_a_linked_directory_follows_the_link(sandbox: Path) -> None:
    nested = sandbox.parent / "outside" / "nested"
    nested.mkdir()
    (sandbox / "deep").symlink_to(nested, target_is_directory=True)
    (sandbox / "secret.txt").write_text("a decoy inside")  # what a lexical reading would open
    assert failure(read(sandbox, "deep/../secret.txt")) == RESOLVES_OUTSIDE


@needs_symlinks
async def test_a_link_as_the_file_itself_is_refused_for_reading_and_writing(
    sandbox: Path,
) -> None:
    secret = sandbox.parent / "outside" / "secret.txt"
    (sandbox / "passwd").symlink_to(secret)
    assert failure(read(sandbox, "passwd")) == RESOLVES_OUTSIDE
    assert failure(await write(sandbox, "passwd", "owned")) == RESOLVES_OUTSIDE
    assert secret.read_text() == "secret"


@needs_symlinks
async def test_a_dangling_link_to_outside_is_not_written_through(sandbox: Path) -> None:
    target = sandbox.parent / "outside" / "created.txt"
    (sandbox / "new.txt").symlink_to(target)
    assert failure(await write(sandbox, "new.txt", "escaped")) == RESOLVES_OUTSIDE
    assert not target.exists()


@needs_symlinks
async def test_links_that_stay_inside_are_followed(sandbox: Path) -> None:
    (sandbox / "alias.txt").symlink_to(sandbox / "notes.txt")
    (sandbox / "shortcut").symlink_to(sandbox / "sub", target_is_directory=True)
    assert read(sandbox, "alias.txt").output == "inside notes"
    assert read(sandbox, "shortcut/inner.txt").output == "inner text"
    assert (await write(sandbox, "alias.txt", "through the link")).is_success
    assert (sandbox / "alias.txt").is_symlink()
    assert (sandbox / "notes.txt").read_text() == "through the link"


@needs_symlinks
def test_a_linked_base_dir_accepts_both_spellings_of_absolute_paths(sandbox: Path) -> None:
    base = sandbox.parent / "base-link"
    base.symlink_to(sandbox, target_is_directory=True)
    assert read(base, "notes.txt").output == "inside notes"
    assert read(base, str(base / "notes.txt")).output == "inside notes"
    assert read(base, str(sandbox / "notes.txt")).output == "inside notes"
    assert failure(read(base, "../outside/secret.txt")) == OUTSIDE


# --- file_write -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "Path must not be blank"),
        ("  ", "Path must not be blank"),
        ("a\0b.txt", "Path must not contain NUL bytes"),
        ("../escape.txt", OUTSIDE),
        ("a/../../x", OUTSIDE),
        ("sub/../../escape.txt", OUTSIDE),
        ("sub", "Not a regular file: sub"),
        (".", "Not a regular file: ."),
    ],
)
async def test_write_failures(sandbox: Path, path: str, message: str) -> None:
    assert failure(await write(sandbox, path, "text")) == message
    assert not (sandbox.parent / "escape.txt").exists()
    assert not (sandbox.parent / "x").exists()


async def test_an_absolute_path_outside_is_refused(sandbox: Path) -> None:
    target = sandbox.parent / "outside" / "secret.txt"
    assert failure(await write(sandbox, str(target), "owned")) == OUTSIDE
    assert target.read_text() == "secret"


@pytest.mark.parametrize("path", ["new.txt", "a/b/c/new.txt", "notes.txt", "sub/../new.txt"])
async def test_write_creates_or_replaces_the_file(sandbox: Path, path: str) -> None:
    result = await write(sandbox, path, "line 1\nline 2 é\n")
    assert result.is_success
    assert result.output == f"Successfully wrote to: {path}"
    assert (sandbox / path).read_bytes() == "line 1\nline 2 é\n".encode()
    assert not [name for name in os.listdir((sandbox / path).parent) if name.endswith(".tmp")]


async def test_an_absolute_path_inside_is_written(sandbox: Path) -> None:
    target = sandbox / "sub" / "abs.txt"
    assert (await write(sandbox, str(target), "absolute")).output == (
        f"Successfully wrote to: {target}"
    )
    assert target.read_text() == "absolute"


async def test_a_parent_that_is_a_file_is_a_failure_for_the_model(sandbox: Path) -> None:
    message = failure(await write(sandbox, "notes.txt/child.txt", "x"))
    assert message is not None
    assert message.startswith("Could not write notes.txt/child.txt: ")


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
async def test_an_overwrite_keeps_the_permissions(sandbox: Path) -> None:
    (sandbox / "notes.txt").chmod(0o640)
    assert (await write(sandbox, "notes.txt", "new")).is_success
    assert stat.S_IMODE((sandbox / "notes.txt").stat().st_mode) == 0o640


async def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    assert failure(await write(sandbox, "notes.txt", "half")) == (
        "Could not write notes.txt: disk full"
    )
    assert (sandbox / "notes.txt").read_text() == "inside notes"
    assert sorted(os.listdir(sandbox)) == ["notes.txt", "sub"]


# --- approval -------------------------------------------------------------------------------


def writing_run(
    root: Path, *, handler: Scripted | None = None, require_approval: bool = True
) -> tuple[Ensemble, ScriptedModel]:
    model = ScriptedModel(
        [tool_call("file_write", path="out/report.md", content="# Draft"), "Written."]
    )
    tools = [FileWriteTool(root, require_approval=require_approval), FileReadTool(root)]
    agent = Agent("Writer", "Write reports", llm=model, tools=tools)
    return Ensemble(tasks=[Task("Write the report", agent=agent)], review_handler=handler), model


def seen_by_model(model: ScriptedModel) -> str:
    return model.requests[1].messages[-1].text or ""


def test_an_approved_write_happens(sandbox: Path) -> None:
    handler = answering(ReviewDecision.Continue())
    ensemble, model = writing_run(sandbox, handler=handler)
    assert ensemble.run().raw == "Written."
    assert (sandbox / "out" / "report.md").read_text() == "# Draft"
    assert seen_by_model(model) == "Successfully wrote to: out/report.md"
    (request,) = handler.requests
    assert request.task_output == "Write to out/report.md:\n# Draft"
    assert request.tool_name == "file_write"
    assert request.timing is ReviewTiming.DURING_EXECUTION


def test_an_edit_replaces_the_content(sandbox: Path) -> None:
    ensemble, model = writing_run(sandbox, handler=answering(ReviewDecision.Edit("# Final")))
    ensemble.run()
    assert (sandbox / "out" / "report.md").read_text() == "# Final"
    assert seen_by_model(model) == "Successfully wrote to: out/report.md"


def test_a_rejection_writes_nothing_and_tells_the_model(sandbox: Path) -> None:
    ensemble, model = writing_run(sandbox, handler=answering(ReviewDecision.ExitEarly()))
    assert ensemble.run().raw == "Written."
    assert not (sandbox / "out").exists()
    assert seen_by_model(model) == "Error: File write rejected by reviewer: out/report.md"


def test_approval_without_a_review_handler_fails_the_run(sandbox: Path) -> None:
    ensemble, model = writing_run(sandbox)
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    assert (
        "Tool 'file_write' requires approval but no ReviewHandler is configured on the "
        "ensemble. Add review_handler=ReviewHandler.console() to the Ensemble."
    ) in str(raised.value)
    assert len(model.requests) == 1  # not shown to the model
    assert not (sandbox / "out").exists()


def test_a_path_outside_is_refused_before_anyone_is_asked(sandbox: Path) -> None:
    handler = answering(ReviewDecision.Continue())
    model = ScriptedModel([tool_call("file_write", path="../x.txt", content="x"), "No."])
    agent = Agent(
        "Writer", "Write", llm=model, tools=[FileWriteTool(sandbox, require_approval=True)]
    )
    Ensemble(tasks=[Task("Write", agent=agent)], review_handler=handler).run()
    assert seen_by_model(model) == f"Error: {OUTSIDE}"
    assert handler.requests == []


def test_without_require_approval_no_handler_is_needed_and_the_model_sees_failures(
    sandbox: Path,
) -> None:
    model = ScriptedModel(
        [
            tool_call("file_write", path="a.txt", content="alpha"),
            tool_call("file_read", path="a.txt"),
            tool_call("file_read", path="../outside/secret.txt"),
            "Done.",
        ]
    )
    tools = [FileWriteTool(sandbox), FileReadTool(sandbox)]
    agent = Agent("Writer", "Write", llm=model, tools=tools)
    assert Ensemble(tasks=[Task("Write", agent=agent)]).run().raw == "Done."
    results = [request.messages[-1].text for request in model.requests[1:]]
    assert results == ["Successfully wrote to: a.txt", "alpha", f"Error: {OUTSIDE}"]


# --- found in review ---------------------------------------------------------------------


def test_a_symbolic_link_loop_cannot_hide_an_escape(sandbox: Path) -> None:
    (sandbox / "loop").symlink_to(sandbox / "loop")
    (sandbox / "out").symlink_to(sandbox.parent / "outside")
    assert failure(read(sandbox, "out/secret.txt")) == RESOLVES_OUTSIDE
    refused = failure(read(sandbox, "loop/../out/secret.txt"))
    # Python 3.13's resolve() no longer fails on the loop: the escape is refused all the same
    assert refused in {
        "Invalid path: loop/../out/secret.txt (a loop of symbolic links)",
        RESOLVES_OUTSIDE,
    }


async def test_a_write_through_a_link_loop_is_refused(sandbox: Path) -> None:
    (sandbox / "loop").symlink_to(sandbox / "loop")
    (sandbox / "out").symlink_to(sandbox.parent / "outside")
    result = await write(sandbox, "loop/../out/pwned.txt", "x")
    reason = failure(result) or ""
    assert "a loop of symbolic links" in reason or reason == RESOLVES_OUTSIDE  # 3.13: the latter
    assert not (sandbox.parent / "outside" / "pwned.txt").exists()


async def test_a_trailing_slash_never_names_a_file(sandbox: Path) -> None:
    assert failure(read(sandbox, "notes.txt/")) == "Not a regular file: notes.txt/"
    assert failure(await write(sandbox, "new/", "x")) == "Not a regular file: new/"
    assert not (sandbox / "new").exists()


async def test_a_file_the_process_may_not_write_is_not_replaced(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_access = os.access
    monkeypatch.setattr(  # as root every file is writable: simulate a read-only one
        os, "access", lambda path, mode: False if mode == os.W_OK else real_access(path, mode)
    )
    assert failure(await write(sandbox, "notes.txt", "x")) == "Permission denied: notes.txt"
    assert (sandbox / "notes.txt").read_text() == "inside notes"


async def test_long_multibyte_names_can_be_written(sandbox: Path) -> None:
    name = "📄" * 60 + ".txt"  # 244 bytes: a temporary name built from it would be too long
    assert (await write(sandbox, name, "fine")).is_success
    assert (sandbox / name).read_text() == "fine"


def test_require_approval_must_be_a_bool(sandbox: Path) -> None:
    with pytest.raises(ValidationError, match="require_approval must be True or False"):
        FileWriteTool(sandbox, require_approval="yes")  # type: ignore[arg-type]
