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

.PHONY: venv install install-test demo test samples bench corpus lint clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	touch $@

venv: $(VENV)/.created

install: venv
	$(PIP) install -q -e ".[$(RUNTIME_EXTRA)]"

install-test: venv
	$(PIP) install -q -e ".[test,bench]"

samples: install
	$(PY) sample_models/build.py --out $(SAMPLES)

demo: samples
	$(AMPCONV) convert $(SAMPLES)/transformer.onnx --level O2 --mixlist sample_models/ops_info.json \
	    -o $(SAMPLES)/transformer.fp16.onnx --report $(SAMPLES)/transformer.report.json --overwrite \
	    --validate --shape batch:2 --samples 4
	@echo "converted model: $(SAMPLES)/transformer.fp16.onnx (report: $(SAMPLES)/transformer.report.json)"

test: install-test
	$(PY) -m pytest -q -m "not slow" tests

corpus: install-test
	$(PY) scripts/corpus.py --out docs/corpus_summary.md

bench: install-test
	$(PY) bench/run_all.py --out bench/results

lint: install-test
	$(PIP) install -q ruff
	$(VENV)/bin/ruff check ampconv cli tests sample_models bench scripts

clean:
	rm -rf $(VENV) $(SAMPLES) build *.egg-info
