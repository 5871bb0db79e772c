"""The dashboard's page in Debian's chromium, driven by Playwright (nothing downloaded).

Every test fails if the page asks for anything from another origin. Screenshots land in
``.artifacts/dashboard/`` (CI keeps them as artifacts).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Agent,
    CheckpointStore,
    Ensemble,
    Review,
    ReviewHandler,
    ScriptedModel,
    Task,
    ToolCall,
    tool,
)
from agentensemble.enums import ExitReason
from agentensemble.web import WebDashboard
from tests.web.helpers import DEADLINE, Gate

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "dashboard"

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: ./dev test installs Debian's chromium")
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)


@pytest.fixture
def dashboard() -> Iterator[WebDashboard]:
    with WebDashboard(port=0) as started:
        yield started


class Browser:
    """Pages of one chromium, each refusing every request to another origin."""

    def __init__(self, browser: Any, origin: str) -> None:
        self.browser = browser
        self.origin = origin
        self.foreign: list[str] = []
        self.errors: list[str] = []

    async def page(self, url: str) -> Any:
        context = await self.browser.new_context(viewport={"width": 1280, "height": 800})
        page = await context.new_page()
        page.set_default_timeout(DEADLINE * 1000)

        async def only_ours(route: Any) -> None:
            url = route.request.url
            if url.startswith((self.origin, "ws://127.0.0.1", "data:")):
                await route.continue_()
            else:
                self.foreign.append(url)
                await route.abort()

        await page.route("**/*", only_ours)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        await page.goto(url)
        await page.wait_for_selector("html[data-ready]", state="attached")
        return page


@pytest.fixture
async def browser(dashboard: WebDashboard) -> AsyncIterator[Browser]:
    async with playwright_api.async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            opened = Browser(chromium, f"http://127.0.0.1:{dashboard.port}")
            yield opened
        finally:
            await chromium.close()
    assert opened.foreign == [], f"the page asked another origin: {opened.foreign}"
    assert opened.errors == [], f"the page raised: {opened.errors}"


async def status_shows(page: Any, text: str) -> None:
    """Wait (by selector: the page's CSP forbids evaluated predicates) for the run status."""
    await page.locator(f'[data-testid="run-status"]:has-text("{text}")').wait_for()


async def screenshot(page: Any, name: str) -> None:
    await asyncio.to_thread(ARTIFACTS.mkdir, parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def state(page: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(
        await page.evaluate("JSON.stringify(window.__agentensemble.state())")
    )
    return value


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the notes."""
    return f"Notes on {topic}: bees dance to say where flowers are."


def research_team(gate: Gate, dashboard: WebDashboard) -> Ensemble:
    scripted = ScriptedModel(
        [ToolCall(id="c1", name="lookup", arguments='{"topic": "bees"}'), "Bees dance."]
    )
    researcher = Agent(role="Researcher", goal="Find facts", tools=[lookup], llm=scripted)
    writer = Agent(role="Writer", goal="Write clearly", llm=gate.model())
    research = Task(description="Research bees", expected_output="Facts", agent=researcher)
    write = Task(
        description="Write one line about bees",
        expected_output="One line",
        agent=writer,
        context=[research],
    )
    return Ensemble(tasks=[research, write], web_dashboard=dashboard)


async def test_a_run_streams_into_the_page_and_a_late_page_agrees(
    dashboard: WebDashboard, browser: Browser
) -> None:
    live = await browser.page(dashboard.url)
    gate = Gate(["Bees dance to show the way."])
    running = asyncio.create_task(research_team(gate, dashboard).arun())
    await gate.waiting.wait()
    await live.wait_for_selector('[data-testid="task-row"][data-state="running"]')
    await live.wait_for_selector('[data-testid="task-row"][data-state="completed"]')
    await live.wait_for_selector('[data-testid="flow-graph"]')
    status = live.get_by_test_id("run-status")
    assert (await status.text_content() or "").strip().lower().startswith("running")
    await screenshot(live, "run-in-progress")
    gate.opened.set()
    output = await running
    await status_shows(live, "completed")
    rows = live.locator('[data-testid="task-row"]')
    assert await rows.count() == 2
    assert {await rows.nth(i).get_attribute("data-state") for i in range(2)} == {"completed"}
    await live.locator('[data-testid="task-row"]').first.click()
    await live.wait_for_selector('[data-testid="tool-call"]')
    assert "lookup" in (await live.get_by_test_id("tool-call").first.text_content() or "")
    await screenshot(live, "run-completed")

    watched = await state(live)
    late = await browser.page(dashboard.url)
    await status_shows(late, "completed")
    assert await state(late) == watched
    [run] = watched["runs"]
    assert run["status"] == "completed"
    assert [task["output"] for task in run["tasks"]] == [o.raw for o in output.task_outputs]
    assert run["tasks"][0]["toolCalls"][0]["toolName"] == "lookup"


def reviewed_task() -> Task[None]:
    return Task(
        description="Draft the launch announcement",
        expected_output="A paragraph",
        agent=Agent(
            role="Writer", goal="Write", llm=ScriptedModel(["We launch on Monday, maybe."])
        ),
        review=Review.required(prompt="Check the date before it goes out"),
    )


async def test_a_reviewer_edits_the_output_in_the_page_and_the_other_tab_sees_it(
    dashboard: WebDashboard, browser: Browser
) -> None:
    first = await browser.page(dashboard.url)
    second = await browser.page(dashboard.url)
    running = asyncio.create_task(Ensemble(tasks=[reviewed_task()], web_dashboard=dashboard).arun())
    panel = first.get_by_test_id("review-panel")
    await panel.wait_for(state="visible")
    await second.get_by_test_id("review-panel").wait_for(state="visible")
    assert "We launch on Monday" in await first.get_by_test_id("review-text").input_value()
    assert "left" in (await first.get_by_test_id("review-countdown").text_content() or "")
    await screenshot(first, "review-pending")
    await first.get_by_test_id("review-text").fill("We launch on Tuesday 3 March.")
    await first.get_by_test_id("review-edit").click()
    output = await running
    await second.get_by_test_id("review-panel").wait_for(state="hidden")
    await panel.wait_for(state="hidden")
    assert output.raw == "We launch on Tuesday 3 March."
    assert output.exit_reason is ExitReason.COMPLETED


async def test_exit_early_from_the_page_stops_the_run(
    dashboard: WebDashboard, browser: Browser
) -> None:
    page = await browser.page(dashboard.url)
    running = asyncio.create_task(Ensemble(tasks=[reviewed_task()], web_dashboard=dashboard).arun())
    await page.get_by_test_id("review-exit").click()
    output = await running
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    await status_shows(page, "stopped early")


async def test_a_paused_run_shows_as_paused(dashboard: WebDashboard, browser: Browser) -> None:
    page = await browser.page(dashboard.url)
    output = await Ensemble(
        tasks=[reviewed_task()],
        web_dashboard=dashboard,
        review_handler=ReviewHandler.pause(),
        checkpoint=CheckpointStore.in_memory(),
    ).arun()
    assert output.exit_reason is ExitReason.PAUSED
    await status_shows(page, "paused")
    row = page.get_by_test_id("task-row").first
    await page.locator('[data-testid="task-row"][data-state="paused"]').wait_for()
    await row.click()
    await page.locator("text=waits for a review").first.wait_for()
    await screenshot(page, "run-paused")


async def test_cancel_from_the_page(dashboard: WebDashboard, browser: Browser) -> None:
    page = await browser.page(dashboard.url)
    gate = Gate(["Never sent."])
    running = asyncio.create_task(
        Ensemble(
            tasks=[Task(description="Think for a long time", expected_output="x")],
            llm=gate.model(),
            web_dashboard=dashboard,
        ).arun()
    )
    await gate.waiting.wait()
    await page.get_by_test_id("run-cancel").click()
    with pytest.raises(asyncio.CancelledError):
        await running
    await status_shows(page, "cancelled")
    await screenshot(page, "run-cancelled")


def test_no_file_of_the_page_names_another_origin() -> None:
    static = Path(__file__).resolve().parents[2] / "src" / "agentensemble" / "web" / "static"
    for path in static.iterdir():
        if path.suffix not in {".html", ".js", ".css"}:
            continue
        text = path.read_text()
        for scheme in ("http://", "https://", "//cdn", "fonts.googleapis"):
            found = [line for line in text.splitlines() if scheme in line and "w3.org" not in line]
            assert found == [], f"{path.name} names another origin: {found[:3]}"
