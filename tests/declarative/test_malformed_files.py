"""Malformed ensemble files: each gives its exact problems, every one with the file, line,
column and field, before any model call. Each `malformed/NAME.yaml` sits beside
`NAME.expected`, its problems one per line (``FILE`` standing for the file's path, ``DIR``
for its directory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentensemble import Ensemble, EnsembleFileError

MALFORMED = Path(__file__).parent / "malformed"
NAMES = sorted(path.stem for path in MALFORMED.glob("*.yaml"))


def test_there_are_thirty_or_more_malformed_files() -> None:
    assert len(NAMES) >= 30
    assert all((MALFORMED / f"{name}.expected").is_file() for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_malformed_file_names_each_problem_exactly(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTENSEMBLE_TEST_UNSET_KEY", raising=False)
    path = tmp_path / f"{name}.yaml"
    shutil.copy(MALFORMED / f"{name}.yaml", path)
    expected = (MALFORMED / f"{name}.expected").read_text(encoding="utf-8").splitlines()
    with pytest.raises(EnsembleFileError) as caught:
        Ensemble.from_yaml(path)
    problems = caught.value.problems
    shown = [
        str(item).replace(str(path), "FILE").replace(str(tmp_path), "DIR") for item in problems
    ]
    assert shown == expected
    assert str(caught.value) == "\n".join(map(str, problems))
    assert all(problem.file == str(path) and problem.line >= 1 for problem in problems)
