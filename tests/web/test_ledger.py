"""The ledger page and a run's receipt, over a real store, ``assay serve`` and Chromium.

The page must say what ``assay ledger verify`` says (a tampered row names
the first bad entry), check only what is new on later views, and hand out
the receipt ``assay receipt RUN`` writes, which verifies offline and holds
no hidden case.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from typing import Any

import pytest

from assay.store.runs.record import save_run

from .conftest import CANARY, Served, Stocked, Watched

pytestmark = pytest.mark.real


def tamper(stocked: Stocked, index: int) -> None:
    """Edit one ledger row in place, as someone with the database file could."""
    with sqlite3.connect(stocked.project.root / ".assay" / "assay.db") as db:
        db.execute('UPDATE ledger SET kind = ? WHERE "index" = ?',
                   ("gate" if index % 2 else "review", index))


def cli_verify(stocked: Stocked) -> tuple[int, str]:
    done = stocked.project.assay("ledger", "verify")
    return done.code, done.out.strip()


def verification(served: Served) -> dict[str, Any]:
    return served.get("/api/ledger/verification").json()["verification"]  # type: ignore[no-any-return]


def settled(served: Served, after: str = "") -> dict[str, Any]:
    """The verification once the whole check (started by a view or a POST) is done."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        checked = verification(served)
        if not checked["checking_since"] and (checked["checked_in_full_at"] or "") > after:
            return checked
        time.sleep(0.05)
    raise AssertionError(f"the whole check did not end: {checked}")


def test_the_stocked_ledger_verifies_as_the_command_says(stocked: Stocked,
                                                         served: Served) -> None:
    code, said = cli_verify(stocked)
    assert code == 0
    count = int(re.match(r"ledger: (\d+) entries verify", said).group(1))  # type: ignore[union-attr]
    first = served.get("/api/ledger").json()["verification"]  # the whole check starts
    assert (first["status"], first["entries"]) == ("checking", None)
    assert first["checking_since"]
    settled(served)
    data = served.get("/api/ledger").json()
    checked = data["verification"]
    assert (checked["status"], checked["entries"], checked["first_bad"]) == \
        ("verified", count, None)
    assert f"{checked['heads']} heads" in said
    assert checked["checked_at"] >= checked["checked_in_full_at"]
    # The newest head is the one the store signed at the second run's seal.
    head = data["head"]
    published = json.loads(stocked.project.assay("ledger", "head").out)
    assert (head["size"], head["root"], head["fingerprint"]) == \
        (published["size"], published["root"], published["fingerprint"]) == \
        (count, published["root"], checked["key"])
    # Entries newest first, the runs' seals linked to their runs.
    entries = data["entries"]
    assert [e["index"] for e in entries] == list(range(count - 1, -1, -1))
    sealed = {e["run_id"]: e["index"] for e in entries if e["kind"] == "run-sealed"}
    assert sealed == {stocked.first: stocked.reports[0]["seal"]["entry"],
                      stocked.second: stocked.reports[1]["seal"]["entry"]}
    html = served.get("/ledger").text
    assert "verified" in html and published["root"] in html
    assert f'href="/ledger/receipts/{stocked.first}"' in html
    assert CANARY not in html and CANARY not in json.dumps(data)


def test_a_tampered_row_shows_broken_naming_the_first_bad_entry(stocked: Stocked) -> None:
    tamper(stocked, 5)
    code, said = cli_verify(stocked)
    assert code == 1 and said.startswith("ledger: entry 5:")
    server = Served(stocked.project.root)
    try:
        checked = settled(server)
        assert (checked["status"], checked["first_bad"]) == ("broken", 5)
        assert f"ledger: {checked['reason']}" == said
        html = server.get("/ledger").text
        assert "broken" in html and 'href="/ledger?at=5#entry-5">#5</a>' in html
        assert 'id="entry-5" class="gate bad"' in html
    finally:
        server.stop()


def test_later_views_check_what_is_new_and_verifying_again_finds_an_old_edit(
        stocked: Stocked, served: Served) -> None:
    first = settled(served)
    # A decision appends a review entry: the next view checks it alone.
    item = served.get("/api/review").json()["items"][0]["item"]
    assert served.client.post(f"/review/{item}", data={"verdict": "approved",
                                                       "reviewer": "ada"}).status_code == 303
    second = verification(served)
    assert (second["status"], second["entries"]) == ("verified", first["entries"] + 1)
    assert second["checked_in_full_at"] == first["checked_in_full_at"]
    assert second["checked_at"] > first["checked_at"]
    # An entry edited after the whole ledger was read is found when it is read again.
    tamper(stocked, 3)
    assert verification(served)["checked_in_full_at"] == first["checked_in_full_at"]
    again = served.client.post("/ledger/verify", headers={"origin": served.url})
    assert again.status_code == 303 and again.headers["location"] == "/ledger"
    broken = settled(served, after=first["checked_in_full_at"])
    assert (broken["status"], broken["first_bad"]) == ("broken", 3)
    assert broken["checked_in_full_at"] > first["checked_in_full_at"]
    assert verification(served)["first_bad"] == 3  # it stays broken


def test_an_edit_of_the_newest_entry_is_seen_on_the_next_view(stocked: Stocked,
                                                              served: Served) -> None:
    checked = settled(served)
    tamper(stocked, checked["entries"] - 1)
    broken = verification(served)
    assert (broken["status"], broken["first_bad"]) == ("broken", checked["entries"] - 1)


def test_the_receipt_is_the_commands_and_verifies_offline(stocked: Stocked,
                                                          served: Served) -> None:
    got = served.get(f"/ledger/receipts/{stocked.first}")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("application/json")
    assert got.headers["content-disposition"] == \
        f'attachment; filename="receipt-{stocked.first}.json"'
    assert CANARY not in got.text
    saved = stocked.project.root / "web-receipt.json"
    saved.write_text(got.text)
    checked = stocked.project.assay("receipt", "verify", "web-receipt.json")
    assert checked.code == 0 and checked.out.startswith("receipt verifies"), checked.out
    made = stocked.project.assay("receipt", stocked.first)
    assert made.code == 0, made.err
    cli = json.loads(made.out)
    web = got.json()
    assert web == cli  # nothing was appended in between: the same head, the same bytes
    assert got.text == made.out
    # Once the server holds the verified tree, the proof is read off it: the same receipt.
    settled(served)
    assert served.get(f"/ledger/receipts/{stocked.first}").text == made.out
    assert web["run"]["run_id"] == stocked.first and web["entry"]["kind"] == "run-sealed"


def test_a_receipt_needs_a_stored_sealed_run(stocked: Stocked, served: Served) -> None:
    from assay.model import Report
    from assay.store.database import open_store

    missing = served.get("/ledger/receipts/no-such-run")
    assert missing.status_code == 404 and "no run no-such-run" in missing.text
    report = Report.model_validate(
        {**stocked.reports[0], "run_id": "imported-run", "seal": None})
    store = open_store(stocked.db)
    try:
        save_run(store, report)  # stored whole, never sealed into the ledger
    finally:
        store.close()
    unsealed = served.get("/ledger/receipts/imported-run")
    assert unsealed.status_code == 400
    assert "run imported-run has no run-sealed ledger entry" in unsealed.text
    assert served.get("/api/ledger/receipts/imported-run").json()["status"] == 400


def test_an_open_run_has_no_receipt_yet(stocked: Stocked, served: Served) -> None:
    from assay.engine import RunStart
    from assay.engine.record import RunRecorder
    from assay.model import Case, TrialResult
    from assay.store.database import open_store
    from assay.store.runs.record import LocalSink
    from assay.suites import discover

    loaded = discover([stocked.project.root / "evals"], None)[0]
    store = open_store(stocked.db)
    try:  # registered, one trial recorded, never sealed (running, or stopped part-way)
        recorder = RunRecorder(LocalSink(store), batch=1)
        recorder.register(RunStart("open-run", 1, "2026-12-01T00:00:00Z",
                                   "python:shop_agent:agent", "sha256:open"), loaded, 1, {})
        recorder.record(Case(id="greets"), TrialResult(n=1, outcome="pass"))
        recorder.close()
    finally:
        store.close()
    refused = served.get("/ledger/receipts/open-run")
    assert refused.status_code == 400 and "run open-run is not sealed" in refused.text


def test_the_ledger_page_in_the_browser(stocked: Stocked, served: Served,
                                        page: Watched) -> None:
    from playwright.sync_api import expect

    tab = page.page
    tab.goto(f"{served.url}/ledger")
    expect(tab.locator(".verification .outcome")).to_have_text("verified")
    with tab.expect_download() as info:
        tab.locator(f'a[href="/ledger/receipts/{stocked.first}"]').click()
    assert info.value.suggested_filename == f"receipt-{stocked.first}.json"
    before = settled(served)["checked_in_full_at"]
    tab.get_by_role("button", name="Verify the whole ledger again").click()
    expect(tab).to_have_url(f"{served.url}/ledger")
    # The page asks again while the whole ledger is read, then shows the new time.
    expect(tab.get_by_role("button", name="Verify the whole ledger again")).to_be_visible()
    expect(tab.locator(".verification .outcome")).to_have_text("verified")
    assert settled(served)["checked_in_full_at"] > before
    assert page.clean(), page.errors + page.violations


def test_the_verification_part_is_a_page_unless_htmx_asks(served: Served) -> None:
    settled(served)
    whole = served.get("/ledger/verification")
    assert whole.status_code == 200 and "<h1>Ledger verification</h1>" in whole.text
    assert '<script src="/static/vendor/htmx' in whole.text
    part = served.get("/ledger/verification", headers={"hx-request": "true"})
    assert part.text.lstrip().startswith('<section id="verification" class="verification '
                                         'verified"')
    assert "<html" not in part.text
    followed = served.get("/ledger/verify")  # the form's action, as a link
    assert followed.status_code == 303 and followed.headers["location"] == "/ledger"


def test_a_review_entry_names_its_item_and_never_its_hidden_case(stocked: Stocked,
                                                                 served: Served) -> None:
    items = served.get("/api/review").json()["items"]
    hidden = next(item for item in items if item["hidden"])["item"]
    assert served.client.post(f"/review/{hidden}", data={"verdict": "rejected",
                                                         "reviewer": "ada"}).status_code == 303
    # The entry's content holds the hidden case's id (it must find its trial): the page
    # takes the item's number from it, and nothing else.
    data = served.get("/api/ledger").json()
    newest = data["entries"][0]
    assert (newest["kind"], newest["review_item"], newest["run_id"]) == \
        ("review", hidden, None)
    html = served.get("/ledger").text
    assert f'<a href="/review/{hidden}">review item {hidden}</a>' in html
    assert CANARY not in html and CANARY not in json.dumps(data)


def test_no_receipt_from_a_ledger_that_does_not_hold(stocked: Stocked, served: Served) -> None:
    settled(served)
    assert served.get(f"/ledger/receipts/{stocked.first}").status_code == 200
    entry = stocked.reports[0]["seal"]["entry"]
    with sqlite3.connect(stocked.project.root / ".assay" / "assay.db") as db:
        [digest] = db.execute('SELECT content_digest FROM ledger WHERE "index" = ?',
                              (entry,)).fetchone()
        db.execute("UPDATE blobs SET content = ? WHERE digest = ?",
                   (json.dumps({"run_id": "someone-else"}).encode(), digest))
    refused = served.get(f"/ledger/receipts/{stocked.first}")
    assert refused.status_code == 409
    assert "the stored ledger does not hold (content:" in refused.text
    assert "someone-else" not in refused.text
    code, said = cli_verify(stocked)
    assert code == 1 and f"entry {entry}:" in said
