"""`@tool`: turn a typed function or method into a tool, schema and validation by pydantic."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from agentensemble._calling import call_user_code
from agentensemble.models import ToolSpec
from agentensemble.tools._result import ToolResult, coerce_result, error_text

if TYPE_CHECKING:
    import pydantic

__all__ = ["FunctionTool", "tool"]


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
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description or inspect.getdoc(fn) or f"Call {self.name}."
        self.is_method = False
        """Set when the tool is defined in a class body (see `__set_name__`)."""
        self._bound_to: object = None
        self._is_async = inspect.iscoroutinefunction(fn)
        self._build_schema()

    def _build_schema(self) -> None:
        self._arguments_model = _arguments_model(self.fn, self.name, skip_first=self.is_method)
        self._spec = ToolSpec(self.name, self.description, _schema(self._arguments_model))

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
        """Name, description and JSON Schema of the arguments."""
        return self._spec

    async def invoke(self, arguments: str) -> ToolResult:
        """Validate `arguments` against the signature and call the function."""
        import pydantic

        try:
            validated = self._arguments_model.model_validate_json(arguments.strip() or "{}")
        except pydantic.ValidationError as error:
            return ToolResult.failure(
                f"Invalid arguments for tool '{self.name}': {_describe(error)}"
            )
        kwargs = {field: getattr(validated, field) for field in type(validated).model_fields}
        try:
            value = await call_user_code(self, is_async=self._is_async, **kwargs)
        except Exception as error:
            return ToolResult.failure(error_text(error))
        return coerce_result(value)


def _arguments_model(
    fn: Callable[..., Any], name: str, *, skip_first: bool
) -> type[pydantic.BaseModel]:
    import pydantic

    parameters = list(inspect.signature(fn).parameters.values())
    if skip_first and parameters:
        parameters = parameters[1:]
    hints = _type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    config = pydantic.ConfigDict(extra="ignore", arbitrary_types_allowed=True)
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


def _describe(error: pydantic.ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        parts.append(f"{location}: {item['msg']}" if location else item["msg"])
    return "; ".join(parts)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool of a sync or async function (or method).

    The JSON Schema comes from the type hints (any type pydantic understands; use
    ``Annotated[int, Field(description=...)]`` to describe a parameter), the description from
    the docstring. Arguments are validated before the call; validation errors and exceptions
    go back to the model as ``"Error: ..."`` text so it can correct itself.
    """

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(function, name=name, description=description)

    if fn is not None:
        return decorate(fn)
    return decorate
