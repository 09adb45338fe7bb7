"""The documentation site builds with `mkdocs build --strict`: no broken link, no missing page,
no docstring the API reference cannot render. CI runs it as part of `make test`."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "getting-started.html", "api/models.html"} <= pages
    # The API reference is generated from the docstrings, examples included.
    models = (site / "api/models.html").read_text()
    assert "AdvKernelSVM" in models and "progressive_val_score" in models
