# Two commands for a fresh machine:  make demo  |  make test
# Both create ./.venv and install evalstudio with the Label Studio server into it on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[server,test,crowd]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/evalstudio demo

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .evalstudio build dist *.egg-info
