# ampconv developer targets. Every target that runs code creates and uses its
# own virtual environment (.venv) so a fresh clone needs only python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
AMPCONV := $(VENV)/bin/ampconv
# onnxruntime-gpu when an NVIDIA driver answers, the CPU build otherwise (never both).
RUNTIME_EXTRA := $(shell nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)
SAMPLES := sample_models/out
# Every install of the pinned targets resolves to the exact versions in
# constraints.txt (the build backend's too: pip reads PIP_CONSTRAINT in its
# isolated build environment), so an upstream release cannot change a run.
# `make lock` rewrites the file on purpose; `make test-latest` tries the newest.
CONSTRAINTS := $(CURDIR)/constraints.txt
PINNED := PIP_CONSTRAINT=$(CONSTRAINTS)
LATEST_VENV := .venv-latest
GPU_VENV := .venv-gpu
GPU_WHEEL_VENV := .venv-gpu-wheel
LOCK_VENV := .venv-lock

.PHONY: venv install install-test install-bench demo test test-gpu-wheel test-browser test-latest lock dist samples bench bench-gpu corpus fuzz lint clean

$(VENV)/.created: constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PINNED) $(PIP) install -q --upgrade pip setuptools wheel
	touch $@

venv: $(VENV)/.created

install: venv
	$(PINNED) $(PIP) install -q -e ".[$(RUNTIME_EXTRA)]"

# The test suite's extras only: no torch, so CI stays fast and never meets a CUDA package.
install-test: venv
	$(PINNED) $(PIP) install -q -e ".[test]"

# The benchmarks add torch and transformers (bench/deploy_models.py exports its zoo
# with them). The torch pin in constraints.txt resolves to the CPU wheel: unpinned,
# pip would pull several GB of CUDA packages.
install-bench: venv
	$(PINNED) $(PIP) install -q -e ".[test,bench]"

samples: install
	$(PY) sample_models/build.py --out $(SAMPLES)

demo: samples
	$(AMPCONV) convert $(SAMPLES)/transformer.onnx --level O2 --mixlist sample_models/mixlist.json \
	    -o $(SAMPLES)/transformer.fp16.onnx --report $(SAMPLES)/transformer.report.json --overwrite \
	    --validate --shape batch:2 --samples 4
	@echo "converted model: $(SAMPLES)/transformer.fp16.onnx (report: $(SAMPLES)/transformer.report.json)"
	@echo "ampconv lives in $(VENV): run 'source $(VENV)/bin/activate' (or call $(AMPCONV)); then see the README's 'Your first model in five lines'"

test: install-test
	$(PY) -m pytest -q -m "not slow" tests

# The GPU wheel as a CI runner has it (issue 41): a second pinned environment that holds onnxruntime-gpu
# and not the CPU wheel (both install the package onnxruntime) runs the CLI smoke test, tests/gpu_wheel:
# convert fp16, bf16, the bf16 fallback on a model that overflows fp16, validate, report, --level auto,
# each in a process of its own, each to exit 0 with no line of onnxruntime's own on stderr. Without CUDA's
# libraries (no GPU) that is the runner's case; where a GPU is lent, run the same target there too.
# Bounded: about 2 minutes in all the first time (the environment built from pip's cache), 40-60 s after
# (measured on 2 shared cores); each step has a timeout.
test-gpu-wheel:
	test -d $(GPU_WHEEL_VENV) || $(PYTHON) -m venv $(GPU_WHEEL_VENV)
	$(PINNED) timeout 150 $(GPU_WHEEL_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(PINNED) timeout 240 $(GPU_WHEEL_VENV)/bin/python -m pip install -q -e ".[gpu]" pytest
	@if $(GPU_WHEEL_VENV)/bin/python -m pip show onnxruntime >/dev/null 2>&1; then \
	    echo "test-gpu-wheel: $(GPU_WHEEL_VENV) holds the CPU wheel onnxruntime beside onnxruntime-gpu; rm -rf $(GPU_WHEEL_VENV)"; exit 1; fi
	AMPCONV_GPU_WHEEL=1 timeout 180 $(GPU_WHEEL_VENV)/bin/python -m pytest -q tests/gpu_wheel

# The HTML report page in headless Chromium (installed with apt when missing; needs root for that).
# Screenshots of a passing and a failing page are kept in $(SCREENSHOTS) (report_page_pass.png, report_page_fail.png).
SCREENSHOTS := build/screenshots
test-browser: install-test
	@if ! which chromium >/dev/null 2>&1; then \
	    if [ "$$(id -u)" != 0 ]; then echo "test-browser: chromium is not installed; run 'sudo apt-get install -y chromium' (or make test-browser as root)"; exit 1; fi; \
	    apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	fi
	AMPCONV_SCREENSHOTS=$(SCREENSHOTS) $(PY) -m pytest -q tests/report/test_html_report.py
	@echo "screenshots: $(SCREENSHOTS)/report_page_pass.png, $(SCREENSHOTS)/report_page_fail.png"

# The same suite against the newest releases of every dependency of the tests (no constraints).
test-latest:
	rm -rf $(LATEST_VENV)
	$(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e ".[test]"
	$(LATEST_VENV)/bin/python -m pip list --format=freeze | grep -iE '^(onnx|onnx-ir|onnxruntime|numpy|ml.dtypes|protobuf)=='
	$(LATEST_VENV)/bin/python -m pytest -q -m "not slow" tests

# A wheel of ampconv in dist/ (install it with: pip install -c constraints.txt "dist/ampconv-*.whl[cpu]").
dist: venv
	$(PINNED) $(PIP) wheel -q --no-deps -w dist .

# Resolve the newest releases in a throw-away environment and pin them.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	# torch first, at the pinned CPU build: the newest torch on PyPI brings GBs of CUDA packages.
	$(LOCK_VENV)/bin/python -m pip install -q "$$(grep -E '^torch==' constraints.txt)"
	$(LOCK_VENV)/bin/python -m pip install -q ".[test,bench,cpu]"
	$(LOCK_VENV)/bin/python scripts/lock.py --python $(LOCK_VENV)/bin/python --out constraints.txt
	# The runtime's type ties are read from the pinned onnxruntime's kernel registry (ampconv/runtime/kernel_ties.py).
	$(LOCK_VENV)/bin/python scripts/kernel_ties.py
	rm -rf $(LOCK_VENV) build

corpus: install-test
	$(PY) scripts/corpus.py --out docs/corpus_summary.md

bench: install-bench
	$(PY) bench/run_all.py --out bench/results

# onnxruntime-gpu's CUDA latency of float32, ampconv fp16/bf16, onnxruntime's float16 tool and
# onnxconverter-common fp16, on the samples and the deployment zoo (its own environment: the GPU
# runtime is never installed beside the CPU one; torch comes pinned to its CPU wheel, for export only).
bench-gpu:
	test -d $(GPU_VENV) || $(PYTHON) -m venv $(GPU_VENV)
	$(PINNED) $(GPU_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(PINNED) $(GPU_VENV)/bin/python -m pip install -q -e ".[gpu,bench]"
	$(GPU_VENV)/bin/python bench/gpu_latency.py --out bench/results

# Thousands of mutated models, policy files and input files, then valid models in the graph
# shapes that once broke the converter, each converted four ways, then 300 normalization
# spellings judged under emulation (CI runs a sample of each in `make test`). About 20 s,
# then 9-14 minutes, then about 2 minutes on 2 cores.
fuzz: install-test
	$(PY) scripts/fuzz.py --cases 3000 --seed 1
	$(PY) scripts/fuzz.py --family valid --cases 2500 --seed 1
	$(PY) scripts/fuzz_spellings.py --cases 300 --seed 1

lint: install-test
	$(PIP) install -q ruff
	$(VENV)/bin/ruff check ampconv ampconv_cli tests sample_models bench scripts

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(LOCK_VENV) $(GPU_VENV) $(GPU_WHEEL_VENV) $(SAMPLES) build dist *.egg-info
