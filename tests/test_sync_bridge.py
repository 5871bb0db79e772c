import asyncio

import agentensemble
from agentensemble import Ensemble, ScriptedModel, Task


def test_run_from_plain_sync_code() -> None:
    output = agentensemble.run(ScriptedModel(["a", "b"]), "Research X", Task.of("Write Y"))
    assert [o.agent_role for o in output.task_outputs] == ["Researcher", "Writer"]


async def test_run_works_inside_a_running_event_loop() -> None:
    ensemble = Ensemble(tasks=[Task("Say hi")], llm=ScriptedModel(["hi"]))
    output = ensemble.run()  # a notebook does exactly this
    assert output.raw == "hi"
    assert asyncio.get_running_loop().is_running()


async def test_module_level_arun() -> None:
    output = await agentensemble.arun(ScriptedModel(["x"]), "Plan {thing}", inputs={"thing": "y"})
    assert output.task_outputs[0].task_description == "Plan y"
