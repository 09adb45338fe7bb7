"""Every Python block of README.md and docs/*.md runs, page by page, as a reader would run it.

A page's blocks run in order in one namespace of their own (a later block may use what an
earlier one defined; nothing else is defined), in a fresh temporary working directory:

- ```python blocks are executed;
- ```pycon blocks (`>>>` prompts with their output) are checked as doctests;
- every other block (bash, json, text, ...) is shown, not run; a text block right after a
  Python block that printed something is that block's output and must equal what it printed
  (whatever the line that introduces it says).

A block is skipped only with a reason written in the page's source, on the line before it:
`<!-- docs-test: skip because ... -->`. The build of the site itself (`mkdocs build --strict`)
is checked in `test_docs_site.py`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import doctest
import inspect
import io
import pathlib
import re
import traceback

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s+(?P<reason>\S.*?)\s*-->")


@dataclasses.dataclass
class Block:
    language: str
    code: str
    line: int  # 1-based line of the opening fence
    skip: str | None  # the reason, when the page says to skip it


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order (indented ones included, with their
    indentation removed, as in admonitions and list items)."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        language = (opening["info"].strip().split() or [""])[0].strip("{}.").lower()
        body, j = [], i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (closing and closing["fence"][0] == fence[0]
                    and len(closing["fence"]) >= len(fence) and not closing["info"].strip()):
                break
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        skip = _SKIP.search(before)
        found.append(Block(language, "\n".join(body) + "\n", i + 1, skip and skip["reason"]))
        i = j + 1
    return found


def run_page(page: pathlib.Path) -> int:
    """Run the page's Python blocks in order; return how many ran."""
    namespace = {"__name__": f"docs:{page.name}"}
    ran = 0
    text = page.read_text(encoding="utf-8")
    printed = None  # what the latest block printed, if it was a Python block that ran
    for block in blocks(text):
        shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        where = f"{shown}, the block at line {block.line}"
        if block.language == "text" and printed:  # (a Python block's output)
            assert block.code.strip() == printed.strip(), (
                f"{where} is not what was printed:\n{printed}")
        if block.language not in ("python", "py", "pycon") or block.skip:
            printed = None
            continue
        if block.language == "pycon":
            _run_doctest(block, namespace, where)
            printed = None
        else:
            output = io.StringIO()
            try:
                with contextlib.redirect_stdout(output):
                    exec(compile(block.code, where, "exec"), namespace)  # noqa: S102 - the docs' code
            except Exception:
                pytest.fail(f"{where} failed:\n{traceback.format_exc()}", pytrace=False)
            printed = output.getvalue()
        ran += 1
    return ran


def _run_doctest(block: Block, namespace: dict, where: str) -> None:
    test = doctest.DocTestParser().get_doctest(block.code, namespace, where, where, block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    runner.run(test, out=failures.append, clear_globs=False)
    namespace.update(test.globs)  # the doctest ran on a copy: what it defined is the page's
    if runner.failures:
        pytest.fail(f"{where}:\n{''.join(failures)}", pytrace=False)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_of_the_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    run_page(page)
    # State a rerun would pick up (a service's checkpoint directory) goes to a temporary
    # directory, not into the reader's working directory; a file the reader saves may.
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


# -- the collector itself ----------------------------------------------------------------------


def test_blocks_are_found_in_order_with_their_languages_and_skip_reasons():
    text = "\n".join([
        "# page", "```python", "a = 1", "```", "",
        "!!! note", "    ```pycon", "    >>> a + 1", "    2", "    ```", "",
        "<!-- docs-test: skip because it needs a cluster -->", "```python", "connect()", "```",
        "````markdown", "```python", "not code", "```", "````",
        "```bash", "make test", "```",
    ])
    found = blocks(text)
    assert [(b.language, b.line, b.skip) for b in found] == [
        ("python", 2, None), ("pycon", 7, None),
        ("python", 13, "because it needs a cluster"), ("markdown", 16, None), ("bash", 21, None)]
    assert found[1].code == ">>> a + 1\n2\n"
    assert found[3].code == "```python\nnot code\n```\n"


def test_a_page_shares_one_namespace_and_fails_on_an_undefined_name(tmp_path):
    def page(name, text):
        path = tmp_path / name
        path.write_text(text)
        return path

    good = "```python\nx = 2\n```\ntext\n```python\nassert x == 2\n```\n"
    mixed = "```python\nx = 2\n```\n\n```pycon\n>>> x * 3\n6\n```\n"
    assert run_page(page("good.md", good)) == 2
    assert run_page(page("mixed.md", mixed)) == 2
    back = "```pycon\n>>> z = 5\n```\n\n```python\nassert z == 5\n```\n"
    assert run_page(page("back.md", back)) == 2   # a doctest's names reach the next block
    with pytest.raises(pytest.fail.Exception, match="NameError"):
        run_page(page("bad.md", "```python\nprint(undefined_name)\n```\n"))
    with pytest.raises(pytest.fail.Exception, match="Expected"):
        run_page(page("wrong.md", "```pycon\n>>> 1 + 1\n3\n```\n"))
    # Pages do not see each other's names.
    with pytest.raises(pytest.fail.Exception, match="NameError"):
        run_page(page("other.md", "```python\nprint(x)\n```\n"))

    # A text block right after a Python block that printed is what it printed, however the
    # line before it words it; after one that printed nothing it is only shown.
    for said in ("It printed:", "The answer (to 0 places):"):
        shown = "```python\nprint(6 * 7)\n```\n\n" + said + "\n\n```text\n{}\n```\n"
        assert run_page(page("printed.md", shown.format(42))) == 1
        with pytest.raises(AssertionError, match="is not what was printed"):
            run_page(page("misprinted.md", shown.format(41)))
    silent = "```python\nx = 6 * 7\n```\n\nA diagram:\n\n```text\nA -> B\n```\n"
    assert run_page(page("silent.md", silent)) == 1


def test_every_page_is_collected_and_most_have_code():
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "docs/index.md", "docs/getting-started.md", "docs/model.md"} <= names
    python = sum(b.language in ("python", "pycon") for p in PAGES for b in blocks(p.read_text()))
    assert python >= 20


def test_skips_are_few_and_say_why():
    skipped = [(p.name, b.line, b.skip) for p in PAGES for b in blocks(p.read_text()) if b.skip]
    assert len(skipped) <= 5, skipped
    assert all(len(reason.split()) >= 3 for _, _, reason in skipped), skipped


def test_no_page_points_at_files_a_user_does_not_have():
    forbidden = re.compile(r"MATH\.md|ARCHITECTURE\.md|DATA\.md|shared/|\bthis machine\b|"
                           r"this 2-core|another engineer", re.IGNORECASE)
    hits = [(str(p.relative_to(ROOT)), n + 1, line.strip())
            for p in PAGES for n, line in enumerate(p.read_text().splitlines())
            if forbidden.search(line)]
    assert not hits, hits


def test_the_readme_is_short_and_its_links_resolve():
    """The site's own links are checked by the strict build; the README's here. The docs are
    read in the built site: a code host shows docs/*.md with raw include lines and directives,
    so the README links none of them."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    targets = re.findall(r"\]\((?!https?://|#)([^)#\s]+)", readme)
    for target in targets:
        assert (ROOT / target).exists(), target
    assert [t for t in targets if t.startswith("docs/")] == []
    assert "make docs" in readme


PHRASES = re.compile(
    r"committed (run|result|number|table|one|paper)|\bwe trust\b|\bour (numbers|attacks)\b|"
    r"earlier (version|release)|in \d+ runs of the test|end to end here|"
    r"since the faster|was replaced by|before .{0,40} became the default", re.IGNORECASE)


def test_the_docs_and_messages_speak_about_the_package_as_it_is():
    """No development history in what a user reads: the pages, and the docstrings, help texts
    and messages of the code."""
    sources = [*PAGES, *sorted((ROOT / "river_advsvm").rglob("*.py")),
               *sorted((ROOT / "streams").glob("*.py"))]
    hits = [(str(p.relative_to(ROOT)), n + 1, line.strip())
            for p in sources for n, line in enumerate(p.read_text().splitlines())
            if PHRASES.search(line)]
    assert hits == []


def _parameter_block() -> dict:
    """The keyword arguments of the `AdvKernelSVM(...)` call that opens docs/model.md."""
    first = next(b for b in blocks((ROOT / "docs" / "model.md").read_text())
                 if b.language == "python")
    call = next(node for node in ast.walk(ast.parse(first.code))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "AdvKernelSVM")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def test_the_model_page_opens_with_every_parameter_at_its_default():
    from river_advsvm import AdvKernelSVM

    shown = _parameter_block()
    signature = inspect.signature(AdvKernelSVM).parameters
    assert list(shown) == list(signature)  # every parameter, in the signature's order
    assert shown == {name: p.default for name, p in signature.items()}


def test_the_third_class_error_recommends_the_wrapper_the_docs_do():
    from river_advsvm import AdvKernelSVM, InvalidInput

    model = AdvKernelSVM(gamma=1.0)
    model.learn_one({"a": 0.0}, "cat")
    model.learn_one({"a": 1.0}, "dog")
    with pytest.raises(InvalidInput, match="river_advsvm.multiclass.OneVsRest") as error:
        model.learn_one({"a": 0.5}, "fox")
    assert error.value.code == "third_class"
    pages = [(ROOT / "docs" / name).read_text() for name in ("model.md", "faq.md")]
    assert all("river_advsvm.multiclass.OneVsRest(" in text for text in pages)


def test_the_advice_on_gamma_is_what_scale_fits():
    """Wherever the package says what gamma='scale' amounts to, it says the code's factor."""
    from river_advsvm.bandwidth import SCALE_FACTOR

    formula = re.compile(r"(\d+)\s*/\s*\(\s*d\b[^)]*?Var")
    said = {name: (ROOT / "docs" / name).read_text() for name in ("faq.md", "scale-out.md",
                                                                   "model.md")}
    serve_parser = pytest.importorskip("river_advsvm.streams.serve_parser")
    merge = pytest.importorskip("river_advsvm.streams.merge")
    said["advsvm serve --help"] = serve_parser.build_parser().format_help()
    with pytest.raises(ValueError) as error:
        merge.check_mergeable_params({"budget_policy": "merge", "gamma": "scale"})
    said["the --sync-every error"] = str(error.value)
    for where, text in said.items():
        factors = formula.findall(" ".join(text.split()))
        assert factors and {float(f) for f in factors} == {SCALE_FACTOR}, (where, factors)


def test_the_kafka_page_lists_every_dead_letter_code():
    """A code the service can write into a dead letter and the docs do not explain is a code
    an operator cannot act on."""
    kafka = pytest.importorskip("river_advsvm.streams.kafka")
    text = (ROOT / "docs" / "kafka.md").read_text()
    assert [code for code in kafka.REASONS if f"`{code}`" not in text] == []


def test_the_repository_map_names_every_module_and_folder():
    """docs/api/index.md's map of the repository: every module of the package and of streams/,
    and every top-level folder, has its line (adversary.py, the default adversary, had none)."""
    text = (ROOT / "docs" / "api" / "index.md").read_text()
    block = text.split("## Where things are in the repository", 1)[1].split("```text\n", 1)[1]
    block = block.split("```", 1)[0]
    named = set(re.findall(r"[\w*]+(?:\.py|/)", block))
    wildcards = [re.compile(n.replace(".", r"\.").replace("*", r"\w*")) for n in named if "*" in n]
    wanted = [f"{p.name}/" if p.is_dir() else p.name
              for folder in ("river_advsvm", "streams") for p in sorted((ROOT / folder).iterdir())
              if p.suffix == ".py" and not p.name.startswith("__")
              or p.is_dir() and not p.name.startswith("__")]
    # Top-level folders of source (git-ignored ones and a wheel's dist/ are not the repository's)
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip().endswith("/") and "*" not in line}
    wanted += [f"{p.name}/" for p in sorted(ROOT.iterdir()) if p.is_dir()
               and not p.name.startswith(".") and p.suffix != ".egg-info" and p.name not in ignored
               and any(f.suffix in (".py", ".md") for f in p.rglob("*"))]
    missing = [n for n in wanted if n not in named and not any(w.fullmatch(n) for w in wildcards)]
    assert missing == []


def test_every_method_the_api_reference_lists_has_a_docstring_of_its_own():
    """The reference shows each listed member's own docstring: learn_one, predict_many and
    predict_proba_many showed nothing."""
    import importlib

    text = (ROOT / "docs" / "api" / "models.md").read_text()
    for target, members in re.findall(r"::: ([\w.]+)\n    options:\n(?:.*\n)*?      members:\n"
                                       r"((?:        - \w+\n)+)", text):
        module, name = target.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        for member in re.findall(r"- (\w+)", members):
            owner = next(c for c in cls.__mro__ if member in vars(c))
            assert owner.__module__.startswith("river_advsvm"), (member, owner)
            assert vars(owner)[member].__doc__, member


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_extras_tables_name_every_package_an_extra_installs(page):
    """The kafka extra's row once lacked the compression codecs it installs (lz4, ...)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|",
                                                        (ROOT / page).read_text(), re.M)}
    for extra in ("demo", "parquet", "kafka", "peers"):
        packages = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in extras[extra]]
        listed = {name.strip().lower() for name in rows[extra].split(",")}
        missing = [p for p in packages if p.lower() not in listed]
        assert not missing, f"{page}: the {extra} extra's row lacks {missing}"
