# mlpilot — the two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_ROWS ?= 20000
DEMO_DATA ?= data/sales.csv
DEMO_PROMPT ?= find the key features driving sales and train a random forest
PYTEST_ARGS ?=
# Test files run in this many parallel workers, a file never split across two: the suite
# waits on pipelines and servers more than on the CPU (about 45% of 2 cores serially);
# three workers measured slower than two (1108 s against 1073 s, both on 2 cores).
TEST_WORKERS ?= 2
# Browser tests drive Debian's Chromium (Playwright never downloads a browser here).
CHROMIUM ?= /usr/bin/chromium
# A CJK font, so Chinese prompts render as glyphs, not boxes (the chat page's browser test).
CJK_FONT ?= /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc

.PHONY: demo test lint format gpu-check bench bench-automl clean install install-dev

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

## demo: install, generate sample sales data, launch a tracked experiment from one sentence
demo: $(VENV)/.installed
	$(BIN)/mlpilot datasets sales --rows $(DEMO_ROWS) --out $(DEMO_DATA)
	$(BIN)/mlpilot run "$(DEMO_PROMPT)" --data $(DEMO_DATA)
	@echo
	@echo "Where to look:"
	@echo "  dashboard:   $(BIN)/mlpilot dashboard   (then open http://127.0.0.1:8050/)"
	@echo "  MLflow UI:   $(BIN)/mlflow ui --backend-store-uri sqlite:///$${MLPILOT_HOME:-$$HOME/.mlpilot}/mlflow.db"
	@echo "  runs:        $(BIN)/mlpilot runs list"
	@echo "  plan only:   $(BIN)/mlpilot plan \"tune xgboost for 30 trials to predict sales\" --data $(DEMO_DATA)"

# Each Debian package the tests need, installed only when its file is missing; the package
# lists are updated only when an install cannot find its package, so once for both at most.
$(CHROMIUM): APT_PACKAGE = chromium
$(CJK_FONT): APT_PACKAGE = fonts-noto-cjk
$(CHROMIUM) $(CJK_FONT):
	@if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo=sudo; else \
		echo "the browser tests need Debian's $(APT_PACKAGE): apt-get install $(APT_PACKAGE)" >&2; exit 1; \
	fi; \
	install="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGE)"; \
	$$install >/dev/null 2>&1 || { $$sudo apt-get update -qq && $$install >/dev/null; }; \
	test -e $@ || { echo "$(APT_PACKAGE) is installed but $@ is not there: set $(if $(filter $@,$(CHROMIUM)),CHROMIUM,CJK_FONT)=…" >&2; exit 1; }

## test: install the dev extra and what the tests need (Debian's chromium and fonts-noto-cjk), then run the whole suite
test: $(VENV)/.installed-dev $(CHROMIUM) $(CJK_FONT)
	MLPILOT_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## gpu-check: the one command on a GPU machine: installs the gpu extra, then checks where
## every stage really runs (see README "Engines" for what it prints)
gpu-check: $(VENV)/.installed-dev
	$(BIN)/python -m pip install -q -e '.[gpu,dev]'
	-$(BIN)/mlpilot doctor
	$(BIN)/python -m pytest -m gpu -rs -v -s tests/gpu

## bench: the stage table (CPU engine, and the GPU engine where usable; BENCH_ARGS=--full
## for the write-up's sizes), then the AutoML comparison (bench-automl). Other benchmarks:
## benchmarks/{overhead,hpo,tracking,dashboard}.py
BENCH_ARGS ?=
AUTOML_ARGS ?=
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/stages.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/automl.py $(AUTOML_ARGS)

## bench-automl: mlpilot's full AutoML against FLAML and AutoGluon-Tabular at an equal budget
## on the twelve benchmark sets (installs the peers into benchmarks/.peers-venv once; up to
## 90 minutes at 60 s). AUTOML_ARGS="--budget 300" or "--quick" (four sets)
bench-automl: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/automl.py $(AUTOML_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
