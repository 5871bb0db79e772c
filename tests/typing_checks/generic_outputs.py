"""Checked by mypy in tests/structured/test_typing.py: what a checker infers for typed tasks.
Never imported or run; the `reveal_type` lines are what the test reads."""

from typing import Literal, reveal_type

from pydantic import BaseModel

from agentensemble import Ensemble, Task


class Report(BaseModel):
    title: str


report = Task("Write the report", output_type=Report)
reports = Task("Write the reports", output_type=list[Report])
plain = Task("Say hello")
mood = Task("Pick a mood", output_type=Literal["calm", "tense"])

output = Ensemble(tasks=[report, reports, plain, mood]).run()
first = output.output_for(report)
assert first is not None
reveal_type(first.parsed_output)
reveal_type(first.parsed(Report))
many = output.output_for(reports)
assert many is not None
reveal_type(many.parsed_output)
text = output.output_for(plain)
assert text is not None
reveal_type(text.parsed_output)
reveal_type(mood)
