# agentui: `make run` serves the app, `make test` runs the tests.
# Both create .venv and install the pinned requirements on first use.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# pytest-xdist workers per pass (a number, or auto: one per core); 0 runs in one process.
# Two by default: this project's machines have two cores (docs/benchmarks.md, "The test suite")
TEST_WORKERS ?= 2
# Pass 2 waits on PostgreSQL, Redis and the processes it starts more than pass 1 does: a third
# worker fills the gaps (measured in docs/benchmarks.md).
SERVICES_WORKERS ?= 3
# one-by-one: pass 2 after pass 1 (only if it passed); together: pass 2 beside pass 1. Measured
# on two cores, together was slower (pass 1 1,502 s beside pass 2's 676 s, against ~1,000 s
# and ~290 s apart): the browsers of pass 1 want both cores (docs/benchmarks.md).
PASSES ?= one-by-one
LINK_USER ?=
# The services pass of `make test` (override to use other servers).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0

# A stamp per content of the requirements: editing a file re-installs, nothing else does.
req_hash = $(shell cat $(1) | sha256sum | cut -c1-12)
RUN_STAMP := $(VENV)/.installed-run-$(call req_hash,requirements.txt)
TEST_STAMP := $(VENV)/.installed-test-$(call req_hash,requirements.txt requirements-test.txt)
# Arize Phoenix, a trace store the telemetry tests export to, lives in a venv of its own.
PHOENIX_VENV ?= .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed-$(call req_hash,requirements-phoenix.txt)
# The official AG-UI client that tests/test_agui_live.py runs in node, pinned by its lock file.
AGUI_CLIENT := tests/agui_client
AGUI_STAMP := $(AGUI_CLIENT)/node_modules/.installed-$(call req_hash,$(AGUI_CLIENT)/package-lock.json)

# Tests never see a developer's own database, Redis, LLM or trace collector settings.
CLEAN_ENV := env -u DATABASE_URL -u REDIS_URL -u OPENAI_API_KEY -u OPENAI_BASE_URL -u AGENTUI_MODEL \
  -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
# a module's tests stay on one worker when they share its live app or servers (tests/conftest.py)
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
XDIST_SERVICES = $(if $(filter 0,$(TEST_WORKERS)),,-n $(SERVICES_WORKERS) --dist loadgroup)
SERVICES_ENV := $(CLEAN_ENV) DATABASE_URL='$(TEST_DATABASE_URL)' REDIS_URL='$(TEST_REDIS_URL)'

.PHONY: help run test test-fast lint login-link clean vendor phoenix check-run test-setup

help:
	@echo "make run         serve agentui on http://$(HOST):$(PORT)/ (HOST, PORT override)"
	@echo "make test        lint, then run the tests (SQLite pass, then PostgreSQL + Redis pass)"
	@echo "make test-fast   the in-process tests only (no Chromium, servers or Phoenix), on every core"
	@echo "make test-setup  install the test venv, Phoenix and the AG-UI client side by side (make test does it)"
	@echo "make check-run   make run from a venv of requirements.txt alone, in a copy of the tree: serves, logs in, stops"
	@echo "make lint        ruff (lint and format of the whole tree), import-linter (layer contracts), mypy"
	@echo "make login-link  print a one-time login link (LINK_USER=name for another user)"
	@echo "make clean       remove caches and test artifacts (keeps .venv, .venv-phoenix and db.sqlite3)"
	@echo "make phoenix     install Arize Phoenix into .venv-phoenix for the telemetry tests (make test does it)"
	@echo "make vendor      re-copy the pinned JavaScript libraries from npm into static/vendor/ (needs npm)"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agentui needs Python 3.11+; $(PYTHON) is " + sys.version.split()[0])'
	@echo "Creating $(VENV) with $$($(PYTHON) --version)"
	@$(PYTHON) -m venv $(VENV)

# pip's own lines, only those that say what it fetches and installs: a first install takes about
# 30 s, and a quiet one looks hung (errors still show: pip writes them to stderr)
PIP_PROGRESS := { grep --line-buffered -E '^(Collecting|Processing|Installing collected|Successfully installed)' || true; } \
  | sed -u -E 's|^Processing .*/([^/ ]+) \(from .*|Processing \1|; s|^|  |'

$(RUN_STAMP): requirements.txt | $(PY)
	@echo "Installing requirements.txt into $(VENV) (the first time takes about 30 s)"
	@set -o pipefail; $(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements.txt | $(PIP_PROGRESS)
	@rm -f $(VENV)/.installed-run-* && touch $@

$(TEST_STAMP): requirements.txt requirements-test.txt | $(PY)
	@echo "Installing requirements-test.txt into $(VENV)"
	@$(PY) -m pip install --disable-pip-version-check -q -r requirements-test.txt
	@rm -f $(VENV)/.installed-test-* && touch $@

$(PHOENIX_STAMP): requirements-phoenix.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Phoenix needs Python 3.11+")'
	@[ -x $(PHOENIX_VENV)/bin/python ] || { echo "Creating $(PHOENIX_VENV) (Arize Phoenix, for the telemetry tests)"; $(PYTHON) -m venv $(PHOENIX_VENV); }
	@echo "Installing requirements-phoenix.txt into $(PHOENIX_VENV) (once; about 850 MB)"
	@$(PHOENIX_VENV)/bin/python -m pip install --disable-pip-version-check -q -r requirements-phoenix.txt
	@rm -f $(PHOENIX_VENV)/.installed-* && touch $@

# the telemetry tests' trace store (make test does this itself)
phoenix: $(PHOENIX_STAMP)

# What the tests need installed, side by side: the test venv, Phoenix's venv and the AG-UI
# client are independent, and on a fresh clone their installs are most of the setup's time.
test-setup:
	@$(MAKE) --no-print-directory -j3 --output-sync=target $(TEST_STAMP) $(PHOENIX_STAMP) $(AGUI_STAMP)

# Without npm the AG-UI client tests skip (and fail under AGENTUI_REQUIRE_SERVICES=1, as in CI,
# where .ci/run installs nodejs and npm first).
$(AGUI_STAMP): $(AGUI_CLIENT)/package.json $(AGUI_CLIENT)/package-lock.json
	@if command -v npm >/dev/null; then \
	  echo "Installing $(AGUI_CLIENT) (npm ci)"; \
	  (cd $(AGUI_CLIENT) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) && touch $@; \
	else \
	  echo "npm not found: the AG-UI client tests will skip (apt-get install -y nodejs npm)"; \
	fi

run: $(RUN_STAMP)
	@$(PY) manage.py migrate --noinput -v 0
	@$(PY) manage.py preflight
	@mkdir -p .local && echo "$(HOST) $(PORT)" > .local/served
	@$(PY) manage.py ensure_user
	@$(PY) manage.py recover_runs --force
	@echo "Serving agentui on http://$(HOST):$(PORT)/ (Ctrl-C stops)"
	@exec $(VENV)/bin/daphne -b $(HOST) -p $(PORT) agentui.asgi:application

# What a fresh clone's `make run` does, checked end to end (CI runs it too): a copy of the
# work tree under .local/check-run/, a new venv from requirements.txt alone, a free port,
# /healthz, the printed login link to the start page, a clean stop. Your db.sqlite3 and
# .venv are not touched.
check-run:
	@bash .ci/check_make_run

# HOST/PORT given here win; else the address the last `make run` noted in .local/served.
login-link: $(RUN_STAMP)
	@$(PY) manage.py login_link $(LINK_USER)

# The inner loop: the tests that start no process of their own (no Chromium, daphne, manage.py,
# Phoenix or Redis; tests/conftest.py marks those `browser` and `live`), SQLite, every core.
test-fast: $(TEST_STAMP)
	@$(CLEAN_ENV) $(PY) -m pytest $(XDIST) -m "not browser and not live" $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/lint-imports --no-logo --no-cache
	@# worktrees link .venv and node_modules to a main checkout: such a link must never be committed
	@if git rev-parse --git-dir >/dev/null 2>&1 && git ls-files -s | grep -q '^120000 '; then \
	  echo "symbolic links are tracked (git rm --cached them):"; git ls-files -s | grep '^120000 '; exit 1; fi
	@$(PY) -m mypy --config-file mypy.ini

# Pass 1: every test on SQLite and the in-memory channel layer.
# Pass 2: the `db` and `ws` tests again on PostgreSQL and Redis, when both answer
# (with AGENTUI_REQUIRE_SERVICES=1, their absence fails the target instead).
# pytest's exit code 5 (no tests collected) does not fail a pass.
# PASSES=together runs both at once; pass 2's output is then printed when pass 1 ends.
# Each pass ends with its 25 slowest tests (setup, call and teardown apart).
test: test-setup lint
	@set -u; \
	services_ok=1; \
	problems=$$($(SERVICES_ENV) $(PY) manage.py preflight --no-llm --quiet 2>&1) || services_ok=0; \
	if [ $$services_ok = 0 ]; then \
	  echo "PostgreSQL/Redis not reachable: the services pass (pass 2) will be skipped:"; \
	  echo "$$problems" | sed 's/^/    /'; \
	  if [ "$${AGENTUI_REQUIRE_SERVICES:-}" = 1 ]; then \
	    echo "FAILED: AGENTUI_REQUIRE_SERVICES=1 but the services pass cannot run"; exit 1; \
	  fi; \
	fi; \
	pass2() { $(SERVICES_ENV) AGENTUI_TEST_DB_NAME=test_agentui_$$$$ $(PY) -m pytest $(XDIST_SERVICES) -m "db or ws" --durations=25 $(PYTEST_ARGS); }; \
	pass2_pid=; pass2_log=; \
	if [ $$services_ok = 1 ] && [ "$(PASSES)" = together ]; then \
	  pass2_log=$$(mktemp); \
	  echo "== Pass 2 (db and ws tests, PostgreSQL + Redis) runs beside pass 1; its output follows pass 1's"; \
	  pass2 >"$$pass2_log" 2>&1 & pass2_pid=$$!; \
	  trap 'kill $$pass2_pid 2>/dev/null; rm -f "$$pass2_log"' EXIT; \
	fi; \
	echo "== Pass 1: all tests, SQLite + in-memory channel layer"; \
	$(CLEAN_ENV) $(PY) -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS); rc1=$$?; \
	[ $$rc1 = 5 ] && rc1=0; \
	[ $$services_ok = 1 ] || exit $$rc1; \
	if [ -n "$$pass2_pid" ]; then \
	  rc2=0; wait $$pass2_pid || rc2=$$?; \
	  echo "== Pass 2: db and ws tests, PostgreSQL + Redis (ran beside pass 1)"; \
	  cat "$$pass2_log"; \
	else \
	  [ $$rc1 = 0 ] || exit $$rc1; \
	  echo "== Pass 2: db and ws tests, PostgreSQL + Redis"; \
	  rc2=0; pass2 || rc2=$$?; \
	fi; \
	[ $$rc2 = 5 ] && rc2=0; \
	[ $$rc1 = 0 ] || { echo "FAILED: pass 1 (exit $$rc1)"; exit $$rc1; }; \
	[ $$rc2 = 0 ] || { echo "FAILED: pass 2 (exit $$rc2)"; exit $$rc2; }

# The page's libraries (Markdown, sanitiser, charts) from npm at the versions npm/package-lock.json
# pins, copied with their licenses into static/vendor/. The copies are committed, so `make run`
# and `make test` never need npm; run this only to change a version.
vendor:
	@command -v npm >/dev/null || { echo "make vendor needs npm (e.g. apt-get install -y nodejs npm)"; exit 1; }
	cd npm && npm ci --no-audit --no-fund --ignore-scripts
	bash npm/copy.sh

clean:
	rm -rf .pytest_cache .mypy_cache .hypothesis test-artifacts
	find . \( -path ./$(VENV) -o -path ./$(PHOENIX_VENV) \) -prune -o -name __pycache__ -type d -exec rm -rf {} +
