"""`--target-limit`: trials in flight against one target across all workers, held in the
database. Three workers of 16 each against a model that counts its concurrent requests."""

from __future__ import annotations

import json

import pytest

from .conftest import Project
from .model_server import ModelServer


@pytest.mark.real
def test_the_target_limit_holds_across_workers(project: Project) -> None:
    lines = ["suite: q/limited@1", "target: openai:tiny", "cases:"]
    lines += [f"  - {{id: c{i}, input: hello-{i}, expect: [{{contains: hello-{i}}}]}}"
              for i in range(48)]
    project.write("evals/l.suite.yaml", "\n".join(lines) + "\n")
    with ModelServer(delay_s=0.1) as model:
        env = {"OPENAI_API_KEY": "sk-test"}
        for _ in range(3):
            project.worker(concurrency=16, env=env)
        queued = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                               "--base-url", model.base_url, "--target-limit", "4",
                               "--chunk", "4", "--json", "r.json", env=env)
        assert queued.code == 0, queued.err
        report = json.loads((project.root / "r.json").read_text())
        assert [c["outcome"] for c in report["cases"]] == ["pass"] * 48
        assert model.calls == 48
        # Held, and not trivially: the workers could have run 48 at once.
        assert model.peak == 4


def test_the_target_limit_belongs_to_the_queue(project: Project) -> None:
    project.write("evals/l.suite.yaml", "suite: q/l@1\ntarget: openai:tiny\ncases:\n"
                  "  - {id: a, input: x, expect: [{contains: x}]}\n")
    done = project.assay("run", "evals", "--target-limit", "2")
    assert done.code == 2 and "--executor queue" in done.err
