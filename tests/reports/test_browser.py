"""Headless Chromium over the published site: every link resolves, no page errors, key numbers shown."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

from perfledger.reports.page import fmt

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


def crawl(browser, start: Path) -> dict[str, str]:
    """Visit every page reachable from `start` (file:// links); returns url -> visible text. Fails on errors."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    page.on("console", lambda msg: errors.append(f"{page.url}: console {msg.text}") if msg.type == "error" else None)
    seen: dict[str, str] = {}
    queue = [start.as_uri()]
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        if not url.endswith(".html"):  # an artifact (script, YAML): the browser would download it
            seen[url] = Path(urlparse(url).path).read_text()
            continue
        response = page.goto(url)
        assert response is None or response.ok, url
        seen[url] = page.inner_text("body")
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target, fragment = urldefrag(href)
            assert urlparse(target).scheme == "file", f"{url} links outside the site: {href}"
            assert Path(urlparse(target).path).is_file(), f"{url}: broken link {href}"
            if fragment:
                assert page.locator(f"#{fragment}").count() == 1 or target != url, f"{url}: no anchor #{fragment}"
            queue.append(target)
        for src in page.eval_on_selector_all("img[src]", "els => els.map(e => e.src)"):
            assert Path(urlparse(src).path).is_file(), f"{url}: missing image {src}"
            assert page.evaluate("s => [...document.images].find(i => i.src === s).naturalWidth", src) > 0, src
    page.close()
    assert errors == []
    return seen


def test_every_link_works_and_key_numbers_are_present(browser, published_site: dict) -> None:
    texts = crawl(browser, published_site["index"])
    pages = {Path(urlparse(u).path).name: t for u, t in texts.items()}
    assert {"index.html", "matrix.html", "validation.html", "diff.html", "estimates.html", "ledger-kimi-k3.html",
            "k8s_deploy.yaml"} <= set(pages)
    assert fmt(published_site["ingest"]["rows_accepted"]) in pages["index.html"]
    head_rows = published_site["matrix"]["models"]["moonshotai/Kimi-K3"]
    assert f"{head_rows} rows for moonshotai/Kimi-K3" in pages["matrix.html"]
    priced = [r for r in published_site["estimates"]["gate"]["rows"] if r["ms"] is not None]
    assert priced and all(fmt(r["ms"]) in pages["estimates.html"] for r in priced)
    done = sum(1 for c in published_site["ledgers"][0]["cells"] if c["status"] == "done")
    assert f"done {done}" in pages["index.html"]


def test_matrix_tabs_and_filter_work(browser, published_site: dict) -> None:
    page = browser.new_page()
    page.goto((published_site["out"] / "matrix.html").as_uri())
    tabs = page.eval_on_selector_all(".tabs a", "els => els.map(e => e.textContent)")
    assert len(tabs) >= 2
    first, second = page.locator(".tab").nth(0), page.locator(".tab").nth(1)
    assert first.is_visible() and not second.is_visible()
    page.click(f".tabs a:text-is('{tabs[1]}')")
    assert second.is_visible() and not first.is_visible()
    # Filter a tab with mixed statuses down to one status; status colours follow the Status column.
    for i, name in enumerate(tabs):
        page.click(f".tabs a:text-is('{name}')")
        tab = page.locator(".tab").nth(i)
        classes = tab.locator("tbody tr").evaluate_all("rows => rows.map(r => r.className)")
        if len(set(classes)) > 1:
            break
    else:
        pytest.fail("no system tab with more than one status")
    status = classes[0].removeprefix("status-")
    tab.locator("input.filter").fill(status)
    rows = tab.locator("tbody tr")
    shown = [r for r in range(rows.count()) if rows.nth(r).is_visible()]
    assert 0 < len(shown) < len(classes) and all(status in rows.nth(r).inner_text() for r in shown)
    colour = rows.nth(shown[0]).evaluate("r => getComputedStyle(r).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
    page.close()
