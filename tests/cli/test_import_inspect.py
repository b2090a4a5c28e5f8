"""``assay import inspect``: a log written with Inspect AI's own API becomes traces assay grades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .conftest import Project

inspect_log = pytest.importorskip("inspect_ai.log")


def write_log(path: Path) -> None:
    """Two samples over two epochs: one answered right with a tool call, one wrong."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageTool,
        ChatMessageUser,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall

    def sample(sample_id: str, epoch: int, question: str, target: str, answer: str,
               call: bool) -> EvalSample:
        output = ModelOutput.from_content("mockllm/model", answer)
        output.usage = ModelUsage(input_tokens=20 + epoch, output_tokens=5, total_tokens=25)
        messages: list = [ChatMessageUser(content=question)]
        if call:
            messages += [ChatMessageAssistant(content="", tool_calls=[
                ToolCall(id=f"c{epoch}", function="calc", arguments={"a": 2, "b": 2})]),
                ChatMessageTool(content="4", tool_call_id=f"c{epoch}", function="calc")]
        messages.append(ChatMessageAssistant(content=answer))
        right = target.lower() in answer.lower()
        return EvalSample(id=sample_id, epoch=epoch, input=question, target=target,
                          messages=messages, output=output,
                          scores={"includes": Score(value="C" if right else "I"),
                                  "house_style": Score(value=0.5)})

    samples = [sample("sum", e, "What is 2+2?", "4", "It is 4.", True) for e in (1, 2)]
    samples += [sample("capital", e, "Capital of France?", "Paris", "Lyon", False)
                for e in (1, 2)]
    log = EvalLog(eval=EvalSpec(created="2026-12-02T00:00:00+00:00", task="geo-arith",
                                dataset=EvalDataset(name="mine", samples=2),
                                model="mockllm/model", config=EvalConfig()),
                  samples=samples, status="success")
    inspect_log.write_eval_log(log, str(path))


def test_samples_become_recorded_trials_that_a_suite_grades(project: Project) -> None:
    write_log(project.root / "run.eval")
    done = project.assay("import", "inspect", "run.eval")
    assert done.code == 0, done.err
    assert "wrote evals/run.jsonl: 4 recorded trial(s)" in done.out
    assert "Inspect scored 2 of 8 correct" in done.out  # includes C/I, house_style 0.5
    assert "not mapped: scorer house_style" in done.out
    path = project.root / "evals" / "geo-arith.suite.yaml"
    suite = yaml.safe_load(path.read_text())
    assert (suite["target"], suite["trials"]) == ("scripted:run.jsonl", 2)
    cases = {c["id"]: c for c in suite["cases"]}
    assert sorted(cases) == ["sample-capital", "sample-sum"]
    assert cases["sample-capital"]["expect"] == [{"contains": "Paris"}]
    lines = [json.loads(x) for x in (project.root / "evals" / "run.jsonl").read_text()
             .splitlines()]
    [first] = [x for x in lines if (x["case"], x["trial"]) == ("sample-sum", 1)]
    assert first["usage"] == {"input_tokens": 21, "output_tokens": 5, "cost_usd": None}
    assert [e["kind"] for e in first["events"]] == ["tool_call", "tool_result", "message"]
    # A check of one's own on what the model did in Inspect: its tool calls.
    cases["sample-sum"]["expect"].append({"calls": {"tool": "calc", "args": {"a": 2, "b": 2}}})
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    ran = project.assay("run", "evals", "--json", "r.json")
    assert ran.code == 1  # the wrong answer fails, as Inspect scored it
    report = json.loads((project.root / "r.json").read_text())
    assert {c["id"]: c["outcome"] for c in report["cases"]} == {"sample-sum": "pass",
                                                                  "sample-capital": "fail"}
    assert report["cost"]["input_tokens"] == 2 * (21 + 22) and report["seal"] is not None


def test_a_bad_log_is_named_and_exits_2(project: Project) -> None:
    project.write("junk.eval", "not a zip at all\n")
    done = project.assay("import", "inspect", "junk.eval")
    assert done.code == 2 and "Traceback" not in done.err
    assert "junk.eval" in done.err and "not an Inspect AI log" in done.err
    write_log(project.root / "log.json")
    data = json.loads((project.root / "log.json").read_text())
    data["version"] = 99
    (project.root / "log.json").write_text(json.dumps(data))
    done = project.assay("import", "inspect", "log.json")
    assert done.code == 2 and "log.json" in done.err and "version 99" in done.err
    assert not (project.root / "evals").exists()
