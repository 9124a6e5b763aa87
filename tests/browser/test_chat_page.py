"""The Chat page in Debian's Chromium: examples, the data-file picker, answers as tables and
Chinese prompts drawn with real CJK glyphs (issue 28, items 6 and 8)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from conftest import Dashboard

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHINESE = "找出影响销量的关键特征并调优随机森林"


def _open_chat(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/chat")
    page.wait_for_selector("#chat-session-id")


def _ask(page: Any, prompt: str) -> str:
    page.fill("#chat-prompt", prompt)
    page.click("#chat-send")
    page.wait_for_selector("#chat-result", timeout=180_000)
    return page.inner_text("#chat-result")


def test_the_empty_chat_offers_examples_that_fill_the_prompt(
    page: Any, dashboard: Dashboard
) -> None:
    _open_chat(page, dashboard)
    buttons = page.locator("#chat-examples button.chat-example")
    assert buttons.count() >= 4
    assert CHINESE in buttons.all_inner_texts()
    page.locator("#chat-examples button", has_text=CHINESE).click()
    page.wait_for_function(
        "text => document.querySelector('#chat-prompt').value === text", arg=CHINESE
    )
    page.locator("#chat-examples button", has_text="describe the data").click()
    page.wait_for_function(
        "() => document.querySelector('#chat-prompt').value === 'describe the data'"
    )


def test_a_picked_data_file_is_described_as_a_table(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    _open_chat(page, dashboard)
    data = seeded_home["data"]
    page.click("#chat-data")
    page.locator("label.dash-dropdown-option", has_text=data.name).first.click()
    page.wait_for_selector("#chat-data-used")
    assert data.name in page.inner_text("#chat-data-used")
    text = _ask(page, "describe the data")
    header = page.inner_text("#chat-answer thead")
    assert all(column in header for column in ("column", "kind", "missing", "unique"))
    cells = page.locator("#chat-answer tbody td").all_inner_texts()
    assert "sales" in cells and "numeric" in cells
    assert "{" not in text and '"columns"' not in text  # a table, not raw JSON
    # the conversation is under way: the examples step aside, the file stays the session's
    page.wait_for_selector("#chat-examples", state="hidden")
    assert data.name in page.inner_text("#chat-session-id")


def test_a_question_about_runs_answers_with_the_clis_table(
    page: Any, dashboard: Dashboard, seeded_home: dict
) -> None:
    _open_chat(page, dashboard)
    text = _ask(page, "show the last 5 runs of every experiment")
    assert "runs of every experiment, newest first" in page.inner_text("#chat-answer caption")
    header = page.locator("#chat-answer thead th").all_inner_texts()
    assert header == ["run", "experiment", "created", "status", "metric", "prompt"]
    rows = page.locator("#chat-answer tbody tr")
    assert 3 <= rows.count() <= 5
    first_column = page.locator("#chat-answer tbody td:first-child").all_inner_texts()
    assert all(len(cell) == 8 for cell in first_column)  # the ids `runs show` accepts
    assert "{" not in text and "start_time" not in text


def test_a_chinese_prompt_is_drawn_with_cjk_glyphs(page: Any, dashboard: Dashboard) -> None:
    fonts = subprocess.run(
        [shutil.which("fc-list") or "fc-list", ":lang=zh", "family"],
        capture_output=True,
        text=True,
    ).stdout
    if "CJK" not in fonts:
        pytest.fail("no CJK font: `make test` installs Debian's fonts-noto-cjk")
    _open_chat(page, dashboard)
    page.click("#chat-prompt")
    page.keyboard.type(CHINESE)
    page.click("#chat-send")
    span = page.locator("#chat-live p span").first
    span.wait_for()
    assert span.inner_text() == CHINESE
    # a CJK glyph is a full em wide; a missing-glyph box or a fallback is far narrower
    width, size = span.evaluate(
        "el => [el.getBoundingClientRect().width, parseFloat(getComputedStyle(el).fontSize)]"
    )
    assert width >= 0.9 * size * len(CHINESE), (width, size)
    assert "CJK" in " ".join(_fonts_drawing(page, "#chat-live p span"))


def _fonts_drawing(page: Any, selector: str) -> list[str]:
    """The font families Chromium really drew a node's text with (DevTools protocol)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return [f["familyName"] for f in fonts if f.get("glyphCount")]
