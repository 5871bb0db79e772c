"""Constructors that say what a keyword from CrewAI (or a misspelt one) is called here."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentensemble.errors import UnknownKeywordError

__all__ = ["KeywordHints"]

_FROM_CREWAI: Mapping[str, Mapping[str, str]] = {
    "Task": {
        "output_pydantic": "output_type=YourModel",
        "output_json": "output_type=YourModel (or a dict type)",
        "human_input": "review=Review.required() (and a review_handler on the Ensemble)",
        "async_execution": "Ensemble(workflow=Workflow.PARALLEL), which runs tasks as a DAG",
        "callback": "on_task_complete= or listeners= on the Ensemble",
        "output_file": "JsonTraceExporter, or a handler that writes the file",
    },
    "Agent": {
        "max_iter": "max_iterations",
        "max_rpm": "rate_limit=RateLimit.per_minute(n)",
        "step_callback": "listeners= on the Ensemble",
        "memory": "memory= scopes on the Task, and memory_store= on the Ensemble",
        "function_calling_llm": "llm",
    },
    "Ensemble": {
        "process": "workflow (Workflow.SEQUENTIAL, PARALLEL or HIERARCHICAL)",
        "memory": "memory_store=MemoryStore.sqlite(path) (and memory= scopes on tasks)",
        "max_rpm": "rate_limit=RateLimit.per_minute(n)",
        "step_callback": "listeners=",
        "task_callback": "on_task_complete=",
        "planning": "a manager: Ensemble(workflow=Workflow.HIERARCHICAL)",
        "output_log_file": "trace_exporter=JsonTraceExporter(directory)",
    },
}

_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")


class KeywordHints(type):
    """A metaclass: an unknown keyword given to the constructor is an `UnknownKeywordError`
    naming this library's field (for CrewAI's names) or the closest field, instead of
    Python's bare ``TypeError``. Runtime only: type checkers, ``help()`` and IDEs still see
    the constructor's real signature."""

    if not TYPE_CHECKING:

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().__call__(*args, **kwargs)
            except TypeError as error:
                found = _UNEXPECTED.search(str(error))
                if found is None or found.group(1) not in kwargs:
                    raise
                raise UnknownKeywordError(_hint(cls, found.group(1))) from None

        @property
        def __signature__(cls) -> inspect.Signature:
            """The constructor's signature (not this metaclass's ``__call__``)."""
            signature = inspect.signature(_init_of(cls))
            return signature.replace(parameters=list(signature.parameters.values())[1:])


def _init_of(cls: type) -> Any:
    return next(klass.__dict__["__init__"] for klass in cls.__mro__ if "__init__" in klass.__dict__)


def _hint(cls: type, keyword: str) -> str:
    fields = [
        name
        for name, parameter in inspect.signature(_init_of(cls)).parameters.items()
        if name != "self" and parameter.kind is not parameter.VAR_KEYWORD
    ]
    translated = _FROM_CREWAI.get(cls.__name__, {}).get(keyword)
    if translated is not None:
        advice = f"CrewAI's {keyword!r} is {translated} here"
    else:
        import difflib  # with the first misspelt keyword

        close = difflib.get_close_matches(keyword, fields, n=1)
        advice = f"did you mean {close[0]!r}?" if close else "it is not a field"
    return f"{cls.__name__} has no field {keyword!r}: {advice} (fields: {', '.join(fields)})"
