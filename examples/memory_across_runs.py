"""A weekly analyst that remembers: each run reads what earlier runs stored in one SQLite
file, and an agent keeps explicit notes with a MemoryTool.

Three weekly runs share a temporary file here; point `MemoryStore.sqlite` at a file of your
own and each run of your program recalls the runs before it, in any process.
"""

import asyncio
import tempfile
from pathlib import Path

from agentensemble import Agent, Ensemble, FunctionModel, Task, tool_call
from agentensemble.memory import MemoryScope, MemoryStore, MemoryTool
from agentensemble.models import Message


def analyst_model(week: int) -> FunctionModel:
    """A stand-in model: notes the week's figure once, then reports what memory showed."""

    def answer(messages: list[Message], tools: object) -> object:
        prompt = messages[1].text or ""
        if len(messages) == 2:  # first call of the task: keep a note first
            return tool_call("store_memory", key=f"week {week}", value=f"{100 + week} units sold")
        remembered = prompt.count("\n---\nWeek ")
        return f"Week {week}: {100 + week} units; {remembered} earlier reports in memory."

    return FunctionModel(answer)


async def one_week(store: MemoryStore, week: int) -> str:
    analyst = Agent(
        "Analyst", "Report weekly sales", llm=analyst_model(week), tools=[MemoryTool("notes")]
    )
    report = Task(
        "Write the sales report for week {week}",
        agent=analyst,
        memory=[MemoryScope.of("reports").keep_last_entries(12)],
    )
    output = await Ensemble(tasks=[report], memory_store=store).arun(inputs={"week": str(week)})
    return output.raw


async def main(path: Path, weeks: range) -> None:
    async with MemoryStore.sqlite(path) as store:
        for week in weeks:
            print(await one_week(store, week))
        notes = await store.retrieve("notes", "units sold", 5)
        print("Notes:", "; ".join(note.content for note in notes))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(Path(directory) / "analyst.db", range(1, 4)))
