# Every target that needs Python creates .venv on a fresh machine first.
# torch==2.13.0 goes in before anything else: its CPU wheel lies on disk, while any other
# resolution of torch would pull a multi-GB CUDA build.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Extra arguments of `skillsearch serve`: make serve SERVE_ARGS="--port 8001"
SERVE_ARGS ?=
# setuptools prints two notices while it builds this package, each time, that need no action: the
# `[tool.setuptools.ext-modules]` table (the C kernel) is "experimental", and an editable install's banner.
QUIET_BUILD := PYTHONWARNINGS='ignore:`[tool.setuptools.ext-modules]`,ignore:Editable installation'


.PHONY: serve test venv lint bench bench-multilingual clean browser haproxy screenshot

$(STAMP): pyproject.toml Makefile skillsearch/retrieval/_int8dots.c
	@echo "setting up $(VENV) (first run, or pyproject.toml/Makefile changed): 1.5 to 2 minutes on 2 cores"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "installing torch 2.13.0, the CPU wheel (20-40 s)"
	$(BIN)/pip install --quiet torch==2.13.0
	@echo "installing skillsearch with its extras and compiling its C kernel (1 to 1.5 minutes)"
	$(QUIET_BUILD) $(BIN)/pip install --quiet -e '.[test,bench,multilingual,dev]'
	touch $(STAMP)

venv: $(STAMP)

serve: $(STAMP)
	$(BIN)/skillsearch serve $(SERVE_ARGS)

# One worker per core plus one, tests handed out as workers free up (--dist worksteal). Much of the suite waits
# on real processes (servers starting, SIGTERM/SIGKILL runs, git, chromium, haproxy), so a core-per-worker
# suite leaves the cores idle part of the time: on 2 cores, quiet, with the same 1,818 tests (2026-12-07), two
# workers took 706-840 s at 70 % of both cores, three 687 s at 91 %. At most 4 workers: each loads the models
# its tests need (both: about 400 MB) and builds its own catalogs. One worker: make test TEST_WORKERS=0.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 1)); [ "$$n" -gt 4 ] && n=4; echo $$n)
test: $(STAMP) browser haproxy
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# The search-page test drives Debian's chromium through Playwright (never `playwright install`, which
# downloads browsers). Installed once, only when missing and only as root; a CJK font renders the sample.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei; \
	fi
	@test -x /usr/bin/chromium || echo "warning: /usr/bin/chromium is missing: apt-get install chromium" >&2

# The fleet test (tests/test_fleet.py) puts Debian's HAProxy in front of three replicas, with the configuration
# docs/deploy.md gives (deploy/haproxy.cfg). Installed once, only when missing and only as root.
haproxy:
	@if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ] && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; \
	fi
	@command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || echo "warning: haproxy is missing: apt-get install haproxy (tests/test_fleet.py skips)" >&2

# Refresh docs/search-page.png from the browser test.
screenshot: $(STAMP) browser
	SKILLSEARCH_SCREENSHOTS=docs $(BIN)/python -m pytest tests/test_search_page.py -q

bench: $(STAMP)
	$(BIN)/python benchmarks/relevance.py

# French, Japanese and Chinese requests vs their English originals, for both encoders (see docs/benchmarks.md).
bench-multilingual: $(STAMP)
	PYTHONPATH=. $(BIN)/python benchmarks/multilingual.py all --out benchmarks/results/multilingual.json

lint: $(STAMP)
	$(BIN)/ruff check skillsearch tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
