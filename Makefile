# Two commands do all set-up on a fresh machine: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.perfledger-installed
export PREFECT_HOME := $(CURDIR)/var/prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_LOGGING_LEVEL ?= WARNING

.PHONY: install run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[aic,dask,test]'
	touch $(STAMP)

run: $(STAMP)
	mkdir -p $(PREFECT_HOME)
	$(VENV)/bin/perfledger run

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -q

bench: $(STAMP)
	$(PY) benchmarks/ingest.py

clean:
	rm -rf var/warehouse var/reports
