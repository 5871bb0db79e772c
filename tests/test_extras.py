"""Optional dependencies: a missing extra names itself; a broken install reports itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentensemble._extras import require


def test_a_module_that_is_not_installed_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r'pip install "agentensemble\[tools\]"'):
        require("surely_not_installed_anywhere", "tools")


def test_an_installed_module_that_fails_to_import_reports_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "half_installed"
    package.mkdir()
    (package / "__init__.py").write_text("import a_dependency_it_lacks\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_dependency_it_lacks") as raised:
        require("half_installed", "tools")
    assert "agentensemble[tools]" not in str(raised.value)
    sys.modules.pop("half_installed", None)


def test_the_tools_extra_names_lxml_html_clean_itself() -> None:
    """Old pips do not read ``lxml[html_clean]`` inside trafilatura's requirements."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    tools = next(line for line in text.splitlines() if line.startswith("tools = "))
    assert "lxml_html_clean" in tools
