"""A MkDocs hook: the site's JavaScript from npm (`npm ci`, see package.json) is copied into the
site, so that the built site works without a network, opened from disk too.

- MathJax renders the formulas: `javascripts/mathjax/tex-svg-full.js` holds every TeX extension
  in one file and draws SVG, which needs no web fonts (a browser refuses fonts to a page opened
  from disk).
- iframe-worker lets the search run in a page opened from disk (the theme's offline plugin would
  otherwise load it from a CDN).

Each package's license is copied next to it. `make docs` and `make test` run `npm ci` first; a
build without it fails with the command to run.
"""

from __future__ import annotations

import pathlib

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"
#: The files the site gets, as {path in the site: path under node_modules}.
FILES = {
    "javascripts/mathjax/tex-svg-full.js": "mathjax/es5/tex-svg-full.js",
    "javascripts/mathjax/LICENSE": "mathjax/LICENSE",
    "javascripts/iframe-worker/shim.js": "iframe-worker/shim/index.js",
    "javascripts/iframe-worker/LICENSE": "iframe-worker/LICENSE",
}


def on_files(files, config):
    for target, source in FILES.items():
        path = NODE_MODULES / source
        if not path.is_file():
            raise PluginError(
                f"the site's JavaScript is not installed ({path} is missing): run `npm ci` in "
                f"{ROOT} (`make docs` does)")
        files.append(File.generated(config, target, abs_src_path=str(path)))
    return files
