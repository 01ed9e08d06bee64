# Two commands for a newcomer on a fresh Debian machine:
#   make demo   installs everything, then draws the document's `.data` example to data-example.svg
#   make test   installs everything, then runs the whole test suite
# Both install CPU torch 2.13.0 (never a CUDA build) and Graphviz's `dot` when missing.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test setup system-deps clean

demo: setup
	$(BIN)/gradviz render gallery/plot_02_data_silent.py -o data-example.svg

test: setup
	$(BIN)/python -m pytest

setup: system-deps $(VENV)/.installed

system-deps:
	@missing=""; \
	command -v dot >/dev/null || missing="$$missing graphviz"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	$(PYTHON) -c "import venv, ensurepip" 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then $(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) gallery/_build data-example.svg
