# leasehold — one command runs the demo, one runs the tests; each builds .venv from nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1
# Python keeps the bytecode of what it imports (__pycache__) whatever the calling shell says: with
# PYTHONDONTWRITEBYTECODE set, every test worker, local stack, moto server and worker process
# compiled every module it imported from source again, and pytest rewrote every test module's
# asserts again (decision CI17: collection alone took twice the CPU).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup tools browser node redocly lint-openapi demo up down test test-long test-unit test-integration test-e2e lint format docs validate build deploy delete bench bench-local bench-scale bench-priorities clean mutants soak fuzz crash-matrix console-shots scaffold-template scaffold-check

setup: $(STAMP) browser redocly

# The operator console's browser tests (make test) and make console-shots drive Debian's own
# chromium and chromium-driver through Selenium - never a browser or driver downloaded at run
# time. Installed with apt-get when missing (as root, or with password-less sudo); quiet, and
# a no-op once they are there. Where it cannot install, it says so and goes on: only the
# console's browser tests need them (and fail naming what is missing).
CHROMIUM_PACKAGES := chromium chromium-driver
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make setup: no apt-get here; install $(CHROMIUM_PACKAGES) for the console's browser tests" >&2; exit 0; fi; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else \
	  echo "make setup: not root and no password-less sudo; run: sudo apt-get install -y $(CHROMIUM_PACKAGES)" >&2; exit 0; fi; \
	echo "make setup: installing $(CHROMIUM_PACKAGES) (apt-get, for the console's browser tests)"; \
	log=$$(mktemp); \
	if $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$$log" 2>&1 && \
	   $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(CHROMIUM_PACKAGES) >>"$$log" 2>&1; then \
	  rm -f "$$log"; \
	else echo "make setup: apt-get could not install $(CHROMIUM_PACKAGES) (log: $$log)" >&2; fi

# docs/openapi.yaml's linter (tests/unit/test_openapi_tools.py, make lint-openapi): Redocly CLI,
# pinned, from npm into .venv/node (it goes with .venv), run with redocly.yaml. Node.js and npm
# come from Debian's nodejs and npm packages (apt-get, as for the browser) when missing; Redocly
# CLI 1.34 is the newest that runs on Debian 12's Node 18 (2.x needs 20.19). Where it cannot
# install, it says so and goes on: only the linter's test needs it (and fails naming what is missing).
REDOCLY_VERSION := 1.34.20
NODE_PREFIX := $(VENV)/node
REDOCLY := $(NODE_PREFIX)/node_modules/.bin/redocly
REDOCLY_STAMP := $(NODE_PREFIX)/.redocly-$(REDOCLY_VERSION)-stamp
NODE_PACKAGES := nodejs npm
# no usage report to Redocly and no look for a newer release on each run
export REDOCLY_TELEMETRY := off
export REDOCLY_SUPPRESS_UPDATE_NOTICE := true
node:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make setup: no apt-get here; install Node.js and npm for docs/openapi.yaml's linter" >&2; exit 0; fi; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else \
	  echo "make setup: not root and no password-less sudo; run: sudo apt-get install -y $(NODE_PACKAGES)" >&2; exit 0; fi; \
	echo "make setup: installing $(NODE_PACKAGES) (apt-get, for docs/openapi.yaml's linter)"; \
	log=$$(mktemp); \
	if $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$$log" 2>&1 && \
	   $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NODE_PACKAGES) >>"$$log" 2>&1; then \
	  rm -f "$$log"; \
	else echo "make setup: apt-get could not install $(NODE_PACKAGES) (log: $$log)" >&2; fi

redocly: $(REDOCLY_STAMP)

$(REDOCLY_STAMP): | node
	@if ! command -v npm >/dev/null 2>&1; then echo "make setup: no npm, so no Redocly CLI (docs/openapi.yaml's linter)" >&2; exit 0; fi; \
	mkdir -p $(NODE_PREFIX) && \
	npm install --prefix $(NODE_PREFIX) --no-audit --no-fund --loglevel=error '@redocly/cli@$(REDOCLY_VERSION)' && \
	rm -f $(NODE_PREFIX)/.redocly-*-stamp && touch $@

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "leasehold needs Python 3.11 or newer as $(PYTHON)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# The distribution was named `leasehold` before it became leasehold-jobs: drop a stale one
	@# (its editable install's metadata in src/ would still answer to the old name) before
	@# installing, since both install the `leasehold` command and uninstalling removes it.
	@$(BIN)/python -m pip uninstall --quiet --yes leasehold 2>/dev/null || true
	@rm -rf src/leasehold.egg-info
	@# --no-compile: pip byte-compiles every module of every package (moto's hundreds of services,
	@# most never imported), about 40% of the install's CPU; Python compiles what is imported,
	@# once, on first use.
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	@touch $(STAMP)

demo: setup
	$(BIN)/leasehold demo

# KINDS=myjobs.kinds (importable modules, comma-separated) replaces the template's Kinds list.
# State lives in .leasehold/data (DATA=DIR for another); FRESH=1 starts empty (the old state is
# moved to DIR.previous); UP_ARGS passes any other `leasehold local up` option (e.g. --in-memory).
up: setup
	$(BIN)/leasehold local up --port $${PORT:-8080} --workers $${WORKERS:-2} $(if $(KINDS),--kinds $(KINDS)) $(if $(DATA),--data $(DATA)) $(if $(FRESH),--fresh) $(UP_ARGS)

down: setup
	$(BIN)/leasehold local down

# Unit and integration tests spread over the cores (in-process moto: CPU-bound, independent);
# then the end-to-end tests, two local stacks at a time by default (PYTEST_E2E_WORKERS=1 runs one;
# decisions CI10, CI12, CI13, CI18): each test's stack has its own tmp directories and binds
# port 0, and they mostly wait on real processes. --dist loadfile keeps a file's tests on one
# worker, so a module's shared stack boots once. Last, the `alone` tests (the demo) by themselves.
# PYTEST_WORKERS=3 for the first run measured no faster on 2 cores (344 s against 338 s).
# make test: every test but the long ones; make test-long: the long ones (the long end-to-end
# runs, the 1,000-due-jobs pass, the workflow crash-matrix cells' quarter)
test: setup
	$(BIN)/pytest -m "not e2e and not long" -n $${PYTEST_WORKERS:-2} --dist worksteal
	$(BIN)/pytest -m "e2e and not long and not alone" -n $${PYTEST_E2E_WORKERS:-2} --dist loadfile
	$(BIN)/pytest -m "e2e and not long and alone"

test-long: setup
	$(BIN)/pytest -m long

test-unit: setup
	$(BIN)/pytest -m unit

test-integration: setup
	$(BIN)/pytest -m integration

test-e2e: setup
	$(BIN)/pytest -m e2e

# lint-imports: the import arrows between the engine, the applications and the dev stack
# (pyproject.toml [tool.importlinter]).
lint: setup
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

# docs/openapi.yaml against Redocly's recommended rules (redocly.yaml): no error, no warning
lint-openapi: redocly
	$(REDOCLY) lint --config redocly.yaml docs/openapi.yaml

format: setup
	$(BIN)/ruff format src tests bench scripts
	$(BIN)/ruff check --fix src tests bench scripts

# The manual as a site (mkdocs.yml: docs/, the README as its home page, an API reference from
# the docstrings) in site/. --strict: a link to a missing page or anchor fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean

# checkov lives apart, in its own venv (.venv-tools, built the first time): checkov 3.3.30 pins
# boto3==1.35.49 and packaging<24, while aws-sam-cli pins boto3==1.43.108 and pytest needs
# packaging>=24, so one venv cannot hold both. It scans the SAM template itself (it reads
# AWS::Serverless::Function and HttpApi); each check skipped carries its reason in the
# resource's Metadata and in docs/decisions.md ("checkov"). --skip-download: no calls to
# Prisma Cloud for guideline links, so it runs offline.
CHECKOV_VERSION := 3.3.30
TOOLS := .venv-tools
CHECKOV_STAMP := $(TOOLS)/.checkov-$(CHECKOV_VERSION)-stamp

$(CHECKOV_STAMP):
	@test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --upgrade pip
	$(TOOLS)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	@rm -f $(TOOLS)/.checkov-*-stamp
	@touch $@

# checkov's venv alone (.ci/run builds it beside make setup: two installs, one wait)
tools: $(CHECKOV_STAMP)

validate: setup $(CHECKOV_STAMP)
	$(BIN)/sam validate --lint --template template.yaml
	$(BIN)/cfn-lint template.yaml
	$(TOOLS)/bin/checkov -f template.yaml --framework cloudformation --compact --quiet --skip-download

# sam build runs src/Makefile's build-<LogicalId> for each function: the engine, the
# applications and requirements.txt's wheels for python3.13/arm64. Its pip runs with the
# python3.13 found here (pyenv keeps one), the runtime's own interpreter.
build: setup
	@py313=""; \
	for candidate in $$(ls -d $$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)/versions/3.13*/bin/python3.13 2>/dev/null) $$(command -v python3.13); do \
	  if "$$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then py313=$$candidate; fi; \
	done; \
	if [ -z "$$py313" ]; then echo "make build: no working python3.13 found (on PATH or under pyenv); install one, e.g. 'pyenv install 3.13'" >&2; exit 1; fi; \
	echo "sam build with $$py313"; \
	PATH="$$(dirname $$py313):$$PATH" PYTHON="$$py313" $(BIN)/sam build --template template.yaml

# samconfig.toml's profile: default (a fresh account's 10 executions) or production (an
# account of 1,000: make deploy CONFIG_ENV=production). docs/capacity.md has the arithmetic.
CONFIG_ENV ?= default
deploy: build
	$(BIN)/sam deploy --config-env $(CONFIG_ENV)

delete: setup
	$(BIN)/sam delete --config-env $(CONFIG_ENV)

# Counts on moto, priced: bench/results.json, bench/README.md, bench/cost.svg (a few minutes).
bench: setup
	$(BIN)/python -m bench.run_bench

# The key-heat model: the capacity doc's mix recorded on moto key by key and replayed at 10,000
# jobs/s over the IndexShards layout → bench/scale.json; prints the rate where the first key
# reaches 80 % of its partition, before sharding and after (two minutes or so).
# BENCH_ARGS="--rate 50000 --shards 16 --out /tmp/scale.json" for another rate or layout.
bench-scale: setup
	$(BIN)/python -m bench.scale $(BENCH_ARGS)

# Local throughput (the embedded stack, not AWS), the journal against --in-memory, and the time to
# restart with 10,000 jobs in the data directory: BENCH_ARGS="--jobs 500 --window 100
# --compare-jobs 500 --restart-jobs 1000" for a short run.
bench-local: setup
	$(BIN)/python bench/run_local.py $(BENCH_ARGS)

# Priorities on the local stack: 20 high jobs behind 1,000 normal ones, against the same 20 as
# normal, and 20 low ones meanwhile (bench/priorities.json; a few minutes).
bench-priorities: setup
	$(BIN)/python bench/priorities.py $(BENCH_ARGS)

# Keeps .leasehold/data (and data.previous): the local stack's state is not a build artefact.
clean:
	rm -rf .aws-sam .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
	if [ -d .leasehold ]; then find .leasehold -mindepth 1 -maxdepth 1 ! -name data ! -name data.previous -exec rm -rf {} +; fi

# Break each guarantee once in a temporary copy and run the suite: every mutant must be killed.
mutants: setup
	$(BIN)/python scripts/mutants.py

# A job of every kind crashed before and after every store call its worker makes, recovered and
# checked (in-process on moto, ~1 min); writes docs/crash-matrix.md. make test runs a quarter.
crash-matrix: setup
	$(BIN)/python scripts/crash_matrix.py

# Screenshots of the operator console (overview, a job's timeline, the replay dialog) on a local
# stack of its own, in headless Chromium: docs/console/*.png, shown in the README (~1.5 min).
console-shots: setup
	$(BIN)/python scripts/console_shots.py

# leasehold new's cookiecutter copies of template.yaml and src/requirements.txt, rewritten from
# them (tests/integration/test_scaffold.py fails until this has run after either changes).
scaffold-template: setup
	$(BIN)/python -m leasehold_dev.scaffold

# A project made by `leasehold new`, from nothing: its own venv, make test, sam validate --lint,
# sam build, make up and a job of its kind (minutes; tests/e2e/test_scaffold.py is the short one).
scaffold-check: setup
	$(BIN)/python scripts/scaffold_check.py

# A thousand jobs over HTTP while workers are killed and store faults are injected (local stack).
soak: setup
	$(BIN)/python scripts/soak.py
# schemathesis against the local stack from docs/openapi.yaml, every route, as alice, carol and ops
#. FUZZ_MAX_EXAMPLES (default 20) is the budget per operation and phase; FUZZ_ARGS
# passes more (e.g. --seed N to replay a run, --url to use a stack already up).
fuzz: setup
	$(BIN)/python scripts/fuzz.py $${FUZZ_ARGS}
