"""The documentation site builds with `mkdocs build --strict` (no broken link, no missing page,
no docstring the API reference cannot render), and its formulas render in a browser without a
network, from the built files on disk. `make test` runs both (and installs Chromium, as root,
for the second)."""

from __future__ import annotations

import html.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Text that MathJax would have replaced: an inline or a display formula of pymdownx.arithmatex.
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_the_site_builds_strictly(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "getting-started.html", "api/models.html", "api/streams.html"} <= pages
    # The API reference is generated from the docstrings, examples included, and finds the
    # streams subpackage (the repository's streams/ folder).
    models = (site / "api/models.html").read_text()
    assert "AdvKernelSVM" in models and "progressive_val_score" in models
    assert "river_advsvm.streams.service.ServiceConfig" in (site / "api/streams.html").read_text()


def test_no_parameter_of_the_api_reference_repeats_another_ones_description(site):
    """A docstring entry `a, b` is rendered as one row per name, each with the whole text."""
    repeated = []
    for page in sorted((site / "api").glob("*.html")):
        for table in re.findall(r"<table>.*?</table>", page.read_text(), re.DOTALL):
            descriptions = [d.strip() for d in re.findall(r'doc-md-description">(.*?)</div>',
                                                          table, re.DOTALL)]
            repeated += [(page.name, a[:60]) for a, b in zip(descriptions, descriptions[1:])
                         if a and a == b]
    assert repeated == []


def test_the_site_loads_no_script_or_style_from_the_network(site):
    remote = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["'](?:https?:)?//""")
    for page in site.rglob("*.html"):
        found = remote.findall(page.read_text())
        assert not found, (page.relative_to(site), found)
    assert (site / "javascripts/mathjax/tex-svg-full.js").stat().st_size > 1_000_000
    assert "Apache License" in (site / "javascripts/mathjax/LICENSE").read_text()
    assert (site / "javascripts/iframe-worker/shim.js").is_file()


class Formulas(html.parser.HTMLParser):
    """What a page shows of its formulas: how many `arithmatex` elements it has, how many of
    them hold MathJax's output, and any TeX left in the text a reader sees (code excluded)."""

    HIDDEN = {"code", "pre", "script", "style", "textarea", "title"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}

    def __init__(self, text: str):
        super().__init__()
        self.formulas = 0
        self.rendered = 0
        self.raw: list[str] = []
        self._open: list[tuple[str, bool, bool]] = []  # (tag, is a formula, rendered inside)
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        formula = "arithmatex" in (dict(attrs).get("class") or "").split()
        self.formulas += formula
        if tag == "mjx-container":
            self._open = [(t, f, r or f) for t, f, r in self._open]
        self._open.append((tag, formula, False))

    def handle_endtag(self, tag):
        while self._open:
            name, formula, rendered = self._open.pop()
            self.rendered += formula and rendered
            if name == tag:
                break

    def handle_data(self, data):
        if any(tag in self.HIDDEN for tag, _, _ in self._open):
            return
        if any(tag.startswith("mjx-") for tag, _, _ in self._open):
            return  # MathJax's own output (its assistive MathML) is not TeX
        if RAW_TEX.search(data):
            self.raw.append(data.strip()[:80])


def test_the_formula_check_sees_raw_tex_and_rendered_math():
    raw = Formulas('<p>a <span class="arithmatex">\\(x^2\\)</span> b</p><pre>\\(code\\)</pre>')
    assert (raw.formulas, raw.rendered, raw.raw) == (1, 0, ["\\(x^2\\)"])
    done = Formulas('<p>a <span class="arithmatex"><mjx-container><svg></svg></mjx-container>'
                    '</span> b</p><nav><a>Two ways to hold \\(f\\)</a></nav>')
    assert (done.formulas, done.rendered, done.raw) == (1, 1, ["Two ways to hold \\(f\\)"])


def _browser() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome"))), None)


def test_every_formula_renders_offline_in_a_browser(site, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium to render the site with: `make test` installs it as root "
                    "(apt-get install chromium)")
    pages = [p for p in sorted(site.rglob("*.html")) if 'class="arithmatex"' in p.read_text()]
    assert len(pages) >= 5, pages
    # Before a browser runs it, every formula is raw TeX: the check below has something to see.
    assert Formulas((site / "model.html").read_text()).rendered == 0
    for page in pages:
        built = Formulas(page.read_text())
        assert built.formulas and built.raw, page
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}",
             # no network: every host fails to resolve, and anything else goes to a closed port
             "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
             "--virtual-time-budget=30000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=180,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        shown = Formulas(done.stdout)
        name = page.relative_to(site).as_posix()
        assert shown.formulas == built.formulas, name
        assert shown.rendered == shown.formulas, (name, shown.rendered, shown.formulas)
        assert shown.raw == [], (name, shown.raw)
        assert "data-mjx-error" not in done.stdout and "<mjx-merror" not in done.stdout, name
