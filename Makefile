# gpu-trace: `make demo` and `make test` work on a fresh machine with only Python 3.11+.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
STORE  ?= data/store
SITE   ?= reports/site

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install gpu-trace with dev tools

# .ci/wheel runs the demo with an installed wheel's gpu-trace: BIN=<venv>/bin DEMO_NEEDS=
DEMO_NEEDS ?= $(STAMP)
demo: $(DEMO_NEEDS) ## Ingest every bundled sample into data/store and build the report
	$(BIN)/gpu-trace ingest openb data/samples/openb --store $(STORE)
	$(BIN)/gpu-trace ingest helios data/samples/helios --store $(STORE)
	$(BIN)/gpu-trace ingest pai2020 data/samples/pai2020 --store $(STORE)
	$(BIN)/gpu-trace ingest acme data/samples/acme --store $(STORE)
	$(BIN)/gpu-trace ingest philly data/samples/philly/cluster_machine_list --store $(STORE)
	$(BIN)/gpu-trace ingest azure-llm data/samples/azure-llm --store $(STORE)
	$(BIN)/gpu-trace ingest mooncake data/samples/mooncake --store $(STORE)
	@echo "Serving replay (one hour of each trace; roofline latency, not measured):"
	$(BIN)/gpu-trace serve run --source azure-llm --dataset conv --duration 1h --replicas 4 --router least-tokens --store $(STORE)
	$(BIN)/gpu-trace serve run --source mooncake --dataset conversation --duration 1h --replicas 16 --router prefix-affinity --store $(STORE)
	@echo "Synthetic job logs (gpu-trace synth, labelled in the report; see data/samples/README.md):"
	$(BIN)/gpu-trace ingest philly data/samples/philly/synthetic --store $(STORE)
	$(BIN)/gpu-trace ingest helios data/samples/helios/synthetic --store $(STORE)
	$(BIN)/gpu-trace ingest pai2020 data/samples/pai2020/synthetic --store $(STORE)
	$(BIN)/gpu-trace ingest kubernetes data/samples/kubernetes/pods.json data/samples/kubernetes/nodes.json --cluster sample --store $(STORE)
	$(BIN)/gpu-trace ingest slurm data/samples/slurm/jobs.psv --cluster mycluster --tz Europe/Berlin --store $(STORE)
	$(BIN)/gpu-trace ingest sinfo data/samples/slurm/sinfo-2026-01-05T0000Z.txt --cluster mycluster --store $(STORE)
	$(BIN)/gpu-trace ingest nvidia-smi data/samples/telemetry --store $(STORE)
	$(BIN)/gpu-trace ingest dcgmi data/samples/telemetry --store $(STORE)
	$(BIN)/gpu-trace ingest prometheus data/samples/telemetry --store $(STORE)
	$(BIN)/gpu-trace ingest prometheus-range data/samples/telemetry/prometheus-range-dcgm.jsonl --store $(STORE)
	$(BIN)/gpu-trace sql "select source, dataset, count(*) as jobs from jobs group by all order by all" --store $(STORE)
	$(BIN)/gpu-trace replay compare --source openb --policies fifo,sjf,las --placements consolidate --gpus 32x8 --load 4 --store $(STORE)
	@$(BIN)/gpu-trace report --store $(STORE) --out $(SITE) --replay all > /dev/null
	@echo "Report: $(abspath $(SITE))/index.html"

lint: $(STAMP) ## ruff format check, ruff lint, mypy
	$(BIN)/ruff format --check gpu_trace tests bench
	$(BIN)/ruff check gpu_trace tests bench
	$(BIN)/mypy

fmt: $(STAMP) ## Format and autofix
	$(BIN)/ruff format gpu_trace tests bench
	$(BIN)/ruff check --fix gpu_trace tests bench

# pytest-xdist: one worker per CPU (`-n auto`); PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= auto
test: $(STAMP) lint ## Lint, type-check and run the test suite
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS)

test-all: $(STAMP) ## Tests including slow ones
	$(BIN)/python -m pytest -q -m 'not gpu'

samples: $(STAMP) ## Regenerate the synthetic job samples in data/samples/*/synthetic/
	$(BIN)/python -m gpu_trace.synth.bundled .

docs: $(STAMP) ## Regenerate docs/cli.md (from --help), docs/plugins.md and docs/analyses/ (from the plugin declarations) and gpu_trace/command_index.py (the listing index)
	$(BIN)/python -m gpu_trace.cli.index_gen gpu_trace/command_index.py
	$(BIN)/python -m gpu_trace.cli.docs docs/cli.md
	$(BIN)/python -m gpu_trace.plugin_docs docs/plugins.md
	$(BIN)/python -m gpu_trace.analysis_docs docs/analyses

schemas: $(STAMP) ## Regenerate schemas/*.json and schemas/views.sql
	$(BIN)/python -m gpu_trace.schemas.export schemas

bench: $(STAMP) ## Benchmarks (results: BENCHMARKS.md)
	$(BIN)/python -m bench.run

FUZZ_CASES ?= 10000
FUZZ_SEED  ?= 0
fuzz: $(STAMP) ## Ingest fuzz campaign, FUZZ_CASES mutated inputs (reproducers: bench/out/fuzz)
	$(BIN)/python -m bench.fuzz --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) --out bench/out/fuzz

clean: ## Remove the venv, caches, the local store and built reports
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis data/store reports build

.PHONY: help install demo lint fmt test test-all docs samples schemas bench fuzz clean
