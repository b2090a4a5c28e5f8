"""The agent page and a named agent's comparison (SPEC §8, §11), over a real store, a real
``assay serve`` and Debian's Chromium.

``stocked``'s two runs are of two versions of one agent, published under
``shop``; a third version passes every public case and half the hidden ones
(``possibly-tuned``), and runs twice (a drift notice). Hidden cases carry
``CANARY``: the pages and twins show them as counts and ``holdout-N`` only.
"""

from __future__ import annotations

import json
import re

import pytest

from .conftest import CANARY, Served, Stocked, Watched, name_versions, run_shop, write_shop

pytestmark = pytest.mark.real

#: Answers every public case as it expects, and the hidden ones as before (half pass).
TUNED = '''
def agent(input):
    text = str(input)
    answers = {"hello": "HELLO", "hostile": "calm", "quiet please": "quiet please",
               "explode": "never"}
    return {"reply": answers.get(text, text.upper())}
'''


def _third(stocked: Stocked) -> str:
    write_shop(stocked.project, TUNED)
    done = stocked.project.assay("agent", "publish", "python:shop_agent:agent",
                                 "--name", "shop")
    assert done.code == 0, done.err
    run_shop(stocked.project)
    run_shop(stocked.project)
    return done.out.strip()


def test_the_agent_page_shows_versions_scores_warning_drift_and_the_last_change(
        stocked: Stocked, served: Served) -> None:
    first, second = name_versions(stocked)
    third = _third(stocked)

    listed = served.get("/api/agents").json()
    assert listed["agents"] == [{"name": "shop", "versions": 3, "current": third,
                                 "state": "published",
                                 "published_at": listed["agents"][0]["published_at"]}]
    data = served.get("/api/agents/shop").json()
    assert [v["version"] for v in data["versions"]] == [third, second, first]
    assert [v["role"] for v in data["versions"]] == ["current", "previous", None]
    tuned = data["versions"][0]["batteries"]
    assert len(tuned) == 1 and tuned[0]["suite"] == "web/shop@1"
    assert tuned[0]["counts"]["public"] == {"passed": 4, "total": 4}
    assert tuned[0]["counts"]["hidden"] == {"passed": 1, "total": 2}
    assert "possibly-tuned" in tuned[0]["flags"]
    assert data["warnings"] == [{"version": third, "suite": "web/shop@1",
                                 "run_id": tuned[0]["run_id"], "flag": "possibly-tuned"}]
    # Two batteries of the third version: what drift says of them; one each of the others.
    (notice,) = data["versions"][0]["drift"]
    assert notice["schema"] == "assay.drift/1" and notice["status"] == "stable"
    assert notice["cand"]["run_id"] == tuned[0]["run_id"]
    assert data["versions"][1]["drift"] == [] and data["versions"][2]["batteries"][0][
        "run_id"] == stocked.first

    # Current against previous, as `assay compare --agent` says it.
    done = stocked.project.assay("compare", "--agent", "shop", "previous", "current",
                                 "--json", "-")
    cli = json.loads(done.out)
    (summary,) = data["comparisons"]["suites"]
    assert summary["verdict"] == cli["verdict"] == "better"
    assert (summary["base"], summary["cand"]) == (stocked.second, tuned[0]["run_id"])
    assert summary["changes"]["regressed"] == 0 and summary["changes"]["fixed"] >= 3
    twin = served.get("/api/agents/shop/comparison", params={"a": "previous", "b": "current"})
    assert twin.json() == cli
    older = served.get("/api/agents/shop/comparison",
                       params={"a": first[7:20], "b": second}).json()
    assert older["verdict"] == "worse" and older["agent"]["base"]["version"] == first
    assert {row["case"] for row in older["rows"]} >= {"holdout-1", "holdout-2"}

    for path in ("/agents", "/agents/shop", "/agents/shop/comparison", "/api/agents",
                 "/api/agents/shop", "/api/agents/shop/comparison"):
        answer = served.get(path)
        assert answer.status_code == 200 and CANARY not in answer.text, path
        assert CANARY.lower() not in answer.text.lower(), path


def test_bad_names_and_versions_are_named_not_a_crash(stocked: Stocked, served: Served) -> None:
    name_versions(stocked)
    missing = served.get("/api/agents/nobody")
    assert missing.status_code == 404 and "nobody" in missing.json()["error"]
    for params, said in (({"a": "zz"}, "'zz' is not a version of agent shop"),
                         ({"a": "ffff"}, "no version of agent shop starts with sha256:ffff"),
                         ({"suite": "other@1"}, "has no sealed, whole battery of suite other@1")):
        answer = served.get("/api/agents/shop/comparison", params=params)
        assert answer.status_code == 400 and said in answer.json()["error"], answer.text
    page = served.get("/agents/shop/comparison", params={"a": "<script>x</script>"})
    assert page.status_code == 400 and "<script>x" not in page.text


def test_in_the_browser_from_the_agent_list_to_the_comparison(
        stocked: Stocked, served: Served, page: Watched) -> None:
    from playwright.sync_api import expect

    name_versions(stocked)
    _third(stocked)
    tab = page.page
    tab.goto(served.url + "/runs")
    tab.get_by_role("link", name="Agents", exact=True).click()
    tab.get_by_role("link", name="shop", exact=True).click()
    expect(tab.locator("h1")).to_contain_text("Agent shop")
    warning = tab.locator("p.warning.possibly-tuned")
    expect(warning).to_have_count(1)
    # The warning is drawn as one (the stylesheet applied under the CSP), not only named.
    expect(warning).to_have_css("border-left-style", "solid")
    expect(tab.locator("section.agent-version")).to_have_count(3)
    current = tab.locator("section.agent-version").first
    expect(current.locator("h3 .flag")).to_have_text("current")
    expect(current.locator("tr[data-suite='web/shop@1'] td").nth(2)).to_contain_text("(4/4)")
    expect(current.locator("tr[data-suite='web/shop@1'] td").nth(3)).to_contain_text("(1/2)")
    expect(current.locator("section.drift-notice")).to_have_count(1)
    expect(tab.locator("section.agent-comparison .outcome")).to_have_text("better")
    assert CANARY not in tab.content()

    tab.get_by_role("link", name="the comparison").click()
    expect(tab.locator("p.agent-sides")).to_contain_text("(previous)")
    expect(tab.locator("h1 .outcome")).to_have_text("better")
    expect(tab.locator("tr.fixed")).not_to_have_count(0)
    assert re.search(r"holdout-\d", tab.content()) and CANARY not in tab.content()
    # The hostile answer stayed text on every page: no script of its ran.
    assert tab.evaluate("typeof window.__pwned") == "undefined"
    assert page.clean(), (page.errors, page.violations)
