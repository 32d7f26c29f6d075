# Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all install demo test lit pytest bench fuzz conformance clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: pytest lit

pytest: $(STAMP)
	$(PY) -m pytest -q -n auto

lit: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/lit -sv tests/lit

# PyTorch and matplotlib for the benchmark suite (the `bench` extra); LIBXSMM comes from the
# system (apt-get install libxsmm-dev) and is skipped with a reason when absent
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) benchmarks/frontend.py
	$(PY) benchmarks/interp.py
	$(PY) benchmarks/cpu.py
	$(PY) benchmarks/suite.py $(BENCH_ARGS)

fuzz: $(STAMP)
	$(PY) fuzz/fuzz_frontend.py --inputs 100000
	$(PY) fuzz/fuzz_differential.py --programs 3000

conformance: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) ../shared/tools/conformance --ttlc "$(CURDIR)/$(PY) -m ttlc" --only reject,accept,roundtrip

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
