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

.PHONY: serve test venv lint bench bench-multilingual clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test,bench,multilingual]'
	touch $(STAMP)

venv: $(STAMP)

serve: $(STAMP)
	$(BIN)/skillsearch serve

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/relevance.py

# French, Japanese and Chinese requests vs their English originals, for both encoders (see docs/benchmarks.md).
bench-multilingual: $(STAMP)
	PYTHONPATH=. $(BIN)/python benchmarks/multilingual.py all --out benchmarks/results/multilingual.json

lint: $(STAMP)
	$(BIN)/pip install --quiet ruff mypy
	$(BIN)/ruff check skillsearch tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
