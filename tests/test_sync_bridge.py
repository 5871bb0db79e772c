import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import agentensemble
from agentensemble import Ensemble, FunctionModel, ScriptedModel, Task
from agentensemble.models import Message, ToolSpec


def _waits_until_cancelled(before: Callable[[], None], cancelled: threading.Event) -> Any:
    """A model that calls `before`, then waits until its call is cancelled (it sets
    `cancelled` then). Any, not NoReturn: mypy cannot see that the wait never ends."""

    async def endless(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        before()
        try:  # never set: only cancellation ends this (the timeout only stops a regression)
            await asyncio.wait_for(asyncio.Event().wait(), timeout=10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return FunctionModel(endless)


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


async def test_ctrl_c_inside_a_running_loop_cancels_only_this_work() -> None:
    import signal
    import threading

    import pytest

    main_thread_id = threading.main_thread().ident
    assert main_thread_id is not None

    # Like a notebook kernel: Ctrl-C raises KeyboardInterrupt in the waiting main thread.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    reached_model = threading.Event()
    cancelled = threading.Event()

    def ctrl_c() -> None:
        reached_model.set()
        signal.pthread_kill(main_thread_id, signal.SIGINT)

    model = _waits_until_cancelled(ctrl_c, cancelled)
    ensemble = Ensemble(tasks=[Task("Wait forever")], llm=model)
    try:
        with pytest.raises(KeyboardInterrupt):
            ensemble.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert reached_model.is_set()
    assert cancelled.is_set()  # the worker's run was cancelled, not left running
    assert asyncio.get_running_loop().is_running()  # the caller's own loop is untouched


def test_sys_exit_in_user_code_reaches_the_caller_and_the_loop_survives() -> None:
    from agentensemble import GuardrailOutput, GuardrailResult

    def leave(value: GuardrailOutput) -> GuardrailResult:
        raise SystemExit(3)

    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            Ensemble(tasks=[Task("x", handler=lambda ctx: "x", output_guardrails=[leave])]).run()
        except BaseException as error:  # the SystemExit, handed over
            outcome.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)  # a deadline, not a pause: it returns as soon as the run ends
    assert not worker.is_alive(), "run() never returned"
    assert isinstance(outcome[0], SystemExit)
    assert outcome[0].code == 3
    assert Ensemble(tasks=[Task("y", handler=lambda ctx: "still serving")]).run().raw == (
        "still serving"
    )


def _loop_recorder(loops: list[asyncio.AbstractEventLoop]) -> Any:
    def answer(messages: object, tools: object) -> str:
        loops.append(asyncio.get_running_loop())
        return "done"

    return FunctionModel(answer)


def test_sync_runs_on_the_main_thread_use_its_own_loop_kept_across_calls() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    ensemble = Ensemble(tasks=[Task("Say done")], llm=_loop_recorder(loops))
    ensemble.run()
    ensemble.run()
    assert loops[0] is loops[1]  # one loop: clients bound to it keep working
    assert not loops[0].is_running()  # the call ran it here, on the calling thread


def test_a_stray_loop_stop_does_not_end_a_sync_run_early() -> None:
    def stops_the_loop(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        asyncio.get_running_loop().stop()  # user code stopping the loop it runs on
        return "done"

    async def suspends(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        await asyncio.sleep(0)  # the run goes on past the turn of the loop that stopped
        return "later"

    ensemble = Ensemble(
        tasks=[
            Task("Stop", llm=FunctionModel(stops_the_loop)),
            Task("Go on", llm=FunctionModel(suspends)),
        ]
    )
    assert [o.raw for o in ensemble.run().task_outputs] == ["done", "later"]
    assert ensemble.run().raw == "later"  # and the next call is not stopped by it either
    for _ in range(2):  # from another thread: the background loop serves on after it
        assert _raws_from_another_thread(ensemble) == ["done", "later"]


def _raws_from_another_thread(ensemble: Ensemble) -> list[str]:
    raws: list[str] = []
    worker = threading.Thread(  # a daemon: a regression leaves it waiting, not the tests
        target=lambda: raws.extend(o.raw for o in ensemble.run().task_outputs), daemon=True
    )
    worker.start()
    worker.join(30)  # a deadline, not a pause: it returns as soon as the run ends
    assert not worker.is_alive(), "run() never returned"
    return raws


def test_sys_exit_on_the_main_thread_is_raised_not_logged_as_never_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import gc

    def leave(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        Ensemble(tasks=[Task("Quit", llm=FunctionModel(leave))]).run()
    gc.collect()  # a task whose exception nobody read logs so when it is collected
    assert "never retrieved" not in caplog.text
    assert Ensemble(tasks=[Task("y", handler=lambda ctx: "still here")]).run().raw == "still here"


_INTERRUPTED_IN_THE_LAST_STEP = """
import asyncio, os, signal
from agentensemble import Ensemble, FunctionModel, Task

async def client():  # what a model client bound to the loop holds open
    try:
        yield
        await asyncio.Event().wait()
    finally:
        await asyncio.sleep(0)  # its cleanup needs a turn of the loop
        print("client closed", flush=True)

held = []

async def opens(messages, tools):
    held.append(client())
    await held[0].__anext__()
    return "open"

def interrupts(messages, tools):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands in the run's own last step
    return "done"

Ensemble(tasks=[Task("Open", llm=FunctionModel(opens))]).run()
try:
    Ensemble(tasks=[Task("Stop", llm=FunctionModel(interrupts))]).run()
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_ctrl_c_in_a_runs_last_step_still_lets_exit_close_the_loops_clients() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IN_THE_LAST_STEP],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.split() == ["interrupted", "client", "closed"], done.stderr


def test_sync_runs_from_other_threads_share_the_background_loop() -> None:
    import concurrent.futures

    loops: list[asyncio.AbstractEventLoop] = []
    ensemble = Ensemble(tasks=[Task("Say done")], llm=_loop_recorder(loops))
    ensemble.run()  # the main thread's own loop
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert {o.raw for o in pool.map(lambda _: ensemble.run(), range(20))} == {"done"}
    main, *others = loops
    assert len(set(others)) == 1  # one loop for every other thread: their I/O shared
    assert others[0] is not main
    assert others[0].is_running()  # the background loop, serving on


def test_ctrl_c_in_plain_sync_code_cancels_the_run_and_the_next_run_works() -> None:
    import signal

    import pytest

    main_thread_id = threading.main_thread().ident
    assert main_thread_id is not None
    cancelled = threading.Event()
    model = _waits_until_cancelled(
        lambda: signal.pthread_kill(main_thread_id, signal.SIGINT), cancelled
    )
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            Ensemble(tasks=[Task("Wait forever")], llm=model).run()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancelled.is_set()  # the run's work was cancelled, not left running
    assert Ensemble(tasks=[Task("y", handler=lambda ctx: "still here")]).run().raw == "still here"


def test_an_interrupt_raised_out_of_the_loop_cancels_the_calls_work() -> None:
    import signal

    import pytest

    main_thread_id = threading.main_thread().ident
    assert main_thread_id is not None
    cancelled = threading.Event()

    def own_handler(signum: int, frame: object) -> None:  # an application's own Ctrl-C
        raise KeyboardInterrupt

    waiting = threading.Event()

    def interrupt_while_the_loop_waits() -> None:
        waiting.wait(10)
        # this thread runs once the main thread lets go of the GIL: in the loop's select
        signal.pthread_kill(main_thread_id, signal.SIGINT)

    model = _waits_until_cancelled(waiting.set, cancelled)
    threading.Thread(target=interrupt_while_the_loop_waits, daemon=True).start()
    previous = signal.signal(signal.SIGINT, own_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            Ensemble(tasks=[Task("Wait forever")], llm=model).run()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancelled.is_set()  # not left pending for the thread's next call to run
    assert Ensemble(tasks=[Task("y", handler=lambda ctx: "next")]).run().raw == "next"
