"""Progress bars and cost estimates for the runs that take more than a few seconds.

One helper for every long loop of the package, its examples and its benchmarks: a `tqdm` bar on
stderr, shown only when

- the caller did not switch it off (`progress=False`, `--no-progress` on the command line),
- stderr is a terminal (logs, pipes, CI and pytest's capture get no bar), and
- `tqdm` is installed (it is an optional dependency: the `demo` extra has it; without it every
  run is silent and otherwise the same).

`note` writes a one-line estimate ("ZOO on 200 samples: up to 1,200 steps, ~1.0 s per
sample") under the same conditions, without breaking a bar that is being drawn.

Examples
--------

>>> from river_advsvm import progress

>>> total = 0
>>> with progress.bar(total=3, desc="adding", progress=False) as bar:
...     for i in range(3):
...         total += i
...         bar.update()
>>> total
3
>>> progress.duration(0.25), progress.duration(42), progress.duration(200), progress.duration(7300)
('0.2 s', '42 s', '3 min 20 s', '2 h 01 min')

"""

from __future__ import annotations

import sys
import typing

from river_advsvm import inputs

__all__ = ["bar", "duration", "enabled", "note", "write"]


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def enabled(progress: bool = True) -> bool:
    """Whether a bar would be drawn: asked for, stderr a terminal, and tqdm installed.
    ValueError if `progress` is no bool."""
    if not inputs.check_flag("progress", progress):
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        terminal = bool(isatty and isatty())
    except ValueError:  # a closed stream
        terminal = False
    return terminal and _tqdm() is not None


class _Silent:
    """What `bar` returns when no bar is drawn: the same small interface, doing nothing."""

    def __init__(self, iterable=None):
        self.iterable = iterable
        self.n = 0

    def __iter__(self):
        return iter(() if self.iterable is None else self.iterable)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def bar(
    iterable: typing.Iterable | None = None,
    *,
    total: float | None = None,
    desc: str | None = None,
    unit: str = "it",
    progress: bool = True,
    leave: bool = True,
    delay: float = 0.0,
):
    """A tqdm bar on stderr, or a silent stand-in with the same interface (see the module).

    Parameters
    ----------
    iterable
        Wrap an iterable (as `tqdm(iterable)` does), or `None` to call `update` by hand.
    total
        The number of units expected (`len(iterable)` when it has one).
    desc
        The label in front of the bar.
    unit
        What a unit is called ("sample", "step", ...).
    progress
        `False` switches the bar off.
    leave
        Keep the finished bar on screen (`False` for bars nested inside another).
    delay
        Seconds before the bar first appears: a run shorter than that draws nothing.

    """
    if not enabled(progress):
        return _Silent(iterable)
    tqdm = _tqdm()
    return tqdm(iterable, total=total, desc=desc, unit=f" {unit}", leave=leave, delay=delay,
                file=sys.stderr, dynamic_ncols=True)


def write(message: str, file=None) -> None:
    """Print `message` (to stdout by default) without breaking a bar being drawn on stderr."""
    tqdm = _tqdm()
    if tqdm is None:
        print(message, file=file, flush=True)
    else:
        tqdm.write(message, file=file)
        (sys.stdout if file is None else file).flush()


def note(message: str, progress: bool = True) -> None:
    """Write a one-line note (an estimate, typically) on stderr when bars are shown."""
    if enabled(progress):
        write(message, file=sys.stderr)


def duration(seconds: float) -> str:
    """A duration for people: '0.4 s', '42 s', '3 min 20 s', '1 h 05 min'."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
