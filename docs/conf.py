"""Sphinx configuration: the pages stay Markdown (MyST); the API reference comes from docstrings.

Build (CI does this, warnings as errors):
    python -m pip install ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import sys
from pathlib import Path

# Document the checkout this file belongs to, even where another overdub is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "overdub"
author = "the overdub developers"
copyright = "the overdub developers"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Headings get anchors so that links such as concepts.md#tagging resolve.
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Show defaults as written (a sentinel reads as its name, not as <object object at 0x...>).
autodoc_preserve_defaults = True
# Each name has its own heading already; object entries in the page's contents would repeat it.
toc_object_entries = False

html_theme = "alabaster"
html_title = "overdub"

