# The two commands: `make run` and `make test`. Both set everything up on a fresh machine.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: run test setup services lint

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

services:
	scripts/ensure_services.sh

setup: $(STAMP) services
	$(PY) manage.py migrate --noinput

run: setup
	$(PY) manage.py seed_demo
	scripts/run_stack.sh

test: setup
	$(VENV)/bin/pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
