"""Compare and trends over a real store, a real ``assay serve`` and Debian's Chromium.

The stocked store holds two runs of ``web/shop@1``: the second agent version
regresses ``greets``. A third version (``AGENT_V3``) also fixes ``flaky``, so
a comparison has a flip each way. For drift, ``WORLDLY`` answers by an
environment variable its digest does not cover: two batteries of one
version then flip a public case and a hidden one (the world moved).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from .conftest import AGENT, CANARY, SUITE, Served, Stocked, Watched, run_shop, write_shop

pytestmark = pytest.mark.real

#: Fixes ``flaky`` (answers it as asked), and still answers ``greets`` in lower case.
AGENT_V3 = AGENT.replace(
    'return {"reply": text.upper()}',
    'return {"reply": text if "quiet" in text else text.lower() if "hello" in text '
    'else text.upper()}')

#: One agent version whose answers move with the world (``WORLD``), not with its code:
#: when the world moved, ``greets`` regresses and the first hidden case is fixed.
WORLDLY = AGENT.replace("import json", "import json\nimport os").replace(
    'return {"reply": text.upper()}',
    'moved = os.environ.get("WORLD") == "moved"\n'
    '    if moved and "hidden-input" in text:\n'
    '        return {"reply": text.replace("-hidden-input", "-expected")}\n'
    '    return {"reply": text.lower() if moved and "hello" in text else text.upper()}')

SVG = "{http://www.w3.org/2000/svg}"


def api_compare(served: Served, base: str, cand: str, **more: str) -> Any:
    return served.get("/api/compare", params={"base": base, "cand": cand, **more})


def test_the_twin_is_what_assay_compare_json_writes(stocked: Stocked, served: Served) -> None:
    done = stocked.project.assay("compare", stocked.first, stocked.second, "--json", "-")
    assert done.code == 1, done.err  # worse: greets regressed
    answer = api_compare(served, stocked.first, stocked.second)
    assert answer.status_code == 200
    assert answer.json() == json.loads(done.out)
    assert answer.json()["schema"] == "assay.compare/1"
    assert answer.json()["verdict"] == "worse"
    rows = {row["case"]: row for row in answer.json()["rows"]}
    assert rows["greets"]["change"] == "regressed"
    assert sorted(label for label in rows if label.startswith("holdout-")) == [
        "holdout-1", "holdout-2"]
    assert CANARY not in answer.text


def test_the_page_lists_flips_first_highlighted_and_holdouts_by_label_only(
        stocked: Stocked, served: Served) -> None:
    write_shop(stocked.project, AGENT_V3)
    # ``hostile`` now asks for another answer: its row is non-comparable (assertions).
    stocked.project.write("evals/shop.suite.yaml",
                          SUITE.replace("equals: calm}", "equals: calmer}"))
    third = run_shop(stocked.project)["run_id"]
    data = api_compare(served, stocked.first, third).json()
    changes = {row["case"]: row["change"] for row in data["rows"]}
    assert changes["greets"] == "regressed" and changes["flaky"] == "fixed"
    assert data["verdict"] == "worse"

    html = served.get("/compare", params={"base": stocked.first, "cand": third}).text
    shown = re.findall(r'<tr class="([a-z-]+) ([a-z-]+)" data-case="([^"]+)"', html)
    # Flips first, the regression before the fix; then the rows that are not aligned;
    # then the unchanged ones in the runs' order.
    assert shown == [("regressed", "aligned", "greets"), ("fixed", "aligned", "flaky"),
                     ("same", "non-comparable", "hostile"), ("same", "aligned", "breaks"),
                     ("same", "aligned", "holdout-1"), ("same", "aligned", "holdout-2")]
    hostile = html[html.index('data-case="hostile"'):]
    assert "differs: assertions" in hostile[:hostile.index("</tr>")]
    assert '<span class="holdout">holdout-1</span>' in html
    assert "Worse: 1 aligned case(s) regressed." in html
    # One regressed and one fixed: as many passed on each side.
    assert re.search(r'class="delta flat">\+0<', html)

    flips = served.get("/compare", params={"base": stocked.first, "cand": third,
                                            "rows": "flips"}).text
    assert re.findall(r'data-case="([^"]+)"', flips) == ["greets", "flaky"]
    assert "4 other row(s) not shown." in flips
    changed = served.get("/compare", params={"base": stocked.first, "cand": third,
                                              "rows": "changes"}).text
    assert re.findall(r'data-case="([^"]+)"', changed) == ["greets", "flaky", "hostile"]
    for text in (html, flips, json.dumps(data)):
        assert CANARY not in text


def test_unknown_runs_and_bad_parameters_are_named(stocked: Stocked, served: Served) -> None:
    missing = served.get("/compare", params={"base": "nope-1", "cand": stocked.second})
    assert missing.status_code == 404 and "no run nope-1 in this store" in missing.text
    assert api_compare(served, stocked.first, "nope-2").json() == {
        "error": "no run nope-2 in this store", "status": 404}
    hostile = served.get("/compare", params={"base": "<script>x()</script>",
                                             "cand": stocked.second})
    assert hostile.status_code == 404
    assert "<script>x()" not in hostile.text and "&lt;script&gt;x()" in hostile.text
    assert served.get("/api/compare", params={"cand": "nope-3"}).status_code == 404

    views = api_compare(served, stocked.first, stocked.second, rows="weird")
    assert views.status_code == 400 and "rows is all, changes or flips" in views.text
    tolerance = api_compare(served, stocked.first, stocked.second, cost_tolerance="-1")
    assert tolerance.status_code == 400 and "cost-tolerance" in tolerance.json()["error"]
    typed = api_compare(served, stocked.first, stocked.second, cost_tolerance="lots")
    assert typed.status_code == 400 and "cost_tolerance" in typed.json()["error"]
    for answer in (missing, views, tolerance, typed):
        assert "Traceback" not in answer.text


def test_the_form_suggests_the_run_before_the_candidate(stocked: Stocked,
                                                        served: Served) -> None:
    form = served.get("/api/compare", params={"cand": stocked.second}).json()
    assert (form["base"], form["cand"], form["suite"]) == (stocked.first, stocked.second,
                                                           "web/shop@1")
    assert [run["run_id"] for run in form["choices"]] == [stocked.second, stocked.first]
    picked = served.get("/api/compare", params={"base": stocked.first}).json()
    assert picked["cand"] == stocked.second
    blank = served.get("/compare")
    assert blank.status_code == 200 and 'list="recent-runs"' in blank.text
    assert CANARY not in blank.text


def wilson_by_hand(passed: int, total: int) -> tuple[float, float]:
    """SPEC §5's interval, from its formula (z = 1.96): centre ∓ half."""
    z = 1.959963984540054
    p = passed / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z / (1 + z * z / total) * (p * (1 - p) / total + z * z / (4 * total ** 2)) ** 0.5
    return centre - half, centre + half


def chart_marks(html: str, split: str) -> tuple[ET.Element, list[ET.Element]]:
    found = re.search(r'<svg class="chart trend-chart"[^>]*data-split="' + split + r'".*?</svg>',
                      html, re.S)
    assert found, f"no {split} chart"
    svg = ET.fromstring(found.group(0))
    return svg, svg.findall(f"{SVG}a")


def test_trends_draw_each_run_with_its_interval_and_say_what_drift_says(
        stocked: Stocked, served: Served) -> None:
    write_shop(stocked.project, WORLDLY)
    third = run_shop(stocked.project)["run_id"]
    done = stocked.project.assay("run", "evals", "--json", "r.json",
                                 env={"WORLD": "moved"})
    assert done.code in (0, 1), done.err
    fourth = json.loads((stocked.project.root / "r.json").read_text().splitlines()[0])["run_id"]
    runs = [stocked.first, stocked.second, third, fourth]

    data = served.get("/api/trends", params={"suite": "web/shop@1"}).json()
    assert [point["run_id"] for point in data["points"]] == runs
    first = data["points"][0]
    # 1 of 4 public cases passed: Wilson 95% is (0.0456, 0.6994) by hand.
    assert (first["public"]["passed"], first["public"]["total"]) == (1, 4)
    assert first["public"]["low"] == pytest.approx(0.0456, abs=5e-5)
    assert first["public"]["high"] == pytest.approx(0.6994, abs=5e-5)
    assert (first["public"]["low"], first["public"]["high"]) == pytest.approx(
        wilson_by_hand(1, 4))
    # Hidden apart, never blended: the moved world fixed one of the two hidden cases.
    assert [(p["hidden"]["passed"], p["hidden"]["total"]) for p in data["points"]] == [
        (1, 2), (1, 2), (1, 2), (2, 2)]
    assert data["points"][0]["hidden"]["low"] == pytest.approx(wilson_by_hand(1, 2)[0])
    assert data["points"][3]["hidden"]["high"] == 1.0  # n of n: the bound is exact
    assert [v["runs"] for v in data["versions"]] == [1, 1, 2]

    html = served.get("/trends", params={"suite": "web/shop@1"}).text
    for split in ("public", "hidden"):
        svg, marks = chart_marks(html, split)
        assert [mark.get("data-run") for mark in marks] == runs
        top, height = float(svg.get("data-top", "")), float(svg.get("data-height", ""))
        for mark, point in zip(marks, data["points"], strict=True):
            rate = point[split]
            whisker = mark.find(f"{SVG}line[@class='whisker']")
            dot = mark.find(f"{SVG}circle")
            assert whisker is not None and dot is not None
            assert float(whisker.get("y1", "")) == pytest.approx(
                top + (1 - rate["high"]) * height, abs=0.01)
            assert float(whisker.get("y2", "")) == pytest.approx(
                top + (1 - rate["low"]) * height, abs=0.01)
            assert float(dot.get("cy", "")) == pytest.approx(
                top + (1 - rate["rate"]) * height, abs=0.01)
            assert whisker.get("x1") == dot.get("cx")
            assert mark.get("href") == f"/runs/{point['run_id']}"
    # Slots are spread left to right in the order the runs started.
    _, marks = chart_marks(html, "public")
    xs = [float(dot.get("cx", "")) for mark in marks for dot in mark.iter(f"{SVG}circle")]
    assert xs == sorted(xs) and len(set(xs)) == 4

    drift = stocked.project.assay("drift", "web/shop@1", "--json", "-")
    assert drift.code == 1, drift.err
    assert data["drift"] == [json.loads(drift.out)]
    assert data["drift_versions"] == 1
    notice = data["drift"][0]
    assert notice["status"] == "drift"
    assert (notice["base"]["run_id"], notice["cand"]["run_id"]) == (third, fourth)
    assert {(f["case"], f["change"]) for f in notice["flipped"]} == {
        ("greets", "regressed"), ("holdout-1", "fixed")}
    assert '<section class="drift-notice drift"' in html
    assert '<span class="holdout">holdout-1</span>' in html
    for text in (html, json.dumps(data)):
        assert CANARY not in text


def test_trends_refuse_an_unknown_suite_and_list_the_known_ones(served: Served) -> None:
    unknown = served.get("/trends", params={"suite": "no/such@1"})
    assert unknown.status_code == 404 and "no run of suite no/such@1" in unknown.text
    listed = served.get("/api/trends").json()
    assert listed["suites"] == ["web/shop@1"] and listed["points"] == []
    assert served.get("/api/trends", params={"suite": "web/shop@1",
                                             "page": "0"}).status_code == 400


def test_in_the_browser_pick_two_runs_and_see_the_regression(
        stocked: Stocked, served: Served, page: Watched) -> None:
    from playwright.sync_api import expect

    tab = page.page
    tab.goto(served.url + "/compare")
    # Pick the first run as the base: the form suggests the newer one as the candidate.
    tab.locator("tr", has_text=stocked.first).get_by_role("link", name="base").click()
    expect(tab.locator("#base")).to_have_value(stocked.first)
    expect(tab.locator("#cand")).to_have_value(stocked.second)
    tab.get_by_role("button", name="Compare").click()

    row = tab.locator('tr[data-case="greets"]')
    expect(row).to_have_class(re.compile(r"\bregressed\b"))
    # The highlight is drawn (the stylesheet applied under the CSP), not only named.
    expect(row.locator("td").first).to_have_css("background-color", "rgb(253, 236, 234)")
    expect(tab.locator("h1 .outcome")).to_have_text("worse")
    expect(tab.locator("tr.regressed")).to_have_count(1)
    assert CANARY not in tab.content()

    tab.get_by_role("link", name=re.compile("^trends of")).click()
    expect(tab.locator("#chart-public svg a.mark")).to_have_count(2)
    expect(tab.locator("#chart-hidden svg a.mark")).to_have_count(2)
    assert page.clean(), (page.errors, page.violations)
