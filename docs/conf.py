"""Sphinx configuration: the user guide and design pages (Markdown, through MyST) and the API
reference from the docstrings. Built in CI with warnings as errors:
``python -m sphinx -W -b html docs docs/_build/html``."""

import cyloop

project = "cyloop"
release = version = cyloop.__version__
copyright = "the cyloop developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.doctest"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "furo"
html_title = f"cyloop {release}"
# (docstring examples are written as a user of the package reads them: its names imported)
doctest_global_setup = "import numpy as np\nimport cyloop\nfrom cyloop import *"
