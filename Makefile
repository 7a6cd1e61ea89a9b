# Set-up and every routine task of the course. `make help` lists the targets.
#
# The first target that needs Python creates $(VENV) and installs requirements.txt and
# the tinyllm package into it; the stamp file $(VENV)/.installed makes later runs skip
# that until requirements.txt or pyproject.toml change.

VENV ?= .venv
PYTHON ?= python3
PORT ?= 8888

PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(wildcard notebooks/*.ipynb notebooks/solutions/*.ipynb)
SANITIZE := notebooks/nbval_sanitize.cfg

# JupyterLab refuses to run as root unless told; only then is --allow-root added.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# Notebook kernels run with a fixed hash seed and no MPLBACKEND: ipykernel selects the
# inline backend only when MPLBACKEND is unset, and under Agg the figures would vanish
# from the executed notebooks. `make notebooks` and the nbval run of `make test` use the
# same environment, so the committed outputs are what nbval compares against.
NB_ENV := env -u MPLBACKEND PYTHONHASHSEED=0
# Every target's processes: a torch.profiler session leaves CUPTI attached unless this is 1,
# and times that hold a launch grow after it (notebook 11, R.3). The bench, the notebooks
# run live on a GPU and the Lab all profile.
export TEARDOWN_CUPTI := 1
# The unit tests draw figures off-screen, and run on every core (pytest-xdist), one torch
# thread each, a test file to a worker: the browser test's one Lab stays on one worker, and
# on 2 cores the tests took about 5 s less than sent test by test, likely as a file's module
# fixtures are built once. nbval's plugin stays out of them (it is slow to import).
TEST_ENV := env PYTHONHASHSEED=0 MPLBACKEND=Agg OMP_NUM_THREADS=1
UNIT := -p no:nbval -n auto --dist loadfile

.DEFAULT_GOAL := help
.PHONY: help install lab lint test test-unit notebooks images bench gpu screenshots clean

help: ## list these targets
	@grep -E '^[a-z][a-z_-]*:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install -e . --no-deps
	touch $@

install: $(STAMP) ## create .venv and install everything into it, without starting the Lab

# The Lab serves the repository root, so that tinyllm/, results/ and the model card open in
# it, and lands in notebooks/ (the URL it prints, and where / redirects).
lab: $(STAMP) ## open the course in JupyterLab on 127.0.0.1 (token on; PORT=8888)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(PORT) --no-browser \
		--ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks $(ALLOW_ROOT)

lint: $(STAMP) ## ruff: lint and format check of the package, tests, tools and notebooks
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/ruff format --no-cache --check .

# Lint, then the unit tests, then every notebook (solutions/ included) under strict nbval.
# All three always run; the target fails if any does.
test: $(STAMP) ## run every test: lint, unit tests, then all notebooks under strict nbval
	@status=0; \
	$(MAKE) --no-print-directory lint || status=$$?; \
	$(TEST_ENV) $(PY) -m pytest $(UNIT) tests || status=$$?; \
	$(NB_ENV) $(PY) -m pytest --nbval --nbval-current-env --nbval-cell-timeout=600 \
		--nbval-sanitize-with $(SANITIZE) notebooks || status=$$?; \
	exit $$status

test-unit: $(STAMP) ## the unit tests alone, without the browser test (about 1.5 minutes on 2 cores)
	$(TEST_ENV) $(PY) -m pytest $(UNIT) tests -m "not browser" -q

notebooks: $(STAMP) ## re-execute every notebook in place from a clean kernel
	$(NB_ENV) $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=600 $(NOTEBOOKS)

images: $(STAMP) ## draw the figures in images/ and the README's H200 table from results/
	$(PY) -m tinyllm.course.images
	$(PY) -m tinyllm.course.readme

bench: $(STAMP) ## measure this machine's GPU into results/
	$(PY) -m tinyllm.lab.bench

gpu: ## on a GPU machine: cuda tests, the bench and every notebook, logs in OUT (a new folder)
	tools/gpu_run.sh $(or $(OUT),/tmp/gpu-run-$(shell date +%Y%m%d-%H%M%S)) --tests --notebooks --bench

screenshots: $(STAMP) ## screenshots of the explorers in JupyterLab into images/ (needs /usr/bin/chromium)
	SCREENSHOT_DIR=images $(PY) -m pytest -m browser tests/test_browser.py

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build dist *.egg-info
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
