"""Every Python block in README.md and docs/, and every script in examples/, runs."""

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def python_blocks() -> list[tuple[str, str]]:
    blocks = []
    for document in DOCUMENTS:
        for index, code in enumerate(BLOCK.findall(document.read_text())):
            blocks.append((f"{document.name}[{index}]", code))
    return blocks


@pytest.mark.parametrize(("name", "code"), python_blocks(), ids=[n for n, _ in python_blocks()])
def test_documentation_block_runs(name: str, code: str) -> None:
    namespace = {"__name__": "__doc_example__"}
    exec(compile(code, name, "exec"), namespace)  # the blocks' own asserts run here
    defined = set(namespace) - {"__name__", "__builtins__"}
    assert defined, f"{name} defined nothing: is it a real example?"


def test_every_document_has_examples() -> None:
    for document in DOCUMENTS:
        assert BLOCK.search(document.read_text()), document.name


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_example_runs(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()
