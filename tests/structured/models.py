"""Output types shared by the structured-output tests."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel


class Report(BaseModel):
    title: str
    score: int
    tags: list[str]


class Address(BaseModel):
    city: str
    zip: str


class Language(BaseModel):
    name: str


class Person(BaseModel):
    name: str
    address: Address
    langs: list[Language]


class Author(BaseModel):
    name: str


class Sentiment(Enum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"


Mood = Literal["calm", "tense"]
