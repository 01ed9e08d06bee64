"""gradviz where users already work: the notebook's `%%gradviz` (`notebook.py`, the only IPython import), the pytest
plugin (`pytest_plugin.py`), the gallery builder (`gallery.py`) and sphinx-gallery's scraper (`sphinx.py`), and
torchviz's `make_dot` with `gradviz.draw` (`compat.py`)."""
