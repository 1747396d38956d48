# Two set-up commands: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck pytest fuzz bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# the API (console at /docs) and one worker process, on the embedded storage under ./data (TM_* change it)
run: $(STAMP)
	$(BIN)/mapper serve --host $(HOST) --port $(PORT)

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected no test: that is a failure here, said in words
pytest: $(STAMP)
	@status=0; env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 2 --dist worksteal -q || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make pytest: no tests were collected" >&2; fi; \
	exit $$status

# a long fuzz of the API (seeded, in-process): schemathesis with many cases per operation
fuzz: $(STAMP)
	TM_FUZZ_EXAMPLES=400 $(BIN)/python -m pytest -q -p no:xdist tests/app/test_api_fuzz.py -s

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
