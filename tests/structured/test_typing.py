"""A typed task gives typed outputs: mypy infers `parsed_output` from `output_type`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).parent.parent.parent


@pytest.mark.integration
def test_mypy_infers_the_parsed_output_type_from_the_task() -> None:
    checked = ROOT / "tests" / "typing_checks" / "generic_outputs.py"
    stdout, _, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(checked)])
    revealed = [
        re.sub(r"[\w.]*generic_outputs\.|builtins\.", "", found)
        for found in re.findall(r'Revealed type is "([^"]+)"', stdout)
    ]
    assert revealed == [
        "Report",  # output_for(Task[Report]).parsed_output
        "Report",  # .parsed(Report)
        "list[Report]",
        "None",  # a task without output_type has no parsed output
        "agentensemble.task.Task[Any]",  # a Literal output type: typed loosely, accepted
    ], stdout
    assert " error: " not in stdout, stdout
