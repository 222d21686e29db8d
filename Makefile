# GRPO from scratch: the two commands are `make lab` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# extra pip options, e.g. PIP_OPTS="--extra-index-url https://download.pytorch.org/whl/cpu"
PIP_OPTS ?=
# extra options for `make lab`, e.g. LAB_ARGS="--no-browser --port 8899"
LAB_ARGS ?=
# extra options for pytest, e.g. PYTEST_ARGS="-k sandbox"
PYTEST_ARGS ?=

.PHONY: setup browser exp1 exp2 exp3 reproduce lab lab-reset test test-unit test-notebooks test-colab notebooks bench lint mutate clean

setup: $(STAMP)

# Re-run the install whenever a dependency file changes; the stamp is written last, so an
# interrupted install is retried.
# The package and its runtime dependencies come from pyproject.toml; the `lab` extra adds
# JupyterLab, jupytext and nbval (a learner's environment: `make setup`, `make lab`); the
# `test` extra adds pytest, ruff and mutmut, only for `make test`, `lint` and `mutate`.
$(STAMP): pyproject.toml requirements-nodeps.txt constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install $(PIP_OPTS) -c constraints.txt -e ".[lab]"
	$(BIN)/python -m pip install $(PIP_OPTS) --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m grpo_core.environment
	touch $@

# The browser test (tests/test_browser.py) drives Debian's chromium through Playwright; only
# `make test` needs it. Outside CI a machine that cannot install chromium (not root, no apt)
# prints how to install it and the test is skipped; in CI (CI=true) that is an error.
TEST_STAMP := $(VENV)/.test-installed

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install $(PIP_OPTS) -c constraints.txt -e ".[test]"
	touch $@

BROWSER_STAMP := $(VENV)/.browser-installed

$(BROWSER_STAMP): $(TEST_STAMP) requirements-browser.txt tools/install_browser.sh
	sh tools/install_browser.sh || [ -z "$$CI" ]
	$(BIN)/python -m pip install $(PIP_OPTS) -r requirements-browser.txt
	touch $@

browser: $(BROWSER_STAMP)

# Jupyter refuses to run as root without --allow-root (CI, containers, Colab-like machines).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

# tools/lab_config/: hide the .py twins from the file browser, no news pop-up; open the start page
LAB_CONFIG := JUPYTER_CONFIG_PATH=$(CURDIR)/tools/lab_config$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH),)
# A learner's runs never overwrite the course: JupyterLab opens working copies in lab/ (git
# ignores it; made on first start, never written back: tools/lab_copies.py). make lab-reset
# starts every copy afresh; rm lab/<notebook>.ipynb one of them. Maintainers edit notebooks/.
# The server's root is the repository, so that the file browser reaches solutions/, docs/,
# data/runs/ and the README, and the notebooks' links to them work; the browser lists neither
# notebooks/ (the committed results) nor the jupytext twins (tools/lab_config). Each start has
# a fresh workspace: no tab of an earlier visit reopens, each with a kernel of its own.
LAB_WORKSPACES := $(VENV)/lab-workspaces
lab: $(STAMP)
	$(BIN)/python tools/lab_copies.py
	rm -rf $(LAB_WORKSPACES)
	$(LAB_CONFIG) JUPYTERLAB_WORKSPACES_DIR=$(CURDIR)/$(LAB_WORKSPACES) $(BIN)/jupyter lab \
		--ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/lab/START_HERE.ipynb \
		$(ALLOW_ROOT) $(LAB_ARGS)

lab-reset: $(STAMP)
	$(BIN)/python tools/lab_copies.py --reset

# Colab as it is, in CI: a second venv (.venv-colab) made by Python 3.13 (Colab's) holding
# Colab's whole published package set (tools/colab/pip-freeze.gpu.txt: the packages a notebook,
# a test or pip can load installed for real at Colab's versions, torch 2.11.0 among them; the
# rest as their metadata, which is all pip reads: tools/colab_env.py). Then the setup runs as a
# notebook's first cell runs it, twice for an ordinary notebook and twice for notebook 10, and
# fails on a pip error or conflict, a Colab package changed without a stated reason, or a
# restart a notebook does not need (tools/colab_env.py check). Then the test tools, and the
# widget tests, the TRL parity tests and notebooks 03, 04, 10 and 11 under nbval with Colab's
# versions. Not tested:
# Colab's GPU and its CUDA 12.8 build of torch. About 5 minutes on a 2-core machine, the
# build only when an input file changes (figures in the closing notes of issue 46).
COLAB_VENV ?= .venv-colab
COLAB_BIN := $(COLAB_VENV)/bin
COLAB_STAMP := $(COLAB_VENV)/.installed
# Colab's Python where pyenv has it, else this machine's python3 (with a warning)
COLAB_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13.*/bin/python3) $(PYTHON))
# pyproject.toml's `test` extra as requirement lines, from the course's installed metadata
COLAB_TEST_EXTRA := from importlib.metadata import requires; print("\n".join(r.split(";")[0] for r in requires("grpo-course") if r.endswith("extra == \"test\"")))
COLAB_TESTS := tests/test_widgets.py tests/test_widget_snapshot.py tests/test_explorer.py \
	tests/test_token_view.py tests/test_colab.py tests/test_colab_env.py tests/test_requirements.py \
	tests/test_trl_parity.py tests/test_package.py::test_the_course_code_compiles_without_a_warning \
	tests/test_package.py::test_importing_every_module_of_the_package_warns_nothing_from_the_course
COLAB_NOTEBOOKS := notebooks/03_group_baseline.ipynb notebooks/04_guardrails.ipynb \
	notebooks/10_trl.ipynb notebooks/11_reading_the_run.ipynb
# GRPO_COLAB_PINNED: tests/test_requirements.py checks Colab's versions survived the setup;
# PYDEVD_DISABLE_FILE_VALIDATION: Colab's ipykernel starts debugpy, which warns about frozen
# modules in every kernel
COLAB_PYTEST := GRPO_PROFILE=smoke HF_HUB_OFFLINE=1 GRPO_COLAB_PINNED=1 PYDEVD_DISABLE_FILE_VALIDATION=1 \
	$(COLAB_BIN)/python -m pytest --nbval-lax $(COLAB_TESTS) $(COLAB_NOTEBOOKS)

# Built from scratch whenever an input changes, in Colab's order: its runtime first, then the
# setup cell's install (judged), then the test tools, which the widget pins constrain (a tool
# that needed another ipywidgets or numpy would fail the install). The venv ignores itself in
# git, as Python 3.13's venvs do.
$(COLAB_STAMP): tools/colab/pip-freeze.gpu.txt tools/colab/metadata.json tools/colab_env.py \
		tools/colab_setup.py tools/colab_pins.txt requirements-colab.txt requirements-colab-trl.txt \
		requirements-nodeps.txt constraints.txt pyproject.toml
	rm -rf $(COLAB_VENV)
	@$(COLAB_PYTHON) -c 'import sys; sys.version_info[:2] == (3, 13) or print("WARNING: no Python 3.13 here (Colab runs 3.13); the Colab check uses", sys.version.split()[0])'
	$(COLAB_PYTHON) -m venv $(COLAB_VENV)
	echo '*' > $(COLAB_VENV)/.gitignore
	$(BIN)/python tools/colab_env.py build $(COLAB_VENV) --pip-opts "$(PIP_OPTS)"
	$(BIN)/python tools/colab_env.py check $(COLAB_VENV)
	$(BIN)/python tools/colab_env.py check $(COLAB_VENV) --notebook 10_trl
	$(COLAB_BIN)/python -c '$(COLAB_TEST_EXTRA)' > $(COLAB_VENV)/test-extra.txt
	$(COLAB_BIN)/python -m pip install $(PIP_OPTS) -c tools/colab_pins.txt \
		-r $(COLAB_VENV)/test-extra.txt
	touch $@

test-colab: $(COLAB_STAMP)
	$(COLAB_PYTEST)

# Unit tests and every notebook (nbval, lax mode) in the smoke profile, offline; then the same
# for the widgets and three notebooks under Colab's versions (test-colab, above). PYTEST_ARGS
# applies to the first run only.
test: $(TEST_STAMP) $(BROWSER_STAMP) $(COLAB_STAMP)
	GRPO_PROFILE=smoke HF_HUB_OFFLINE=1 $(BIN)/python -m pytest --nbval-lax $(PYTEST_ARGS) tests notebooks
	$(COLAB_PYTEST)

test-unit: $(TEST_STAMP) $(BROWSER_STAMP)
	GRPO_PROFILE=smoke HF_HUB_OFFLINE=1 $(BIN)/python -m pytest $(PYTEST_ARGS) tests

test-notebooks: $(TEST_STAMP)
	GRPO_PROFILE=smoke HF_HUB_OFFLINE=1 $(BIN)/python -m pytest --nbval-lax $(PYTEST_ARGS) notebooks

# Re-create every notebook from its py:percent twin and execute it in the cpu profile,
# so the committed notebooks show real results.
notebooks: $(STAMP)
	GRPO_PROFILE=cpu HF_HUB_OFFLINE=1 $(BIN)/python tools/notebooks.py build

# Experiment 1 (the length reward) headless; PROFILE=gpu on a GPU machine with the Hub.
PROFILE ?= cpu
exp1: $(STAMP)
	$(if $(filter gpu,$(PROFILE)),,HF_HUB_OFFLINE=1) $(BIN)/python -m grpo_core length --profile $(PROFILE) --out runs/exp1-length-$(PROFILE)

# experiment 2 at each group size of the sweep (same completions per step): make exp2 K=16.
# In the cpu profile, exp2 and exp3 run the recorded runs' own commands
# (data/runs/exp2-k$(K)-cpu, exp3-stop-cpu: tools/reproduce.py) into runs/; elsewhere the
# profile's own sizes.
K ?= 8
exp2: $(STAMP)
ifeq ($(PROFILE),cpu)
	HF_HUB_OFFLINE=1 $(BIN)/python tools/reproduce.py exp2-k$(K)-cpu
else
	$(if $(filter gpu,$(PROFILE)),,HF_HUB_OFFLINE=1) $(BIN)/python -m grpo_core mbpp --k $(K) --profile $(PROFILE) --out runs/exp2-mbpp-k$(K)-$(PROFILE)
endif

exp3: $(STAMP)
ifeq ($(PROFILE),cpu)
	HF_HUB_OFFLINE=1 $(BIN)/python tools/reproduce.py exp3-stop-cpu
else
	$(if $(filter gpu,$(PROFILE)),,HF_HUB_OFFLINE=1) $(BIN)/python -m grpo_core hacking --profile $(PROFILE) --out runs/exp3-hacking-$(PROFILE)
endif

# any recorded run's own command again, into runs/<RUN>: make reproduce RUN=exp2-k8-seed1-cpu
reproduce: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python tools/reproduce.py $(RUN)

bench: $(STAMP)
	for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# Mutation testing with mutmut, outside `make test`: mutates the modules listed in
# pyproject.toml's [tool.mutmut] (the one place to edit), runs their fast tests against each
# mutant, prints `<module>: <killed>/<total> killed (<pct>%)` per module, the survivors and
# tests/mutation_survivors.md; fails below 90 % or on a survivor that file does not explain.
# About 28 minutes on a 2-core machine on 2 December, when it mutated 8 modules (4353
# mutants; a lint run shared a minute or two of it); the list has grown since.
# Only some modules: make mutate MUTATE_ARGS="grpo_core/loss.py" (diagnosis alone: about 6 min)
MUTATE_ARGS ?=
mutate: $(TEST_STAMP)
	nice -n 10 $(BIN)/python tools/mutate.py $(MUTATE_ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check grpo_core tests benchmarks scripts tools notebooks/*.py

clean:
	rm -rf $(VENV) $(COLAB_VENV) .pytest_cache .hypothesis .ruff_cache mutants
