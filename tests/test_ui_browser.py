"""The web inspector in a real browser: headless Chromium (Debian's chromium and
chromium-driver, as .ci/run installs them) driven by Selenium, against
``python -m brainmem ui`` serving a brain built by the test.

Screenshots of each page go to ``tmp_path``; set ``BRAINMEM_SCREENSHOTS=docs/screenshots``
to regenerate the README's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra (starlette) is not installed")
pytest.importorskip("jinja2", reason="the ui extra (jinja2) is not installed")
selenium = pytest.importorskip("selenium", reason="selenium (test extra) is not installed")

from conftest import FakeClock  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402
from ui_brain import XSS, build, start_ui  # noqa: E402

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000")

if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    pytest.skip(f"no Chromium/chromedriver ({CHROMIUM}, {DRIVER}): apt-get install chromium "
                "chromium-driver (.ci/run does)", allow_module_level=True)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("uib") / "brain.db"
    return path, build(str(path), FakeClock())


@pytest.fixture
def built(tmp_path: Path, source: tuple[Path, dict[str, str]]) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "brain.db"
    shutil.copyfile(source[0], path)
    return path, dict(source[1])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("BRAINMEM_SCREENSHOTS") or tmp_path / "screenshots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def snap(driver: Any, folder: Path, name: str) -> None:
    height = driver.execute_script("return Math.min(document.body.scrollHeight + 40, 2400)")
    driver.set_window_size(1280, max(700, height))
    assert driver.save_screenshot(str(folder / f"{name}.png"))
    driver.set_window_size(1280, 1000)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return err


def local_only(driver: Any, url: str) -> None:
    """The page loaded nothing from anywhere but the inspector (works offline, no CDN)."""
    sources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(s.startswith(url) for s in sources), sources


def no_alert(driver: Any) -> None:
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def test_click_through_search_trace_graph_log(browser: Any, built: Any, shots: Path) -> None:
    path, ids = built
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc, url = start_ui(path)
    try:
        browser.get(url)
        assert browser.find_element(By.ID, "live-count").text == "9"
        assert browser.find_element(By.ID, "check-status").text.startswith("OK")
        assert "read-only" in browser.find_element(By.CSS_SELECTOR, "header .mode").text
        local_only(browser, url)
        snap(browser, shots, "overview")

        browser.find_element(By.LINK_TEXT, "Search").click()
        box = browser.find_element(By.ID, "q")
        box.send_keys("editor dark mode")
        browser.find_element(By.ID, "go").click()
        hits = WebDriverWait(browser, 10).until(
            ec.presence_of_all_elements_located((By.CSS_SELECTOR, "#hits li.hit")))
        assert hits[0].find_element(By.CSS_SELECTOR, "a.trace-link").text == ids["editor"]
        assert "dark mode in the code editor" in hits[0].text
        bars = hits[0].find_elements(By.CSS_SELECTOR, "rect.bar")
        assert [b.get_attribute("data-factor") for b in bars][:3] == ["bm25", "relevance", "episode"]
        assert float(bars[1].get_attribute("width")) > 0  # relevance drawn
        local_only(browser, url)
        snap(browser, shots, "search")

        hits[0].find_element(By.CSS_SELECTOR, "a.trace-link").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "trace-id")))
        assert browser.find_element(By.ID, "trace-id").text == ids["editor"]
        assert browser.find_element(By.CSS_SELECTOR, "svg.curve").is_displayed()
        recalls = browser.find_elements(By.CSS_SELECTOR, "#recalls tr")[1:]
        assert len(recalls) == 3 and all("used" in row.text for row in recalls)
        assert ids["insight"] in browser.find_element(By.ID, "lineage").text
        local_only(browser, url)
        snap(browser, shots, "trace")

        browser.find_element(By.ID, "graph-link").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.graph")))
        nodes = {n.get_attribute("data-id") for n in browser.find_elements(By.CSS_SELECTOR, "a.node")}
        assert {ids["editor"], ids["font"], ids["keys"], ids["insight"]} <= nodes
        weights = [e.get_attribute("data-weight") for e in browser.find_elements(By.CSS_SELECTOR, "g.edge")]
        assert weights and all(0 < float(w) <= 1 for w in weights)
        assert "cluster 0" in browser.find_element(By.ID, "clusters").text
        local_only(browser, url)
        snap(browser, shots, "graph")

        # a node is a link to its trace
        node = browser.find_element(By.CSS_SELECTOR, f'a.node[data-id="{ids["font"]}"] circle')
        browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node)
        WebDriverWait(browser, 10).until(ec.text_to_be_present_in_element((By.ID, "trace-id"), ids["font"]))

        browser.find_element(By.LINK_TEXT, "Consolidation log").click()
        runs = browser.find_elements(By.CSS_SELECTOR, "#runs tr")[1:]
        assert len(runs) == 4
        local_only(browser, url)
        snap(browser, shots, "log")
        deriving = [r for r in runs if r.find_elements(By.TAG_NAME, "td")[6].text != "0"]
        deriving[0].find_element(By.TAG_NAME, "a").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "steps")))
        assert ids["insight"] in browser.page_source
        local_only(browser, url)
        snap(browser, shots, "run")

        browser.get(url + f"trace/{ids['xss']}")
        assert browser.find_element(By.ID, "content").text == XSS
        no_alert(browser)
        browser.get(url + "trace/mt_nope")
        assert "no trace with id" in browser.find_element(By.ID, "error-message").text
        snap(browser, shots, "error")
    finally:
        stop(proc)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_write_mode_in_the_browser(browser: Any, built: Any, shots: Path) -> None:
    import httpx

    path, ids = built
    proc, url = start_ui(path, "--write")
    try:
        browser.get(url + f"trace/{ids['cat']}")
        browser.find_element(By.ID, "pin").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "flash")))
        assert browser.find_element(By.ID, "flash").text == "Pinned."
        assert browser.find_element(By.ID, "pin").text == "Unpin"

        # a stale edit: someone else saves first, then this form (version 2) is sent
        browser.find_element(By.CSS_SELECTOR, "details summary").click()
        area = browser.find_element(By.CSS_SELECTOR, "form.edit textarea")
        area.clear()
        area.send_keys("The user has a cat called Miso (browser edit)")
        r = httpx.post(url + f"api/trace/{ids['cat']}", json={"tags": ["pets"], "expected_version": 2})
        assert r.json() == {"updated": True, "version": 3}
        browser.find_element(By.ID, "save").click()
        message = WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "error-message")))
        assert "version 3, not the expected 2" in message.text
        browser.get(url + f"trace/{ids['cat']}")
        assert browser.find_element(By.ID, "content").text == "The user has a cat called Miso"
        snap(browser, shots, "trace-write")

        browser.get(url + "log")
        browser.find_element(By.ID, "reflect").click()
        # the page polls /api/reflect while it runs, then reloads (a fast reflect may be
        # done before the first page shows; either way the log ends with the report)
        WebDriverWait(browser, 30).until(ec.text_to_be_present_in_element((By.ID, "progress"), "Last reflect: ok"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#runs tr")) == 6  # header + 5 runs
    finally:
        stop(proc)
