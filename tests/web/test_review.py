"""The review queue in the browser: the same items and the same decisions as ``assay review``.

Over the stocked store (two sealed runs whose failing trials were queued at
the seal, hidden ones as holdout-N), a real ``assay serve`` and Chromium.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .conftest import CANARY, Served, Stocked, Watched

pytestmark = pytest.mark.real

#: A note a reviewer might paste: script, markup, an event handler, a template.
HOSTILE_NOTE = ('<script>window.__pwned = 3</script><img src=x onerror="window.__pwned = 4">'
                '{{ 7*7 }} </textarea>')


def exported(stocked: Stocked, *more: str) -> list[dict[str, Any]]:
    """What ``assay review --export -`` prints, one dict a line."""
    done = stocked.project.assay("review", "--export", "-", *more)
    assert done.code == 0, done.err
    return [json.loads(line) for line in done.out.splitlines()]


def post(served: Served, path: str, **form: str) -> Any:
    """A form POST as the page sends it (from the workbench's own origin)."""
    return served.client.post(path, data=form, headers={"origin": served.url})


def verified_ledger(served: Served) -> bool:
    """Whether the ledger page says the ledger holds, once its whole check is done."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        checked = served.get("/api/ledger/verification").json()["verification"]
        if checked["status"] != "checking" and not checked["checking_since"]:
            return checked["status"] == "verified"
        time.sleep(0.05)
    raise AssertionError("the ledger's whole check did not end")


def first_public(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next(item for item in items if not item["hidden"])


def first_hidden(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next(item for item in items if item["hidden"])


def test_the_queue_lists_what_assay_review_exports_oldest_first(stocked: Stocked,
                                                                 served: Served) -> None:
    listed = served.get("/api/review").json()
    assert listed["items"] == exported(stocked)
    assert listed["total"] == listed["open"] == len(listed["items"]) > 0
    assert listed["items"][0]["run_id"] == stocked.first  # the older run's items first
    every = served.get("/api/review", params={"show": "all"}).json()
    assert every["items"] == exported(stocked, "--all")
    assert served.get("/api/review", params={"show": "decided"}).json()["items"] == []
    html = served.get("/review").text
    for item in listed["items"]:
        assert f'href="/review/{item["item"]}"' in html


def test_a_long_queue_is_paged_in_the_order_the_export_gives(stocked: Stocked,
                                                             served: Served) -> None:
    from assay.store.database import open_store
    from assay.store.reviews.items import add_item

    store = open_store(stocked.db)
    try:
        for n in range(1, 61):  # sampled calls, queued by hand after the runs' items
            add_item(store, {"source": "online", "split": "public", "label": f"call {n}",
                             "outcome": "fail", "reason": f"sample {n}",
                             "added_at": f"2099-01-01T00:00:{n:02d}.000Z"})
    finally:
        store.close()
    first = served.get("/api/review").json()
    second = served.get("/api/review", params={"page": 2}).json()
    assert (first["page"], first["pages"], len(first["items"])) == (1, 2, 50)
    assert first["items"] + second["items"] == exported(stocked)
    assert second["items"][-1]["case"] == "call 60"
    assert 'rel="next" href="/review?show=open&amp;page=2"' in served.get("/review").text
    assert served.get("/api/review", params={"page": 3}).json()["items"] == []


def test_deciding_on_the_page_seals_a_review_entry_then_shows_the_next_item(
        stocked: Stocked, served: Served) -> None:
    items = served.get("/api/review").json()["items"]
    chosen, following = items[0], items[1]
    done = post(served, f"/review/{chosen['item']}", verdict="needs-fix",
                note="the reply must be calm", reviewer="Ada Lovelace")
    assert done.status_code == 303
    assert done.headers["location"] == f"/review/{following['item']}"
    assert "assay_reviewer=" in done.headers["set-cookie"]

    decided = {line["item"]: line for line in exported(stocked, "--all")}[chosen["item"]]
    assert (decided["verdict"], decided["reviewer"], decided["note"]) == \
        ("needs-fix", "Ada Lovelace", "the reply must be calm")
    assert chosen["item"] not in [line["item"] for line in exported(stocked)]
    listed = stocked.project.assay("review", "--list", "--all").out
    assert "needs-fix by Ada Lovelace" in listed

    # The decision is the newest ledger entry, a review entry for this item, and it holds.
    ledger = served.get("/api/ledger").json()
    newest = ledger["entries"][0]
    assert (newest["kind"], newest["review_item"]) == ("review", chosen["item"])
    assert verified_ledger(served)
    item = served.get(f"/api/review/{chosen['item']}").json()
    assert item["entry"] == newest["index"] and item["item"]["verdict"] == "needs-fix"

    # The reviewer's name is remembered for the next item's form.
    nxt = served.get(f"/review/{following['item']}")
    assert 'value="Ada Lovelace"' in nxt.text


def test_a_second_decision_is_refused_naming_who_decided(stocked: Stocked,
                                                        served: Served) -> None:
    item = served.get("/api/review").json()["items"][0]["item"]
    assert post(served, f"/review/{item}", verdict="approved", note="",
                reviewer="ada").status_code == 303
    again = post(served, f"/review/{item}", verdict="rejected", note="no", reviewer="bob")
    assert again.status_code == 409
    assert "decided already: approved by ada" in again.text
    twin = served.client.post(f"/api/review/{item}", data={"verdict": "rejected",
                                                             "reviewer": "bob"})
    assert twin.status_code == 409 and "approved by ada" in twin.json()["error"]
    kept = {line["item"]: line for line in exported(stocked, "--all")}[item]
    assert (kept["verdict"], kept["reviewer"]) == ("approved", "ada")
    reviews = [e for e in served.get("/api/ledger").json()["entries"] if e["kind"] == "review"]
    assert len(reviews) == 1


def test_a_bad_verdict_or_no_reviewer_is_a_400_naming_the_field(stocked: Stocked,
                                                               served: Served) -> None:
    item = served.get("/api/review").json()["items"][0]["item"]
    bad = post(served, f"/review/{item}", verdict="maybe", note="kept", reviewer="ada")
    assert bad.status_code == 400 and "verdict: choose approved, rejected or needs-fix" \
        in bad.text
    assert ">kept</textarea>" in bad.text  # what was typed is still there
    nameless = post(served, f"/review/{item}", verdict="approved", reviewer="   ")
    assert nameless.status_code == 400 and "reviewer: give your name" in nameless.text
    twin = served.client.post(f"/api/review/{item}", data={"verdict": "approved"})
    assert twin.status_code == 400 and twin.json()["error"].startswith("reviewer:")
    assert all(line["verdict"] is None for line in exported(stocked, "--all"))
    assert post(served, "/review/99999", verdict="approved", reviewer="a").status_code == 404


def test_unknown_items_and_bad_parameters_are_named(served: Served) -> None:
    missing = served.get("/review/424242")
    assert missing.status_code == 404 and "no review item 424242" in missing.text
    assert served.get("/api/review/424242").json()["error"] == \
        "no review item 424242 in this store"
    assert served.get("/review/abc").status_code == 400
    wrong = served.get("/api/review", params={"show": "later"})
    assert wrong.status_code == 400 and "open, decided, all" in wrong.json()["error"]


def test_a_hidden_item_is_holdout_n_and_nothing_else(stocked: Stocked, served: Served) -> None:
    listed = served.get("/api/review", params={"show": "all"})
    hidden = first_hidden(listed.json()["items"])
    assert hidden["case"].startswith("holdout-") and hidden["reason"] is None
    twin = served.get(f"/api/review/{hidden['item']}")
    data = twin.json()
    assert data["withheld"] is True and data["trace"] is None and data["verdicts"] == []
    page = served.get(f"/review/{hidden['item']}")
    assert "Content withheld" in page.text and hidden["case"] in page.text
    # Decided, its note stays private too (a reviewer may quote what they were told).
    assert post(served, f"/review/{hidden['item']}", verdict="rejected",
                note=f"{CANARY} as told", reviewer="ada").status_code == 303
    after = [served.get(path) for path in (
        f"/review/{hidden['item']}", f"/api/review/{hidden['item']}",
        "/review?show=all", "/api/review?show=all", "/review?show=decided", "/review",
        "/api/review")]
    for answer in [listed, twin, page, *after]:
        assert answer.status_code == 200
        assert CANARY not in answer.text
    assert json.loads(after[1].text)["item"]["note"] is None


def test_a_public_item_shows_its_trace_and_verdicts_escaped(stocked: Stocked,
                                                            served: Served) -> None:
    items = served.get("/api/review").json()["items"]
    hostile = next(item for item in items if item["case"] == "hostile")
    data = served.get(f"/api/review/{hostile['item']}").json()
    assert data["withheld"] is False
    assert "window.__pwned = 1" in data["trace"]["output"]
    assert data["verdicts"][0]["check"] == "equals" and data["verdicts"][0]["outcome"] == "fail"
    html = served.get(f"/review/{hostile['item']}").text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert "<script>window" not in html and "<img src=x" not in html


def test_a_hostile_note_is_inert_in_the_browser(stocked: Stocked, served: Served,
                                                page: Watched) -> None:
    item = first_public(served.get("/api/review").json()["items"])["item"]
    assert post(served, f"/review/{item}", verdict="rejected", note=HOSTILE_NOTE,
                reviewer='<b onclick="x()">eve</b>').status_code == 303
    html = served.get(f"/review/{item}").text
    assert "&lt;script&gt;window.__pwned = 3" in html and "<script>window" not in html
    tab = page.page
    tab.goto(f"{served.url}/review/{item}")
    from playwright.sync_api import expect

    expect(tab.locator("pre.note")).to_have_text(HOSTILE_NOTE)
    expect(tab.locator(".decision .reviewer")).to_have_text('<b onclick="x()">eve</b>')
    tab.goto(f"{served.url}/review?show=decided")
    expect(tab.locator("table.queue")).to_contain_text("eve")
    assert tab.evaluate("window.__pwned") is None
    assert page.clean(), page.errors + page.violations


def test_a_reviewer_works_the_queue_in_the_browser(stocked: Stocked, served: Served,
                                                   page: Watched) -> None:
    from playwright.sync_api import expect

    items = served.get("/api/review").json()["items"]
    first, second = items[0], items[1]
    tab = page.page
    tab.goto(f"{served.url}/review")
    expect(tab.locator("h1")).to_contain_text(f"{len(items)} open")
    tab.locator(f'a[href="/review/{first["item"]}"]').click()
    expect(tab.locator("h1")).to_contain_text(f"Review item {first['item']}:")
    tab.get_by_label("rejected").check()
    tab.get_by_label("Note").fill("answers with markup, not calm")
    tab.get_by_label("Reviewer").fill("Grace")
    tab.get_by_role("button", name="Decide and go to the next item").click()
    expect(tab).to_have_url(f"{served.url}/review/{second['item']}")
    expect(tab.locator("h1")).to_contain_text(f"Review item {second['item']}:")
    expect(tab.get_by_label("Reviewer")).to_have_value("Grace")  # remembered
    tab.get_by_role("link", name="← the queue").click()
    expect(tab.locator("h1")).to_contain_text(f"{len(items) - 1} open")
    expect(tab.locator(f'a[href="/review/{first["item"]}"]')).to_have_count(0)
    expect(tab.locator(f'a[href="/review/{second["item"]}"]')).to_have_count(1)
    decided = {line["item"]: line for line in exported(stocked, "--all")}[first["item"]]
    assert (decided["verdict"], decided["reviewer"]) == ("rejected", "Grace")
    assert page.clean(), page.errors + page.violations


def test_a_decision_from_another_site_is_refused(stocked: Stocked, served: Served) -> None:
    item = served.get("/api/review").json()["items"][0]["item"]
    form = {"verdict": "approved", "reviewer": "mallory"}
    for headers in ({"origin": "http://evil.example"},
                    {"origin": "null"},  # a sandboxed frame, in a browser that does not say
                    {"origin": "null", "sec-fetch-site": "cross-site"},
                    {"sec-fetch-site": "same-site"}):
        refused = served.client.post(f"/review/{item}", data=form, headers=headers)
        assert refused.status_code == 403, headers
    assert all(line["verdict"] is None for line in exported(stocked, "--all"))
    # The page's own plain form POST: Origin null (no-referrer), Sec-Fetch-Site same-origin.
    own = served.client.post(f"/review/{item}", data=form,
                             headers={"origin": "null", "sec-fetch-site": "same-origin"})
    assert own.status_code == 303
