"""A process's first run imports the engine and the OpenAI SDK off the event loop: a web
server's other requests do not stand still while they load (issue 27, item 17)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.integration.openai_server import OpenAIServer, OpenAIStub

CHILD = textwrap.dedent(
    """
    import asyncio, sys, threading

    WATCHED = {"agentensemble._run", "openai"}
    where = {}
    running = False  # only imports made while the loop runs are watched

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if running and name in WATCHED and name not in where:
                where[name] = threading.current_thread().name
            return None

    sys.meta_path.insert(0, Watch())

    from agentensemble import Ensemble, OpenAIChatModel, Task

    # made before the loop: it checks that the SDK is installed, without importing it
    model = OpenAIChatModel("m", base_url=sys.argv[1], api_key="t", max_retries=0)
    ensemble = Ensemble(tasks=[Task("Say hi", "A greeting", llm=model)])
    assert "openai" not in sys.modules and "agentensemble._run" not in sys.modules

    async def main():
        global running
        running = True
        output = await ensemble.arun()
        loop_thread = threading.current_thread().name
        print(output.raw, loop_thread, where["agentensemble._run"], where["openai"])

    asyncio.run(main())
    """
)


def test_the_first_run_imports_the_engine_and_the_sdk_off_the_loop() -> None:
    with OpenAIServer(OpenAIStub(["hi"])) as server:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, server.base_url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    raw, loop_thread, engine_thread, sdk_thread = done.stdout.split()
    assert raw == "hi"
    assert engine_thread != loop_thread
    assert sdk_thread != loop_thread


HELD_IMPORT = textwrap.dedent(
    """
    import asyncio, sys, threading

    held, release = threading.Event(), threading.Event()

    class HoldTheEngine:  # holds the engine's import at the first module it imports
        def find_spec(self, name, path=None, target=None):
            if "agentensemble._run" in sys.modules and not held.is_set():
                held.set()
                release.wait(60)
            return None

    def release_when_waited_for(frame, event, arg):  # an import waits on the module's lock
        if event == "call" and frame.f_code.co_name == "_lock_unlock_module":
            release.set()

    sys.meta_path.insert(0, HoldTheEngine())

    from agentensemble import Ensemble, FunctionModel, Task

    model = FunctionModel(lambda messages, tools: "hi")
    ensemble = Ensemble(tasks=[Task("Say hi", "A greeting", llm=model)])

    async def main():
        first = asyncio.create_task(ensemble.arun())
        await asyncio.to_thread(held.wait, 60)
        first.cancel()
        try:
            await first
        except asyncio.CancelledError:
            pass
        assert "agentensemble._run" in sys.modules and not release.is_set()
        sys.setprofile(release_when_waited_for)
        output = await ensemble.arun()
        sys.setprofile(None)
        assert release.is_set()  # by the wait on the lock, not by the hold's deadline
        print(output.raw)

    asyncio.run(main())
    """
)


def test_a_run_after_a_first_run_cancelled_mid_import_waits_for_the_engine() -> None:
    """The cancelled run's thread goes on importing the engine, which stays in sys.modules
    half made meanwhile: the next run waits for it, as an import statement does."""
    done = subprocess.run(
        [sys.executable, "-c", HELD_IMPORT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["hi"]
