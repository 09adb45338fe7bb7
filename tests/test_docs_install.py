"""The install recipes of the docs work: a wheel built in the repository with the docs' command
installs with the docs' command and extras, and its `advsvm` runs from it. (The dependencies are
not installed again: the test environment has them, and `--no-deps` keeps this offline.)"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from test_docs import blocks

ROOT = pathlib.Path(__file__).resolve().parent.parent


PAGES = ["README.md", "docs/getting-started.md", "docs/deployment.md"]


def _commands(words: str) -> list[str]:
    """The lines of the pages' shell and Dockerfile blocks that hold `words`, comments and
    line continuations cut off."""
    lines = []
    for page in PAGES:
        for block in blocks((ROOT / page).read_text()):
            if block.language in ("bash", "dockerfile"):
                lines += [line.split("  #")[0].strip().removesuffix("\\").strip()
                          for line in block.code.splitlines() if words in line]
    return lines


def test_the_wheel_of_the_docs_installs_and_runs(tmp_path):
    (build,) = set(_commands("pip wheel"))
    installs = [line for line in _commands("pip install") if ".whl" in line]
    assert len(installs) >= 4 and any("[kafka]" in line for line in installs), installs
    assert build.startswith("python3 -m pip wheel") and build.endswith(" .")

    source = tmp_path / "clone"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", "node_modules", "site", "build", "dist", "*.egg-info", ".git", "__pycache__"))
    python = f'"{sys.executable}"'
    shell = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run(build.replace("python3", python, 1), shell=True, cwd=source, check=True,
                   capture_output=True, timeout=600, env=shell)
    (wheel,) = (source / "dist").glob("river_advsvm-*-py3-none-any.whl")

    target = tmp_path / "installed"
    for line in installs:
        # the docs' install line, into a folder and without the dependencies
        command = line.split("pip install", 1)[1].replace("--no-cache-dir", "").strip()
        # (a wheel copied to the target, named with its version: the one just built, or the
        # install fails and the page's version is out of date)
        command = command.replace("/tmp/", "dist/").replace("./river_advsvm-", "dist/river_advsvm-")
        done = subprocess.run(
            f"{python} -m pip install --quiet --no-deps --target '{target}' {command}",
            shell=True, cwd=source, capture_output=True, text=True, timeout=300, env=shell)
        assert done.returncode == 0, (line, done.stderr)
    assert (target / "river_advsvm" / "streams" / "kafka.py").is_file()
    assert (target / "bin" / "advsvm").is_file()

    # The installed package, not the repository's, with the test environment's dependencies.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), *sys.path[1:]]))
    done = subprocess.run(
        [sys.executable, "-c", "import river_advsvm, river_advsvm.streams.kafka; "
         "print(river_advsvm.__file__)"], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120, check=True)
    assert done.stdout.startswith(str(target))
    done = subprocess.run([sys.executable, str(target / "bin" / "advsvm"), "--version"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("advsvm "), done.stderr
    assert wheel.name.startswith(f"river_advsvm-{done.stdout.split()[1]}-")
