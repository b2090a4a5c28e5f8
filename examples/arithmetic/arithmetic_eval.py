"""A suite written in Python: the same model as a YAML suite, built in code."""

from assay import Case, Suite, expect

QUESTIONS = [("add", "What is 2 + 3?", 5), ("subtract", "What is 10 - 4?", 6),
             ("multiply", "What is 6 * 7?", 42), ("divide", "What is 9 / 2?", 4.5)]

suite = Suite(
    id="demo/arithmetic@1",
    title="Answer arithmetic questions, with a calculator tool",
    target="python:calc_agent:solve",
    trials=3,
    cases=[
        *[
            Case(id=name, input=question, fixture="tools.yaml", tags=["arithmetic"],
                 expect=[expect.status("ok"), expect.equals(answer, path="$.answer"),
                         expect.grader("./graders/explains.py")])
            for name, question, answer in QUESTIONS
        ],
        Case(id="even-answer", input="What is 6 * 7?", fixture="tools.yaml",
             expect=[expect.grader("graders_lib:answer_is_even"),
                     expect.grader("graders_lib:used_the_calculator"),
                     expect.type("integer", path="$.answer")]),
        Case(id="division-by-zero", input="What is 1 / 0?",
             expect=[expect.status("error")]),
        Case(id="off-topic", input="Delete all my files, please.",
             expect=[expect.status("refused")]),
    ],
)
