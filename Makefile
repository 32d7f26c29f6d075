# Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all install demo test lit pytest test-cpu-models bench fuzz conformance clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: pytest lit test-cpu-models

pytest: $(STAMP)
	$(PY) -m pytest -q -n auto --durations=25

# The executing tests once more with code for older x86-64 models (TTLC_CPU; such code
# runs on any newer machine), on a representative subset: casts of every pair of types,
# math, the runtime-library routines, f16/bf16 and coopmatrix mul_add, 16-bit gemm, loads
# and stores (a local temporary's loads in its stores' pieces), short K in one step, K of
# two in C's tiles and a member's A prefetched (whose tiles differ without AVX-512) and 12
# generated programs, so that no path needing AVX-512, FMA or F16C hides behind the
# host's features.  Target cpu only (the interpreter does not depend on it).
CPU_MODELS := x86-64-v2 x86-64-v3
CPU_MODEL_TESTS := tests/python/test_cpu_rtlib.py tests/python/test_cpu_backend.py \
	tests/python/test_interp_semantics.py tests/python/test_interp_coop.py \
	tests/python/test_differential.py tests/python/test_interp_gemm16.py \
	tests/python/test_cpu_transposed16.py tests/python/test_pass_linalg.py \
	tests/python/test_cpu_local_pieces.py tests/python/test_cpu_prefetch.py
CPU_MODEL_SELECT := scalar_ops or cast or math or subgroup_operations or coopmatrix or \
	mul_add or load or store or rtlib or generated or gemm16 or short_k_in_one_step_agrees or \
	reread_in_several_passes or column_blocks or rounds_of_k_steps or k_of_two_in_c_tiles

test-cpu-models: $(STAMP)
	set -e; for model in $(CPU_MODELS); do \
		echo "== TTLC_CPU=$$model"; \
		TTLC_CPU=$$model TTLC_DIFF_SEEDS=12 $(PY) -m pytest -q -n auto --targets=cpu \
			-k "$(CPU_MODEL_SELECT)" $(CPU_MODEL_TESTS); \
	done

lit: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/lit -sv tests/lit

# PyTorch and matplotlib for the benchmark suite (the `bench` extra) and Dask for the
# throughput of ttlc.dask on 1 and 2 local workers (benchmarks/scale.py); LIBXSMM comes from the
# system (apt-get install libxsmm-dev) and is skipped with a reason when absent
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench,dask]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) benchmarks/frontend.py
	$(PY) benchmarks/interp.py
	$(PY) benchmarks/cpu.py
	$(PY) benchmarks/suite.py $(BENCH_ARGS)
	$(PY) benchmarks/recipes.py
	$(PY) benchmarks/gemm16.py
	$(PY) benchmarks/small_gemm.py
	TTLC_CPU=x86-64-v3 $(PY) benchmarks/small_gemm.py
	$(PY) benchmarks/scale.py

# The GPU targets' validators (spirv-val, iree-opt, tileiras, mlir-opt): extras of pyproject.toml,
# which .ci/run installs too; their tests skip with a reason without them
GPU_TOOLS_STAMP := $(VENV)/.gpu-tools-installed

$(GPU_TOOLS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,spirv,iree,tile,xevm,opencl]'
	touch $(GPU_TOOLS_STAMP)

# The long counts that make test samples: front-end fuzzing, thousands of differential
# programs, the pass-meaning tests over 500 generated seeds with every GPU target,
# spirv-val over the SPIR-V of 2,000 generated programs, the iree-vector export of 1000
# generated programs through iree-opt, 1000 generated programs run by the copies cpu
# compiles for their arguments, 1000 faulty launches and 1000 kernels sharing local
# memory (data races) reported alike by checked interp and cpu (300 faulty launches on
# opencl), and target cuda-tile
# (NVIDIA's tools, the Tile IR interpreter) over 500 generated programs and every checked
# race and barrier kernel, 1000 racy kernels on target cuda's fake driver, upstream
# mlir-opt/mlir-translate over the xevm modules of 1,000 generated programs, and those
# modules run by the xevm simulator
fuzz: $(GPU_TOOLS_STAMP)
	$(PY) fuzz/fuzz_frontend.py --inputs 100000
	$(PY) fuzz/fuzz_differential.py --programs 3000
	TTLC_LONG=1 $(PY) -m pytest -q -n auto tests/python/test_pass_meaning.py
	TTLC_SPIRV_SEEDS=2000 $(PY) -m pytest -q -n auto tests/python/test_spirv.py -k generated
	TTLC_IREE_PROGRAMS=1000 $(PY) -m pytest -q tests/python/test_iree_vector.py
	TTLC_COPY_SEEDS=1000 $(PY) -m pytest -q -n auto tests/python/test_differential.py -k copies
	TTLC_FAULT_SEEDS=1000 TTLC_RACE_SEEDS=1000 TTLC_OPENCL_FAULT_SEEDS=300 TTLC_OPENCL_RACE_SEEDS=300 $(PY) -m pytest -q -n auto tests/python/test_differential.py -k faulty
	TTLC_TILE_SEEDS=500 $(PY) -m pytest -q -s tests/python/test_tile_backend.py -k corpus_counts
	TTLC_TILE_SEEDS=500 TTLC_TILE_OPT=3 TTLC_TILE_ARCHS=all $(PY) -m pytest -q -n auto tests/python/test_tile_backend.py -k corpus_emitted
	TTLC_TILE_OPT=3 TTLC_TILE_ARCHS=all $(PY) -m pytest -q -n auto tests/python/test_tile_races.py -k nvidia
	TTLC_CUDA_RACE_SEEDS=1000 $(PY) -m pytest -q -n auto tests/python/test_cuda.py -k generated_races
	TTLC_XEVM_SEEDS=1000 $(PY) -m pytest -q -n auto tests/python/test_xevm.py -k generated
	TTLC_XEVM_SIM_SEEDS=1000 $(PY) -m pytest -q -n auto tests/python/test_xevm_simulate.py -k generated

# The peer corpus lives outside this repository: CONFORMANCE names its runner
CONFORMANCE ?= ../shared/tools/conformance

conformance: $(STAMP)
	@test -f $(CONFORMANCE) || { echo "make conformance needs the peer corpus and its runner," \
		"not part of this repository: set CONFORMANCE=path/to/tools/conformance" \
		"(default $(CONFORMANCE), missing)"; exit 2; }
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) $(CONFORMANCE) --ttlc "$(CURDIR)/$(PY) -m ttlc" --only reject,accept,roundtrip

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
