# Two commands do everything on a fresh machine with Python ≥ 3.11 and pip:
#   make demo   run the shipped examples as a real battery (offline, no keys)
#   make test   lint, type-check and run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/assay list examples/
	$(BIN)/assay run examples/ --json out/demo.json --junit out/demo.junit.xml --markdown out/demo.md
	@echo
	@echo "== The same extraction suite against an agent tuned to its public cases."
	@echo "== Its hidden cases catch it: expect NOT PASSED, possibly-tuned, exit 1."
	@$(BIN)/assay run examples/extraction --target python:tuned_agent:extract; \
	  code=$$?; echo "exit code $$code"; test $$code -eq 1

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -n auto -q

clean:
	rm -rf $(VENV) out .assay .pytest_cache .mypy_cache .ruff_cache
