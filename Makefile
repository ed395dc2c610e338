# On a fresh machine:  make install  |  make demo  |  make test  |  make docs
# Each creates ./.venv and installs evalstudio with the Label Studio server into it on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test docs docs-serve clean

# uv (from PyPI) resolves and installs the few hundred packages Label Studio brings in parallel, in a fraction of
# pip's time on a fresh machine; it installs into the same .venv that pip would. --compile-bytecode: the packages'
# .pyc files are written once, at install, as pip does; without them every process compiles what it imports
# (Label Studio's server then took 11.5 s to import instead of 6.5 s, matplotlib's plots 1.2 s more per report)
# wherever PYTHONDONTWRITEBYTECODE is set or site-packages is not writable
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[server,test,crowd,docs]'
	touch $(STAMP)

install: $(STAMP)

# DEMO_ARGS: options for `evalstudio demo`, e.g. DEMO_ARGS='--port 8090 --ml-port 9091'
demo: $(STAMP)
	$(BIN)/evalstudio demo $(DEMO_ARGS)

# four workers (pytest-xdist), two per database, each with its own Label Studio and a fixed half of the modules
# (tests/conftest.py: SHARDS); one half's waits overlap the others' work
test: $(STAMP)
	$(BIN)/python -m pytest -n 4 --dist loadgroup

# the documentation site into site/; --strict: a broken link or a page missing from the navigation fails
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) .evalstudio build dist site *.egg-info
