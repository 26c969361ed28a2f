"""The dashboard in a real browser: Debian's chromium, headless, driven by chromium-driver
through python3-selenium, against the real `keywatch run` and a real redis-server. The page
asks for the token; the overview's queue figures, with 3 queues and live traffic, equal
`keywatch inspect`'s once the traffic stops; a queue's dead letter is replayed from its
button (delivered: the test's handler records it; the count shown drops); with admin off no
button is shown and a POST is refused 403. Screenshots of each page go to
<build>/dashboard-screenshots/; the first paint (Paint Timing API) is printed, not asserted.
Skipped, saying why, only where chromium, chromium-driver or selenium is not installed
(scripts/install-deps.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from conftest import wait_for
from test_dashboard_api import QUEUES, TOKEN, inspect_figures, schedule, start

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - said by the skip below
    webdriver = None

FIGURES = ("due", "due_now", "inflight", "dead")


@pytest.fixture
def browser():
    if webdriver is None or not CHROMIUM or not DRIVER:
        pytest.skip("the browser tests need Debian's chromium, chromium-driver and "
                    "python3-selenium (scripts/install-deps.sh installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver, name: str) -> None:
    folder = Path(os.environ.get("KW_BUILD_DIR", "/tmp")) / "dashboard-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(folder / f"{name}.png"))


def login(driver, d) -> None:
    driver.get(f"http://{d.http}/")
    field = wait_for(lambda: driver.find_element(By.ID, "token").is_displayed()
                     and driver.find_element(By.ID, "token"), 20, "the token prompt")
    field.send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()


def shown_figures(driver) -> dict:
    """{queue: {figure: int}} as the overview's queue table shows them; a queue whose
    figures are not read yet ("-") is left out, so that a wait goes on instead of raising."""
    rows = driver.execute_script("""
        return [...document.querySelectorAll('#queues tr[data-queue]')].map(r => [
            r.dataset.queue,
            Object.fromEntries([...r.querySelectorAll('td[data-f]')]
                .map(c => [c.dataset.f, c.textContent])) ]);""")
    return {q: {f: int(cells[f]) for f in FIGURES} for q, cells in rows
            if all(cells.get(f, "").isdigit() for f in FIGURES)}


def first_paint(driver) -> dict:
    return driver.execute_script("""
        const nav = performance.getEntriesByType('navigation')[0];
        const paint = Object.fromEntries(performance.getEntriesByType('paint')
            .map(p => [p.name, p.startTime]));
        return {first_paint_ms: paint['first-paint'],
                first_contentful_paint_ms: paint['first-contentful-paint'],
                dom_content_loaded_ms: nav && nav.domContentLoadedEventEnd,
                transfer_bytes: nav && nav.transferSize};""")


class Traffic:
    """Schedules due tasks into mail and reports from a thread until stopped."""

    def __init__(self, keywatch, url) -> None:
        self.stopped = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=self._run, args=(keywatch, url), daemon=True)
        self.thread.start()

    def _run(self, keywatch, url) -> None:
        while not self.stopped.is_set():
            queue = ("mail", "reports")[self.count % 2]
            schedule(keywatch, url, queue, f"live-{self.count}")
            self.count += 1

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(60)


def test_overview_matches_inspect_and_replay_from_the_queue_page(redis, daemon, keywatch,
                                                                 tmp_path, browser):
    d = start(daemon, redis.url, tmp_path)
    for i in range(2):
        schedule(keywatch, redis.url, "jobs", f"bad-{i}", f"payload {i}")
    schedule(keywatch, redis.url, "mail", "later", when="1h")
    traffic = Traffic(keywatch, redis.url)
    try:
        login(browser, d)
        wait_for(lambda: set(shown_figures(browser)) >= set(QUEUES), 20,
                 "the overview's queue table")
        print(f"\ndashboard first paint on loopback: {first_paint(browser)}")
        # Three polls of live traffic: the sparklines show its rate.
        wait_for(lambda: browser.execute_script("""
            const p = document.querySelector('[data-series="claimed"] polyline');
            return p && p.getAttribute('points').split(' ').length >= 3
                   && document.querySelector('[data-series="claimed"] small').textContent
                   !== '0.0/s';"""), 30, "the sparkline of the items claimed")
        shot(browser, "overview")
    finally:
        traffic.stop()

    def same():
        want = inspect_figures(keywatch, redis.url)
        got = shown_figures(browser)
        return want if all(got.get(q) == f for q, f in want.items()) else None

    figures = wait_for(same, 30, "the overview's figures to equal keywatch inspect's")
    assert figures["jobs"]["dead"] == 2 and figures["mail"]["due"] >= 1

    # The queue page: its dead letters, replay one. (The page redraws every 2 s: it is
    # read and clicked through scripts, never through elements kept across a redraw.)
    browser.execute_script("location.hash = '#/queue/jobs'")
    rows = wait_for(lambda: len(dead_rows(browser)) == 2 and dead_rows(browser), 20,
                    "the 2 dead letters of jobs")
    entry, replayed, text = rows[0]  # replayed: bad-0 or bad-1
    assert "payload " + replayed[-1] in text and "exited 1" in text
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".hist rect"), 20, "the histogram")
    shot(browser, "queue")
    (tmp_path / "fail").unlink()
    browser.execute_script(
        "const b = document.querySelector(`#dead tr[data-entry='${arguments[0]}'] button.replay`);"
        "setTimeout(() => b.click(), 0);", entry)
    alert = wait_for(lambda: _alert(browser), 10, "the confirmation")
    assert alert.text == f"Replay dead letter {entry} of queue 'jobs'?"
    alert.accept()
    wait_for(lambda: (tmp_path / "delivered").exists()
             and replayed in (tmp_path / "delivered").read_text(), 30, f"{replayed} delivered")
    wait_for(lambda: len(dead_rows(browser)) == 1 and browser.execute_script(
        "return document.querySelector('#figures [data-f=\"dead\"] b').textContent") == "1",
             30, "the dead count shown to drop to 1")
    assert browser.execute_script(
        "return document.getElementById('replay-all').textContent") == "Replay all (1)"

    browser.execute_script("location.hash = '#/handlers'")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, '#handlers tr[data-handler="recorder"]'),
             20, "the handlers table")
    shot(browser, "handlers")


def dead_rows(driver) -> list:
    """[(entry, id, the row's text)] of the queue page's dead letters."""
    return driver.execute_script("""
        return [...document.querySelectorAll('#dead tr[data-entry]')].map(r =>
            [r.dataset.entry, r.cells[1].textContent, r.innerText]);""")


def _alert(driver):
    try:
        return driver.switch_to.alert
    except Exception:  # NoAlertPresentException: not yet
        return None


def test_read_only_shows_no_action_and_post_is_refused(redis, daemon, keywatch, tmp_path,
                                                        browser):
    d = start(daemon, redis.url, tmp_path, admin=False, token=False)
    schedule(keywatch, redis.url, "jobs", "bad-0")
    browser.get(f"http://{d.http}/#/queue/jobs")
    wait_for(lambda: dead_rows(browser), 30, "the dead letter of jobs")
    assert browser.execute_script("return document.querySelectorAll('#view button').length") == 0
    assert "read-only" in browser.execute_script(
        "return document.getElementById('status').textContent")
    status = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/v1/queues/jobs/dead/replay', {method: 'POST',
              headers: {'Content-Type': 'application/json'}, body: '{"all": true}'})
            .then(r => done(r.status));""")
    assert status == 403
    shot(browser, "queue-read-only")
