"""A Griffe extension for the API reference: the repository's `streams/` folder is the package
`river_advsvm.streams` (setuptools `package-dir`), which Griffe's static analysis cannot see from
the folders alone; this extension reads `streams/*.py` as that subpackage."""

from __future__ import annotations

import pathlib

import griffe

FOLDER = pathlib.Path(__file__).resolve().parent.parent / "streams"


class StreamsSubpackage(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.path != "river_advsvm" or "streams" in pkg.members:
            return
        streams = _visit(loader, "streams", FOLDER / "__init__.py", pkg)
        for path in sorted(FOLDER.glob("*.py")):
            if path.stem != "__init__":
                _visit(loader, path.stem, path, streams)


def _visit(loader: griffe.GriffeLoader, name: str, path: pathlib.Path,
           parent: griffe.Module) -> griffe.Module:
    code = path.read_text(encoding="utf-8")
    loader.lines_collection[path] = code.splitlines()
    module = griffe.visit(
        name, filepath=path, code=code, parent=parent, extensions=loader.extensions,
        docstring_parser=loader.docstring_parser, docstring_options=loader.docstring_options,
        lines_collection=loader.lines_collection, modules_collection=loader.modules_collection,
    )
    parent.set_member(name, module)
    return module
