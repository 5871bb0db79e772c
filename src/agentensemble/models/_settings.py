"""`ModelSettings`: the request options of a model call, one frozen object merged field by field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from agentensemble._checks import require_int, require_seconds
from agentensemble.errors import ValidationError

__all__ = ["ModelSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Options for a model request. Every field left None is the model's own default.

    Set them on an `Agent` or a `Task` (``model_settings=``); the task's win field by field,
    and ``extra`` entries are merged. An adapter that cannot honour a setting ignores it.
    """

    temperature: float | None = None
    """Sampling temperature."""
    max_tokens: int | None = None
    """Most tokens the model may generate in one answer."""
    timeout: timedelta | float | None = None
    """Deadline of one model call (a timedelta, or seconds); see `timeout_seconds`."""
    output_schema: Mapping[str, Any] | None = None
    """A JSON Schema the answer must match (native structured output, where supported)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through as they are (OpenAI: the request body)."""

    def __post_init__(self) -> None:
        if self.temperature is not None:
            _require_number(self.temperature, "temperature", minimum=0.0)
        if self.max_tokens is not None:
            require_int(self.max_tokens, "ModelSettings max_tokens")
            if self.max_tokens <= 0:
                raise ValidationError(
                    f"ModelSettings max_tokens must be > 0, got: {self.max_tokens}"
                )
        if self.timeout is not None:
            require_seconds(self.timeout, "ModelSettings timeout")
        if self.output_schema is not None and not isinstance(self.output_schema, Mapping):
            raise ValidationError(
                "ModelSettings output_schema must be a JSON Schema mapping, got: "
                f"{self.output_schema!r}"
            )
        if not isinstance(self.extra, Mapping):
            raise ValidationError(f"ModelSettings extra must be a mapping, got: {self.extra!r}")
        object.__setattr__(self, "extra", dict(self.extra))  # our own copy

    @property
    def timeout_seconds(self) -> float | None:
        """`timeout` in seconds (None when unset)."""
        return None if self.timeout is None else require_seconds(self.timeout, "timeout")

    def merged_with(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field `override` sets replacing ours (``extra`` merged)."""
        if override is None:
            return self
        merged: dict[str, Any] = {
            item.name: _pick(getattr(override, item.name), getattr(self, item.name))
            for item in fields(self)
            if item.name != "extra"
        }
        return ModelSettings(**merged, extra={**self.extra, **override.extra})


def _pick(override: object, base: object) -> object:
    return base if override is None else override


def merge_settings(*layers: ModelSettings | None) -> ModelSettings | None:
    """Merge settings from the most general to the most specific; None when none is set."""
    result: ModelSettings | None = None
    for layer in layers:
        if layer is not None:
            result = layer if result is None else result.merged_with(layer)
    return result


def check_settings(value: object, owner: str) -> ModelSettings | None:
    """`value` if it is ModelSettings or None; otherwise a ValidationError naming `owner`."""
    if value is None or isinstance(value, ModelSettings):
        return value
    raise ValidationError(f"{owner} model_settings must be a ModelSettings, got: {value!r}")


def _require_number(value: object, name: str, *, minimum: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"ModelSettings {name} must be a number, got: {value!r}")
    if minimum is not None and value < minimum:
        raise ValidationError(f"ModelSettings {name} must be >= {minimum:g}, got: {value}")
    return float(value)
