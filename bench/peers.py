"""The same trivial cases run through peer evaluation frameworks.

Every case is the same as in bench/throughput.py's assay suite: input
"case-i", the agent answers "answer-i" (it replaces "case" by "answer"), and
the check is that the output equals "answer-i". No model is called anywhere.

Two peers, each through its normal, documented path:

- DeepEval: ``deepeval.evaluate()`` over N ``LLMTestCase`` with a custom,
  deterministic ``BaseMetric`` subclass (exact equality), telemetry off.
- Inspect AI: ``inspect_ai.eval()`` of a ``Task`` with N ``Sample``, a custom
  ``@solver`` that sets ``state.output`` directly (no model call), scored by
  ``match(location="exact")``; ``model="none"`` (Inspect's own no-model
  sentinel; ``mockllm`` fetches a tokenizer and fails offline).

Run one in this process (what the parent measures as a subprocess):

    bench/.venv/bin/python bench/peers.py deepeval 10000
    bench/.venv/bin/python bench/peers.py inspect 1000

It prints one JSON line: framework, version, n, passed, failed, and how many
network attempts the offline guard saw. ``measure_peer()`` runs that as a fresh
subprocess (in a scratch working folder, so the peers' own files land there)
and adds whole-process wall time and peak RSS.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import ProcessRun, run_process  # noqa: E402

FRAMEWORKS = ("deepeval", "inspect")

# Environment that keeps the peers offline and quiet. Each name is documented
# by its framework (DeepEval's settings / Inspect's options); none changes
# how cases are executed or graded.
OFFLINE_ENV = {
    # DeepEval: no PostHog telemetry, no update check, no .env loading,
    # no interactive "open in deepeval inspect?" prompt after the run.
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_NO_INSPECT_PROMPT": "1",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    # Inspect AI: no display; telemetry hooks are opt-in and stay unset.
    "INSPECT_DISPLAY": "none",
    # Generic: no proxies that could be picked up from the environment.
    "NO_PROXY": "*",
}


def case_input(i: int) -> str:
    return f"case-{i}"


def expected(i: int) -> str:
    return f"answer-{i}"


def echo_agent(text: str) -> str:
    """The agent under test: the same as bench_agent.echo for assay."""
    return text.replace("case", "answer")


def broken_agent(text: str) -> str:
    """For the bench's self-check: wrong on every odd case."""
    return "wrong" if int(text.rsplit("-", 1)[1]) % 2 else echo_agent(text)


def expected_passes(n: int, broken: bool) -> int:
    return (n + 1) // 2 if broken else n


# --------------------------------------------------------------------------
# Offline guard
# --------------------------------------------------------------------------

_NET_ATTEMPTS: list[str] = []


def install_offline_guard() -> None:
    """Refuse (and count) any socket connection off this machine.

    An audit hook sees every socket.connect / getaddrinfo the process makes,
    including from C extensions that go through the socket module. Loopback
    and Unix sockets are allowed (asyncio uses socketpairs internally); any
    other address is refused, so a peer that quietly phones home fails loudly
    instead of waiting on a network that is not there.
    """

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.getaddrinfo":
            host = args[0]
            if isinstance(host, bytes):
                host = host.decode(errors="replace")
            if host not in (None, "localhost", "127.0.0.1", "::1", ""):
                _NET_ATTEMPTS.append(f"getaddrinfo {host}")
                raise OSError(f"bench offline guard: lookup of {host!r} refused")
        elif event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple) and address:
                host = str(address[0])
                if not (host.startswith("127.") or host in ("::1", "localhost")):
                    _NET_ATTEMPTS.append(f"connect {address}")
                    raise OSError(f"bench offline guard: connect to {address!r} refused")

    sys.addaudithook(hook)


# --------------------------------------------------------------------------
# DeepEval
# --------------------------------------------------------------------------


def run_deepeval(n: int, agent: Callable[[str], str] = echo_agent) -> dict[str, Any]:
    import deepeval
    from deepeval import evaluate
    from deepeval.evaluate.configs import CacheConfig, DisplayConfig
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase

    class EqualsMetric(BaseMetric):  # type: ignore[misc]
        """Deterministic: 1.0 when actual_output == expected_output, else 0.0."""

        def __init__(self) -> None:
            self.threshold = 1.0
            self.strict_mode = True
            self.async_mode = True
            self.include_reason = False
            self.evaluation_model = None

        def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
            ok = test_case.actual_output == test_case.expected_output
            self.score = 1.0 if ok else 0.0
            self.success = ok
            self.reason = "equal" if ok else "differs"
            return self.score

        async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
            return self.measure(test_case)

        def is_successful(self) -> bool:
            return bool(getattr(self, "success", False))

        @property
        def __name__(self) -> str:  # DeepEval names metrics by this attribute
            return "Equals"

    test_cases = [
        LLMTestCase(
            input=case_input(i),
            actual_output=agent(case_input(i)),
            expected_output=expected(i),
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    result = evaluate(
        test_cases=test_cases,
        metrics=[EqualsMetric()],
        # The default, asynchronous evaluate path; only the terminal output
        # (progress bar, per-case table) and the metric cache are switched off.
        display_config=DisplayConfig(
            show_indicator=False,
            print_results=False,
            inspect_after_run=False,
        ),
        cache_config=CacheConfig(write_cache=False, use_cache=False),
    )
    inner = time.perf_counter() - t0
    results = list(result.test_results)
    passed = sum(1 for r in results if r.success)
    return {
        "framework": "deepeval",
        "version": deepeval.__version__,
        "n": n,
        "graded": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "evaluate_s": round(inner, 3),
    }


# --------------------------------------------------------------------------
# Inspect AI
# --------------------------------------------------------------------------


def run_inspect(
    n: int, agent: Callable[[str], str] = echo_agent, log_dir: str | None = None
) -> dict[str, Any]:
    import inspect_ai
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import match
    from inspect_ai.solver import Generate, TaskState, solver

    @solver
    def echo_solver():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            # The "agent": answer directly, without asking any model.
            state.output = ModelOutput.from_content(
                model="bench/echo", content=agent(state.input_text)
            )
            return state

        return solve

    task = Task(
        name="bench_echo",
        dataset=MemoryDataset(
            [Sample(id=i, input=case_input(i), target=expected(i)) for i in range(n)]
        ),
        solver=echo_solver(),
        scorer=match(location="exact"),
    )
    own_dir = None
    if log_dir is None:
        own_dir = tempfile.TemporaryDirectory(prefix="bench-inspect-logs-")
        log_dir = own_dir.name
    t0 = time.perf_counter()
    logs = eval(task, model="none", log_dir=log_dir, display="none")
    inner = time.perf_counter() - t0
    log = logs[0]
    if log.status != "success":
        raise RuntimeError(f"inspect eval status {log.status}: {log.error}")
    samples = log.samples or []
    passed = 0
    for s in samples:
        score = next(iter((s.scores or {}).values()), None)
        if score is not None and score.value == "C":
            passed += 1
    completed = log.results.completed_samples if log.results else 0
    out = {
        "framework": "inspect",
        "version": inspect_ai.__version__
        if hasattr(inspect_ai, "__version__")
        else _dist_version("inspect-ai"),
        "n": n,
        "graded": len(samples),
        "completed_samples": completed,
        "passed": passed,
        "failed": len(samples) - passed,
        "eval_s": round(inner, 3),
        "log_bytes": sum(p.stat().st_size for p in Path(log_dir).rglob("*") if p.is_file()),
    }
    if own_dir is not None:
        own_dir.cleanup()
    return out


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


# --------------------------------------------------------------------------
# Running a peer as a measured subprocess
# --------------------------------------------------------------------------


def peer_python() -> str:
    """The interpreter that has the peers: $BENCH_PEER_PYTHON or bench/.venv."""
    explicit = os.environ.get("BENCH_PEER_PYTHON")
    if explicit:
        return explicit
    return str(HERE / ".venv" / "bin" / "python")


def measure_peer(
    framework: str,
    n: int,
    *,
    python: str | None = None,
    timeout_s: float = 3600.0,
    broken: bool = False,
) -> ProcessRun:
    """Run one peer over n cases in a fresh process; check it graded them all.

    Raises RuntimeError when the process failed, touched the network, or did
    not grade all n cases with the expected number of passes (all n; with
    ``broken``, an agent wrong on every odd case, exactly the even ones): a
    bench that silently did nothing is worse than none.
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; one of {FRAMEWORKS}")
    py = python or peer_python()
    with tempfile.TemporaryDirectory(prefix=f"bench-{framework}-") as scratch:
        env = dict(os.environ)
        env.update(OFFLINE_ENV)
        env["DEEPEVAL_HOME"] = str(Path(scratch) / "deepeval-home")
        run = run_process(
            [py, str(HERE / "peers.py"), framework, str(n), *(["broken"] if broken else [])],
            cwd=scratch,
            env=env,
            timeout_s=timeout_s,
        )
    if run.returncode != 0:
        raise RuntimeError(f"{framework} at n={n} exited {run.returncode}:\n{run.tail(30)}")
    report = _last_json_line(run.stdout)
    if report is None:
        raise RuntimeError(f"{framework} printed no result line:\n{run.tail(30)}")
    run.extra.update(report)
    if report.get("net_attempts"):
        raise RuntimeError(f"{framework} tried the network: {report['net_attempts']}")
    want = expected_passes(n, broken)
    if report.get("graded") != n or report.get("passed") != want:
        raise RuntimeError(
            f"{framework} at n={n} graded {report.get('graded')} and passed "
            f"{report.get('passed')}; expected {n} graded, {want} passed"
        )
    return run


def _last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and "framework" in value:
                return value
    return None


def main(argv: list[str]) -> int:
    if (
        len(argv) not in (2, 3)
        or argv[0] not in FRAMEWORKS
        or not argv[1].isdigit()
        or argv[2:] not in ([], ["broken"])
    ):
        print(
            "usage: peers.py {deepeval|inspect} N [broken]   (in this process, prints JSON)\n"
            "       peers.py measure {deepeval|inspect} N   (fresh subprocess, wall + RSS)",
            file=sys.stderr,
        )
        return 2
    framework, n = argv[0], int(argv[1])
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    install_offline_guard()
    agent = broken_agent if argv[2:] == ["broken"] else echo_agent
    report = run_deepeval(n, agent) if framework == "deepeval" else run_inspect(n, agent)
    report["net_attempts"] = list(_NET_ATTEMPTS)
    print(json.dumps(report), flush=True)
    return 0


def _measure_main(argv: list[str]) -> int:
    framework, n = argv[0], int(argv[1])
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as bench/throughput.py does
    run = measure_peer(framework, n)
    print(
        f"{framework} n={n}: wall {run.wall_s:.2f} s, {n / run.wall_s:,.0f} cases/s, "
        f"peak RSS {run.peak_rss_mib:.0f} MiB, passed {run.extra['passed']}/{n}, "
        f"version {run.extra['version']}"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        sys.exit(_measure_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
