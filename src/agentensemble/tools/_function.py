"""`@tool`: turn a typed function or method into a tool, schema and validation by pydantic."""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, overload

from agentensemble._calling import call_user_code
from agentensemble._checks import describe_validation_error, require_seconds
from agentensemble.errors import ToolConfigurationError, ValidationError, describe_error
from agentensemble.models import ToolSpec
from agentensemble.tools._context import ToolContext
from agentensemble.tools._result import ToolResult, coerce_result

if TYPE_CHECKING:
    import pydantic

__all__ = ["FunctionTool", "check_tool_name", "tool"]

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_tool_name(name: object, what: str) -> str:
    """Providers accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; reject others early."""
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise ValidationError(
            f"{what} name must be 1-64 letters, digits, '_' or '-' (what model providers "
            f"accept), got: {name!r}"
        )
    return name


class FunctionTool:
    """A tool made from a Python function by `@tool`. Still callable as the function.

    Used on a method inside a class body, it becomes a descriptor: ``obj.method`` is a tool
    bound to ``obj``, and passing ``obj`` as a tool offers every ``@tool`` method it has.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: timedelta | float | None = None,
    ) -> None:
        if not callable(fn):
            raise ValidationError(f"@tool must decorate a function, got: {fn!r}")
        self.fn = fn
        self.name = check_tool_name(fn.__name__ if name is None else name, "Tool")
        self.description = description or inspect.getdoc(fn) or f"Call {self.name}."
        self.timeout: float | None = (
            None if timeout is None else require_seconds(timeout, f"Tool '{self.name}' timeout")
        )
        """Seconds one call may take before it fails (None: no limit)."""
        self.is_method = False
        """Set when the tool is defined in a class body (see `__set_name__`)."""
        self._bound_to: object = None
        self._is_async = inspect.iscoroutinefunction(fn)
        self._build_schema()

    def _build_schema(self) -> None:
        skip = 1 if self.is_method else 0
        self._wants_context = _takes_context(self.fn, skip)
        self._schema = _LazySchema(self.fn, self.name, self.description, skip + self._wants_context)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.is_method = True  # `self` is not a tool argument
        self._build_schema()

    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool:
        if instance is None or not self.is_method:
            return self
        bound = object.__new__(FunctionTool)
        bound.__dict__.update(self.__dict__)
        bound._bound_to = instance
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.is_method and self._bound_to is not None:
            return self.fn(self._bound_to, *args, **kwargs)
        return self.fn(*args, **kwargs)

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON Schema of the arguments (built by pydantic the first
        time they are asked for: declaring a tool does not import pydantic)."""
        return self._schema.spec()

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Validate `arguments` against the signature and call the function (with `context`
        first when its first parameter is annotated `ToolContext`)."""
        import pydantic

        if self._wants_context and context is None:
            raise TypeError(
                f"Tool '{self.name}' takes a ToolContext: call invoke(arguments, context)"
            )

        try:
            validated = self._schema.model().model_validate_json(arguments.strip() or "{}")
        except pydantic.ValidationError as error:
            return ToolResult.failure(
                f"Invalid arguments for tool '{self.name}': {describe_validation_error(error)}"
            )
        kwargs = validated.__dict__  # the fields (the signature's parameters), by name
        leading = (context,) if self._wants_context else ()
        try:
            value = await self._call(leading, kwargs)
        except ToolConfigurationError:
            raise
        except Exception as error:
            return ToolResult.failure(describe_error(error))
        return coerce_result(value)

    def _call(self, leading: tuple[object, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        """The call to await: an async function's own coroutine when no timeout bounds it
        (the common call, with no layer between), else the function in a worker thread or
        under its timeout."""
        if self.timeout is not None:
            return self._call_within_timeout(leading, kwargs)
        if self._is_async:
            return self(*leading, **kwargs)  # type: ignore[no-any-return]
        return call_user_code(self, *leading, is_async=False, **kwargs)

    async def _call_within_timeout(
        self, leading: tuple[object, ...], kwargs: dict[str, Any]
    ) -> Any:
        import asyncio

        try:
            async with asyncio.timeout(self.timeout) as deadline:
                return await call_user_code(self, *leading, is_async=self._is_async, **kwargs)
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own TimeoutError, not its deadline
            raise TimeoutError(
                f"Tool '{self.name}' timed out after {self.timeout:g}s (its @tool timeout)"
            ) from None


class _LazySchema:
    """A tool's arguments model and spec, built on first use and shared by the tool's bound
    copies (``obj.method`` makes a new one at each access)."""

    __slots__ = ("_description", "_fn", "_model", "_name", "_skip", "_spec")

    def __init__(self, fn: Callable[..., Any], name: str, description: str, skip: int) -> None:
        self._fn, self._name, self._description, self._skip = fn, name, description, skip
        self._model: type[pydantic.BaseModel] | None = None
        self._spec: ToolSpec | None = None

    def model(self) -> type[pydantic.BaseModel]:
        if self._model is None:
            self._model = _arguments_model(self._fn, self._name, skip=self._skip)
        return self._model

    def spec(self) -> ToolSpec:
        if self._spec is None:
            self._spec = ToolSpec(self._name, self._description, _schema(self.model()))
        return self._spec


def _takes_context(fn: Callable[..., Any], skip: int) -> bool:
    """Whether the first parameter after `skip` is annotated `ToolContext` (also as a string
    that cannot be resolved, e.g. imported only under TYPE_CHECKING)."""
    parameters = list(inspect.signature(fn).parameters.values())[skip:]
    if not parameters:
        return False
    first = parameters[0]
    if _type_hints(fn).get(first.name) is ToolContext:
        return True
    annotation = first.annotation
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "ToolContext"


def _arguments_model(fn: Callable[..., Any], name: str, *, skip: int) -> type[pydantic.BaseModel]:
    import pydantic

    parameters = list(inspect.signature(fn).parameters.values())[skip:]
    hints = _type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, Any)
        if annotation is ToolContext:  # a method's context, before `__set_name__` says so
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    config = pydantic.ConfigDict(extra="ignore", arbitrary_types_allowed=True)
    with warnings.catch_warnings():
        # An argument named like a BaseModel method (`json`, `copy`) shadows it: harmless,
        # arguments are read from the validated fields, but pydantic warns.
        warnings.filterwarnings("ignore", message="Field name", category=UserWarning)
        model: type[pydantic.BaseModel] = pydantic.create_model(
            f"{name}_arguments", __config__=config, **fields
        )
    return model


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return {}


def _schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: timedelta | float | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: timedelta | float | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool of a sync or async function (or method).

    The JSON Schema comes from the type hints (any type pydantic understands; use
    ``Annotated[int, Field(description=...)]`` to describe a parameter), the description from
    the docstring. Arguments are validated before the call; validation errors and exceptions
    go back to the model as ``"Error: ..."`` text so it can correct itself. A first parameter
    annotated `ToolContext` receives the run identity and is not part of the schema.
    `timeout` (seconds or a timedelta) fails a call that takes longer; a sync tool's thread
    then finishes in the background, unobserved.
    """

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(function, name=name, description=description, timeout=timeout)

    if fn is not None:
        return decorate(fn)
    return decorate
