"""The runs list and a run's page, over a real store and a real ``assay serve``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import CANARY, Project, Served, Stocked

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from user_simulator import BOOKING, user_server  # noqa: E402

#: The booking agent of tests/user_simulator.py, as a module of the project.
TALK_AGENT = """
def agent(messages):
    said = messages[-1]["content"]
    return "Booked: Friday, 9:00." if "9am" in said else "Which flight on Friday: 9am or 5pm?"
"""

pytestmark = pytest.mark.real


def test_the_runs_page_lists_both_runs_newest_first_with_public_and_hidden_apart(
        stocked: Stocked, served: Served) -> None:
    listed = served.get("/api/runs").json()
    assert [run["run_id"] for run in listed["runs"]] == [stocked.second, stocked.first]
    first = listed["runs"][1]
    report = stocked.reports[0]
    assert first["scores"]["public"] == report["scores"]["public"]
    assert first["scores"]["hidden"] == report["scores"]["hidden"]
    assert first["evidence"] == report["evidence"]
    assert first["seal"] == report["seal"]
    assert first["counts"]["hidden"]["total"] == 2
    html = served.get("/runs").text
    for run_id in (stocked.first, stocked.second):
        assert f'href="/runs/{run_id}"' in html
    assert CANARY not in html and CANARY not in str(listed)


def test_filters_keep_only_matching_runs(stocked: Stocked, served: Served) -> None:
    version = served.get("/api/runs").json()["runs"][1]["target"]["version"]
    kept = served.get("/api/runs", params={"version": version[7:19]}).json()
    assert [run["run_id"] for run in kept["runs"]] == [stocked.first]
    assert served.get("/api/runs", params={"suite": "no/such@1"}).json()["total"] == 0
    assert served.get("/api/runs", params={"status": "weird"}).status_code == 400


def test_a_run_page_shows_hidden_cases_as_holdouts_only(stocked: Stocked,
                                                        served: Served) -> None:
    data = served.get(f"/api/runs/{stocked.first}").json()
    labels = [case["label"] for case in data["cases"]]
    assert labels[:4] == ["greets", "hostile", "flaky", "breaks"]
    assert sorted(labels[4:]) == ["holdout-1", "holdout-2"]
    holdout = data["cases"][4]
    assert set(holdout) == {"index", "label", "split", "outcome"}
    page = served.get(f"/runs/{stocked.first}")
    assert page.status_code == 200
    assert CANARY not in page.text and CANARY not in str(data)
    # No simulated user in this run: its cost line is the agent's and the judges' alone.
    assert "judges – · – tokens" in page.text and "simulated users" not in page.text
    report = served.get(f"/runs/{stocked.first}/report.json")
    assert report.json()["run_id"] == stocked.first
    assert CANARY not in report.text


def test_hostile_output_is_escaped_in_the_html(stocked: Stocked, served: Served) -> None:
    # The run page lists no output; the report download is JSON, never HTML.
    report = served.get(f"/runs/{stocked.first}/report.json")
    assert report.headers["content-type"].startswith("application/json")
    assert "<script>" not in served.get(f"/runs/{stocked.first}").text


def test_an_unknown_run_is_a_404_that_names_it(served: Served) -> None:
    missing = served.get("/runs/nope-123")
    assert missing.status_code == 404 and "nope-123" in missing.text
    assert served.get("/api/runs/nope-123").json()["error"] == "no run nope-123 in this store"


def test_every_answer_carries_a_strict_policy(served: Served) -> None:
    for path in ("/runs", "/api/runs", "/static/app.css", "/nope"):
        policy = served.get(path).headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe" not in policy
        assert "default-src 'none'" in policy


def test_a_request_by_another_host_name_is_refused_without_a_token(served: Served) -> None:
    # A DNS name rebound to 127.0.0.1 reaches the port, but not the store.
    refused = served.get("/api/runs", headers={"host": "evil.example:80"})
    assert refused.status_code == 421
    assert "run_id" not in refused.text


def test_a_cross_site_post_is_refused(served: Served) -> None:
    refused = served.client.post("/runs", headers={"origin": "http://evil.example"})
    assert refused.status_code == 403
    fetched = served.client.post("/runs", headers={"sec-fetch-site": "cross-site"})
    assert fetched.status_code == 403


def test_with_a_token_every_request_needs_it(stocked: Stocked) -> None:
    token = "t" * 20 + "-secret"
    server = Served(stocked.project.root, "--token", token)
    try:
        assert server.link.endswith(f"/login?token={token}")
        assert server.get("/api/runs").status_code == 401
        assert server.get("/static/app.css").status_code == 401
        bearer = server.get("/api/runs", headers={"authorization": f"Bearer {token}"})
        assert bearer.status_code == 200 and bearer.json()["total"] == 2
        assert server.get("/login", params={"token": "wrong" * 4}).status_code == 401
        login = server.get("/login", params={"token": token})
        assert login.status_code == 303 and "HttpOnly" in login.headers["set-cookie"]
        assert server.get("/api/runs").status_code == 200  # the cookie it set
    finally:
        server.stop()


def test_serve_refuses_another_host_without_a_token(stocked: Stocked) -> None:
    done = stocked.project.assay("serve", "--host", "0.0.0.0", "--port", "0")
    assert done.code == 2
    assert "--token" in done.err and "Traceback" not in done.err


def test_a_run_page_shows_what_its_simulated_users_cost_beside_the_judges(
        project: Project) -> None:
    project.write("t_agent.py", TALK_AGENT)
    project.write("prices.yaml", "sim-user: {input: 1.0, output: 2.0}\n")
    project.write("evals/t.suite.yaml", f"""\
suite: web/talk@1
target: python:t_agent:agent
user_model: openai:sim-user
cases:
  - id: book
    user: {{instructions: '{BOOKING}', max_turns: 3}}
    expect: [{{turn: 2, contains: "9:00"}}]
""")
    with user_server() as user:
        done = project.assay("run", "evals", "--json", "r.json", "--judge-base-url", user.url,
                             env={"ASSAY_PRICES": str(project.root / "prices.yaml")})
    assert done.code == 0, done.out + done.err
    run_id = json.loads((project.root / "r.json").read_text())["run_id"]
    served = Served(project.root, "evals")
    try:
        twin = served.get(f"/api/runs/{run_id}").json()
        html = served.get(f"/runs/{run_id}").text
    finally:
        served.stop()
    # Three calls of 40 tokens in and 6 out, at $1 and $2 a million: apart from the
    # agent's cost (a python: agent that reported none) and the judges' (none asked).
    assert twin["cost"]["simulator_usd"] == pytest.approx((3 * 40 + 3 * 6 * 2) / 1e6)
    assert "<span class=\"value\">–</span><span class=\"muted\">judges – · simulated " \
        "users $0.0002 · – tokens</span>" in html, html
