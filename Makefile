# Two commands do everything on a fresh machine with Python ≥ 3.11 and pip:
#   make demo   run the shipped examples as a real battery (offline, no keys)
#   make test   lint, type-check and run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The native claude and codex CLIs the host-target tests run (npm, pinned).
HOSTS  := .hosts/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,tau2]'
	$(BIN)/python -m pip install --quiet --no-deps 'bfcl-eval>=2026.3.23'
	touch $(STAMP)

# The support example's model and the helpdesk example's judge are scripted
# OpenAI-compatible servers on loopback: examples/support/stub_model.py serves
# them while the command after -- runs.
# The MCP examples start their servers with `python` from PATH: the venv's comes first.
demo: $(STAMP)
	$(BIN)/assay list examples/
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python examples/support/stub_model.py -- \
	  $(BIN)/assay run examples/ --json out/demo.json --junit out/demo.junit.xml --markdown out/demo.md
	@echo
	@echo "== The same extraction suite against an agent tuned to its public cases."
	@echo "== Its hidden cases catch it: expect NOT PASSED, possibly-tuned, exit 1."
	@$(BIN)/assay run examples/extraction --target python:tuned_agent:extract --json out/tuned.json; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1
	@echo
	@echo "== The support suite against a model that obeys instructions hidden in a customer's"
	@echo "== message. never_calls [erp.transfer] catches it: expect NOT PASSED, exit 1."
	@$(BIN)/python examples/support/stub_model.py -- \
	  $(BIN)/assay run examples/support --target openai:naive-bot; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1
	@echo
	@echo "== Outcomes: a coding agent that edits the test instead of the code. Its answer and"
	@echo "== pytest both look fine; files: {unchanged: [tests/**]} catches it: exit 1."
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/assay run examples/outcomes \
	  --target python:shop_agents:edit_test; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1
	@echo
	@echo "== Stateful tools: an assistant that obeys the note slipped into the landlord's"
	@echo "== message. The bank's final state shows the wire to the attacker: exit 1."
	@$(BIN)/assay run examples/bank --target python:bank_agents:obedient; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1
	@echo
	@echo "== Every run above was recorded and sealed in .assay/assay.db. The ledger verifies;"
	@echo "== a receipt of the first run is checked offline, with no store."
	$(BIN)/assay runs
	$(BIN)/assay ledger verify
	$(BIN)/assay receipt "$$($(BIN)/python -c 'import json; d = json.loads(open("out/demo.json").readline()); print(d["run_id"])')" --out out/demo.receipt.json
	$(BIN)/assay receipt verify out/demo.receipt.json
	@echo
	@echo "== Decide: compare the tuned agent with the honest one, case by case. Its hidden cases"
	@echo "== regressed: expect WORSE, exit 1. Then a release gate against the honest baseline"
	@echo "== blocks it, and the decision is sealed in the ledger: expect BLOCKED, exit 1."
	@honest=$$($(BIN)/python -c 'import json; print(next(d["run_id"] for d in map(json.loads, open("out/demo.json")) if d["suite"]["id"] == "demo/extraction.table@1"))'); \
	  tuned=$$($(BIN)/python -c 'import json; print(json.load(open("out/tuned.json"))["run_id"])'); \
	  $(BIN)/assay compare $$honest $$tuned --markdown out/compare.md; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1 || exit 1; \
	  $(BIN)/assay gate $$tuned --baseline $$honest --json out/gate.json; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1
	@echo
	@echo "== Judged checks: the helpdesk suite's run above (judge, rubric and similar, beside"
	@echo "== not_contains) judged again by assay rejudge. The agent is not called and every"
	@echo "== answer comes from the judge cache: expect the same outcomes, PASSED at its pass"
	@echo "== mark 0.7 with two cases failed, exit 0, and judge_calls 0 (judge_cached 66)."
	@helpdesk=$$($(BIN)/python -c 'import json; print(next(d["run_id"] for d in map(json.loads, open("out/demo.json")) if d["suite"]["id"] == "demo/helpdesk.replies@1"))'); \
	  $(BIN)/python examples/support/stub_model.py -- \
	  $(BIN)/assay rejudge $$helpdesk --json out/rejudge.json; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 0 || exit 1; \
	  $(BIN)/python -c 'import json, sys; c = json.load(open("out/rejudge.json"))["cost"]; print("cost.judge_calls", c["judge_calls"], "· cost.judge_cached", c["judge_cached"]); sys.exit(c["judge_calls"] != 0)'
	@echo
	@echo "== The helpdesk agent's next version (reply_v2) on the same suite: every case passes,"
	@echo "== exit 0. Then assay pairwise asks the judge which run's replies are better, trial"
	@echo "== by trial (every row in out/pairwise.txt): expect B, the new version, preferred in"
	@echo "== all 7 decisive comparisons (the rest are ties: the same reply), exit 0."
	@$(BIN)/python examples/support/stub_model.py -- \
	  $(BIN)/assay run examples/helpdesk --target python:helpdesk_agent:reply_v2 --json out/helpdesk-v2.json; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 0 || exit 1; \
	  old=$$($(BIN)/python -c 'import json; print(next(d["run_id"] for d in map(json.loads, open("out/demo.json")) if d["suite"]["id"] == "demo/helpdesk.replies@1"))'); \
	  new=$$($(BIN)/python -c 'import json; print(json.load(open("out/helpdesk-v2.json"))["run_id"])'); \
	  COLUMNS=200 $(BIN)/python examples/support/stub_model.py -- \
	  $(BIN)/assay pairwise $$old $$new --judge openai:judge-stub --seed 1 --json out/pairwise.json \
	    --criteria "The better reply apologises, offers a concrete remedy and promises nothing policy forbids." \
	    > out/pairwise.txt; \
	  code=$$?; grep -E '^(B over A|judge cost)' out/pairwise.txt; echo "exit code $$code"; test $$code -eq 0

$(HOSTS): tests/hosts/package.json tests/hosts/package-lock.json tests/hosts/install.sh
	tests/hosts/install.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/mypy

test: lint $(HOSTS)
	$(BIN)/python -m pytest -n auto -q

clean:
	rm -rf $(VENV) out .assay .pytest_cache .mypy_cache .ruff_cache .hosts
