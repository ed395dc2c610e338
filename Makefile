# Two commands for a fresh machine:  make demo  |  make test
# Both create ./.venv and install evalstudio with the Label Studio server into it on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test clean

# uv (from PyPI) resolves and installs the few hundred packages Label Studio brings in parallel, in a fraction of
# pip's time on a fresh machine; it installs into the same .venv that pip would
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[server,test,crowd]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/evalstudio demo

# two workers (pytest-xdist), one per database: the SQLite and PostgreSQL halves run side by side (tests/conftest.py)
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

clean:
	rm -rf $(VENV) .evalstudio build dist *.egg-info
