"""Sphinx configuration of ember's documentation site (build: docs/build.sh)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))

import ember  # noqa: E402  (the installed build: the reference documents what users import)

project = "ember"
author = "the ember developers"
copyright = "the ember developers, BSD-3-Clause"
version = release = ember.__version__

extensions = [
    "myst_parser",            # the guide pages are Markdown and include README.md text
    "sphinx.ext.autodoc",     # the API reference comes from the docstrings
    "sphinx.ext.napoleon",    # the docstrings' Google-style "Args:" sections
    "sphinx.ext.doctest",     # runs the guide pages' examples (docs/build.sh)
    "sphinx.ext.intersphinx",
    "ember_api",              # docs/_ext/ember_api.py: grouped reference pages, coverage checks
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# MyST: the README's headings become anchors; ``$`` is not math in README text
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# autodoc: members come from docs/_ext/ember_api.py's groups, never :members: (so a
# private helper cannot appear), signatures as the code spells them
autodoc_default_options = {}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# parameter types as plain text: as cross-references, "float" would link to ember.float
# (float32), not Python's float
napoleon_use_param = False
napoleon_use_keyword = False
# the page's table of contents lists its sections, not every function
toc_object_entries = False
add_module_names = False
python_use_unqualified_type_names = True

# docstrings link NumPy's and PyTorch's names only as text (the site must build offline)
intersphinx_mapping = {}

# the guide's examples run under `sphinx-build -b doctest`; the docstrings' ``>>>``
# examples are run by tests/test_docstrings.py (the suite CI runs), so the doctest
# builder leaves plain doctest blocks alone (docs/_ext/ember_api.py checks that every
# example the reference shows is one that test file runs)
doctest_test_doctest_blocks = ""
doctest_global_setup = "import ember\nimport numpy"

html_theme = "pydata_sphinx_theme"
html_title = f"ember {release}"
html_static_path = ["_static"]
html_css_files = ["ember.css"]
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "navbar_align": "left",
    # the page's own table of contents on the right only on the long reference pages: the
    # guide's code and the README's tables need the width of a 1280-pixel screen
    "secondary_sidebar_items": {"index": [], "install": [], "benchmarks": [], "guide/*": [],
                                "api/*": ["page-toc"]},
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "install": [], "benchmarks": []}
html_show_sourcelink = False
html_copy_source = False

nitpicky = False
suppress_warnings = []
