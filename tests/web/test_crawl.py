"""Every page and every JSON twin, crawled: no hidden case's content anywhere, no error,
and in Chromium no console error or Content-Security-Policy violation on any page.

The store is ``stocked``'s (two runs whose hidden cases carry ``CANARY``), with
every trial of theirs queued for review. The crawl starts from the pages the
navigation names and follows every same-origin link it finds, to a bound;
each HTML page's ``/api/`` twin is fetched too.
"""

from __future__ import annotations

from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from .conftest import CANARY, Served, Stocked, Watched, name_versions

pytestmark = pytest.mark.real

#: Enough for every page of two small runs; a crawl that finds fewer is suspect.
MOST = 400


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and name in ("href", "src", "hx-get", "sse-connect", "action"):
                self.links.append(value)


def _crawl(served: Served, seeds: list[str]) -> dict[str, tuple[int, str, str]]:
    """Path → (status, content type, body) for every page reached from ``seeds``."""
    seen: dict[str, tuple[int, str, str]] = {}
    queue = deque(seeds)
    while queue and len(seen) < MOST:
        path = queue.popleft()
        if path in seen:
            continue
        if path.endswith("/events"):  # a live stream: its final event only, sealed runs
            with served.client.stream("GET", path, timeout=10) as answer:
                body = ""
                for chunk in answer.iter_text():
                    body += chunk
                    if "sealed" in body or len(body) > 100_000:
                        break
                seen[path] = (answer.status_code, answer.headers.get("content-type", ""), body)
            continue
        answer = served.get(path)
        kind = answer.headers.get("content-type", "")
        seen[path] = (answer.status_code, kind, answer.text)
        if kind.startswith("text/html"):
            parser = _Links()
            parser.feed(answer.text)
            for link in parser.links:
                absolute = urlsplit(urljoin(served.url + path, link))
                if absolute.netloc != urlsplit(served.url).netloc:
                    continue
                found = absolute.path + (f"?{absolute.query}" if absolute.query else "")
                if not found.startswith("/static/") and found not in seen:
                    queue.append(found)
            if not path.startswith("/api/"):
                queue.append("/api" + path if path != "/" else "/api/runs")
    return seen


def _seeds(stocked: Stocked) -> list[str]:
    name_versions(stocked)
    return ["/", "/runs", "/suites", "/compare", "/trends", "/review", "/ledger", "/agents",
            f"/compare?base={stocked.first}&cand={stocked.second}",
            "/trends?suite=web/shop@1", "/review?show=all"]


def test_no_page_or_twin_holds_a_hidden_case(stocked: Stocked, served: Served) -> None:
    for run_id in (stocked.first, stocked.second):
        for label in ("holdout-1", "holdout-2", "greets"):
            stocked.project.assay("review", "--add", run_id, "--case", label)
    pages = _crawl(served, _seeds(stocked))
    assert len(pages) >= 40, sorted(pages)  # the crawl reached the runs, trials and items
    for path, (status, _kind, body) in pages.items():
        assert CANARY not in body, path
        assert status < 500, (path, status)
    # Every kind of page was reached, with its twin.
    reached = " ".join(pages)
    for part in ("/runs/", "/trials/", "/api/runs/", "/compare?", "/review/", "/ledger",
                 "/trends", "/suites", "/ledger/receipts/", "/agents/shop",
                 "/agents/shop/comparison?"):
        assert part in reached, part
    # Links the pages themselves give all answer (a 4xx link would be a broken page).
    broken = {p: s for p, (s, _k, _b) in pages.items() if s >= 400 and not p.startswith("/api")}
    assert not broken, broken


def test_every_page_renders_clean_under_the_policy(stocked: Stocked, served: Served,
                                                   page: Watched) -> None:
    pages = _crawl(served, _seeds(stocked))
    html = [p for p, (s, kind, _b) in pages.items()
            if kind.startswith("text/html") and s == 200 and not p.startswith("/api/")]
    assert len(html) >= 15, html
    for path in html:
        page.page.goto(served.url + path)
        page.page.wait_for_load_state("load")
        assert CANARY not in page.page.content(), path
        assert page.page.evaluate("typeof window.htmx") == "object", path  # our script ran
        assert page.clean(), (path, page.errors, page.violations)
