"""`advsvm demo` end to end: digits, an .npz, a Parquet file, --all, --help, errors."""

from __future__ import annotations

import contextlib
import datetime
import io
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM, cli, demo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["demo", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str, first_column: str = "model") -> dict[str, dict[str, str]]:
    """The table printed after a header line starting with `first_column`, as {model: row};
    cells are separated by two spaces or more."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if re.match(rf"{re.escape(first_column)}\s{{2,}}", line))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(header[1:], cells[1:]))
    return rows


def words(out: str) -> str:
    return " ".join(out.split())  # the explanation is wrapped to 100 columns


def check_plot(path):
    assert path.exists()
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000


def test_demo_on_digits_prints_the_table_and_writes_the_plot(capsys, tmp_path):
    code, out, _ = run(capsys, "--out", str(tmp_path))
    assert code == 0
    assert "scikit-learn digits, 1 vs 7: 361 samples" in out
    rows = table(out)
    assert list(rows) == ["natural", "adversarial (L2 ε=1)"]
    warm_up = AdvKernelSVM().warm_up  # gamma='scale' is fitted on the first samples
    for row in rows.values():
        assert row["samples"] == "361"
        clean, robust, certified = (float(row[k]) for k in ("clean %", "robust %", "certified %"))
        assert 0 <= certified <= robust <= clean <= 100  # certified and attacked are bounds
        assert int(row["attacked"]) == 361 - warm_up  # every sample after the warm-up
    assert float(rows["natural"]["clean %"]) > 90
    # Trained at the attack's radius, the adversarial model keeps its clean accuracy and
    # withstands the monitors' attack more often than the natural one.
    adversarial = rows["adversarial (L2 ε=1)"]
    assert float(adversarial["clean %"]) > 90
    assert float(adversarial["robust %"]) > float(rows["natural"]["robust %"])
    check_plot(tmp_path / cli.PLOT_NAME)
    assert f"{tmp_path / cli.PLOT_NAME}" in out
    # A certified column of zeros says why (at this radius the certificate proves nothing).
    zeros = all(float(row["certified %"]) == 0 for row in rows.values())
    assert ("note, certified 0%: at L2 ε = 1 the certificate" in words(out)) == zeros
    # docs/monitor.md shows this run: its table (all but the machine's speeds), its alerts, and
    # the robust points the adversarial model keeps over the natural one.
    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "monitor.md").read_text()
    shown = page.split("```text\n", 1)[1].split("```", 1)[0]
    measured = ("samples", "clean %", "robust %", "certified %", "attacked", "alerts")
    assert {name: [row[k] for k in measured] for name, row in table(shown).items()} == \
        {name: [row[k] for k in measured] for name, row in rows.items()}
    alerts = [line for line in out.splitlines() if line.startswith("alert, ")]
    assert [line for line in shown.splitlines() if line.startswith("alert, ")] == alerts
    gain = float(adversarial["robust %"]) - float(rows["natural"]["robust %"])
    assert f"keeps {gain:.0f} points more of the attacked samples" in words(page)


def test_the_warm_up_is_not_attacked_and_its_end_raises_no_alert():
    """Until gamma='scale' is fitted the models predict by a provisional vote: attacking it
    would count every sample as robust, and the fall once the kernel model takes over would
    read as drift."""
    X, y = demo.load_digits_pair(1, 7, seed=0)
    result = demo.run_demo(X[:200], y[:200], progress=False)
    warm_up = AdvKernelSVM().warm_up
    for run in result.runs:
        assert run.warm_up_end == warm_up
        during = [s["n_sampled"] for s in run.series if s["step"] <= warm_up]
        assert during and set(during) == {0}
        assert run.final["n_attacked"] == 200 - warm_up  # every sample after it
        # No drift alert when the warm-up ends; a gap alert needs min_sampled attacked samples
        # after it, all measured on the kernel model.
        assert [a for a in run.alerts if a.kind != "robust_gap"] == []
        assert all(a.step >= warm_up + a.n_sampled for a in run.alerts)
    # Attacking a share, progressive validation learns the other samples in batches: the end of
    # the warm-up is still exact.
    sampled = demo.run_demo(X[:120], y[:120], sample_rate=0.1, progress=False)
    assert [run.warm_up_end for run in sampled.runs] == [warm_up, warm_up]


def test_the_demo_draws_progress_bars_on_a_terminal_only(tmp_path, monkeypatch):
    pytest.importorskip("tqdm")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with open(tmp_path / "err.txt", "w") as err:  # advsvm demo 2>err.txt
        done = subprocess.run([sys.executable, "-m", "river_advsvm", "demo", "--max-samples", "120",
                               "--out", str(tmp_path)], env=env, stdout=subprocess.PIPE,
                              stderr=err, text=True, timeout=300)
    assert done.returncode == 0 and "120 samples streamed once" in done.stdout
    assert (tmp_path / "err.txt").read_text() == ""

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert cli.main(["demo", "--max-samples", "120", "--out", str(tmp_path)]) == 0
    shown = terminal.getvalue()
    assert "natural" in shown and "adversarial" in shown and "120/120" in shown


def test_demo_reads_an_npz_and_evaluates_its_test_set(capsys, tmp_path):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    pixels = (X * 255 / 16).astype(np.uint8).reshape(-1, 8, 8)  # as images, 8-bit
    path = tmp_path / "tiny.npz"
    np.savez_compressed(path, X_train=pixels[:900], y_train=y[:900].astype(np.uint8),
                        X_test=pixels[900:], y_test=y[900:].astype(np.uint8))
    code, out, _ = run(capsys, "--data", str(path), "--pair", "3", "8", "--out", str(tmp_path),
                       "--test-samples", "60")
    assert code == 0
    n_train = int(np.isin(y[:900], [3, 8]).sum())
    assert f"tiny.npz, 3 vs 8: {n_train} samples streamed once (inputs / 255)" in out
    held_out = table(out.split("Held-out test set")[1])
    assert list(held_out) == ["natural", "adversarial (L2 ε=1)"]
    assert [row["test samples"] for row in held_out.values()] == ["60", "60"]
    check_plot(tmp_path / cli.PLOT_NAME)


def test_demo_reads_a_parquet_file_with_a_held_out_fraction(capsys, tmp_path):
    parquet = pytest.importorskip("river_advsvm.streams.parquet")
    X, y = demo.load_digits_pair(1, 7, seed=1)
    path = tmp_path / "tiny.parquet"
    parquet.write(path, (X * 16).astype(np.uint8), y, layout="list", target_name="digit",
                  row_group_size=64)
    code, out, _ = run(capsys, "--data", str(path), "--target", "digit", "--test-fraction",
                       "0.25", "--max-samples", "200", "--out", str(tmp_path))
    assert code == 0
    assert "tiny.parquet, 1 vs 7: 200 samples streamed once (inputs / 16)" in out
    held_out = table(out.split("Held-out test set")[1])
    assert {row["test samples"] for row in held_out.values()} == {str(round(len(y) * 0.25))}
    check_plot(tmp_path / cli.PLOT_NAME)


def test_demo_all_attacks_one_vs_rest_black_box(capsys, tmp_path):
    code, out, _ = run(capsys, "--all", "--max-samples", "300", "--sample-rate", "0.02",
                       "--out", str(tmp_path))
    assert code == 0
    assert "ten classes, one-vs-rest: 300 samples" in out and "black box" in words(out)
    # every binary model has a warm-up, from the first sample of its class on
    assert re.search(r"The first 1\d\d samples are the models' warm-up", words(out)), out
    rows = table(out)
    for row in rows.values():
        assert 3 <= int(row["attacked"]) <= 12
        # Robust is over the few attacked samples, clean over all: only this pair compares.
        assert float(row["certified %"]) <= float(row["robust %"])
    check_plot(tmp_path / cli.PLOT_NAME)


@pytest.mark.slow
def test_demo_all_streams_every_digit_through_both_models(capsys, tmp_path):
    code, out, _ = run(capsys, "--all", "--out", str(tmp_path))
    assert code == 0 and "1,797 samples" in out
    assert "natural" in out and "adversarial" in out
    check_plot(tmp_path / cli.PLOT_NAME)


@pytest.mark.parametrize("command", ["demo", "serve", "inspect"])
def test_every_subcommand_documents_itself(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: advsvm {command}")
    if command == "demo":
        for flag in ("--pair", "--all", "--data", "--out", "--epsilon", "--sample-rate",
                     "--test-fraction", "--target"):
            assert flag in out


def test_the_module_runs_as_the_advsvm_command():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "river_advsvm.cli", "--help"], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.startswith("usage: advsvm")
    assert "demo" in done.stdout and "serve" in done.stdout


@pytest.mark.parametrize(
    "argv, message",
    [(["--data", "missing.npz"], "No such file"),
     (["--data", "data.csv"], "expected an .npz"),
     (["--data", "labels.npz", "--pair", "1", "9"], "no sample has label 9"),
     (["--data", "missing.parquet"], "missing.parquet: No such file"),
     (["--data", "labels.npz", "--pair", "1", "1.0"], "two different labels, got 1 and 1.0"),
     (["--pair", "3", "3"], "two different labels, got 3 and 3"),
     (["--data", "three.npz"], "the data has 3 labels; choose two with --pair"),
     # One label: nothing to tell apart, with --all too (it was suggested, and ran a
     # one-class "one-vs-rest" whose model only ever said "mine").
     (["--data", "one.npz"], "the data has 1 label (0); a model needs two to tell apart"),
     (["--data", "one.npz", "--all"], "the data has 1 label (0); a model needs two to tell apart"),
     (["--all", "--pair", "1", "7"], "exclude each other"),
     # Options of a Parquet file, given for other data: refused rather than ignored.
     (["--data", "labels.npz", "--target", "label"], "--target applies to a Parquet file"),
     (["--test-fraction", "0.5"], "--test-fraction applies to a Parquet file"),
     (["--out", "labels.npz"], "--out labels.npz is not a directory"),
     # Found before the stream runs (it was found once the stream, attacks and tables were).
     (["--data", "labels.npz", "--out", "labels.npz/plots"],
      "--out labels.npz/plots: cannot make the directory (Not a directory)"),
     # Wider than the models take: found once the data is, not after the title and --out.
     (["--data", "wide.npz"], "wide.npz: its samples hold 10,001 inputs, more than the demo's "
                              "models learn (10,000: max_features)"),
     (["--max-samples", "0"], "argument --max-samples: 0 is not a whole number >= 1"),
     (["--max-samples", "-5"], "argument --max-samples: -5 is not a whole number >= 1"),
     (["--test-samples", "-1"], "argument --test-samples: -1 is not a whole number >= 0"),
     (["--seed", "-1"], "argument --seed: -1 is not a whole number >= 0"),
     (["--epsilon", "-1"], "argument --epsilon: -1 is not a number > 0"),
     (["--epsilon", "0"], "argument --epsilon: 0 is not a number > 0"),
     (["--epsilon", "inf"], "argument --epsilon: inf is not a number > 0"),
     (["--train-epsilon", "-0.5"], "argument --train-epsilon: -0.5 is not a number >= 0"),
     (["--sample-rate", "1.5"], "argument --sample-rate: 1.5 is not a number in (0, 1]"),
     (["--test-fraction", "1"], "argument --test-fraction: 1 is not a number in [0, 1)"),
     (["--norm", "l3"], "argument --norm: invalid choice: 'l3'")],
)
def test_demo_errors_are_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.savez("labels.npz", X_train=rng.random((40, 4)), y_train=np.resize([1, 2], 40))
    np.savez("three.npz", X_train=rng.random((40, 4)), y_train=np.resize([1, 2, 3], 40))
    np.savez("one.npz", X_train=rng.random((40, 4)), y_train=np.zeros(40, int))
    np.savez("wide.npz", X_train=np.zeros((4, 10_001)), y_train=np.resize([1, 2], 4))
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("advsvm demo:") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
    assert not (tmp_path / cli.DEFAULT_OUT).exists()


@settings(max_examples=200, deadline=None)
@given(option=st.sampled_from(["--epsilon", "--train-epsilon", "--sample-rate", "--test-fraction",
                               "--max-samples", "--test-samples", "--seed"]),
       text=st.one_of(st.text(max_size=12), st.floats().map(repr),
                      st.integers(-10**20, 10**20).map(str)))
def test_numeric_options_are_parsed_or_refused_in_one_line(option, text):
    """Whatever the text, an option is either a valid value or a one-line error, exit 2."""
    if text.startswith("-") and not text[1:2].isdigit() and text[1:] not in ("inf", "nan"):
        return  # argparse reads it as another option, not as this one's value
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            args = cli.build_parser().parse_args(["demo", f"{option}={text}"])
        except SystemExit as exit_:
            assert exit_.code == 2
            message = stderr.getvalue()
            assert message.startswith(f"advsvm demo: argument {option}: ")
            assert message.count("\n") == 1
            return
    value = getattr(args, option[2:].replace("-", "_"))
    assert math.isfinite(value)
    low_ok = {"--epsilon": value > 0, "--sample-rate": 0 < value <= 1,
              "--test-fraction": 0 <= value < 1, "--max-samples": value >= 1}
    assert low_ok.get(option, value >= 0)


def test_a_parquet_file_with_boolean_labels(capsys, tmp_path):
    parquet = pytest.importorskip("river_advsvm.streams.parquet")
    X, y = demo.load_digits_pair(1, 7, seed=1)
    path = tmp_path / "bool.parquet"
    parquet.write(path, (X * 16).astype(np.uint8), y == 7, layout="list", target_name="is7",
                  row_group_size=64)
    code, out, _ = run(capsys, "--data", str(path), "--target", "is7", "--pair", "False",
                       "True", "--max-samples", "80", "--test-samples", "20", "--out",
                       str(tmp_path / "new" / "dir"))
    assert code == 0
    assert "bool.parquet, False vs True: 80 samples streamed once (inputs / 16)" in out
    check_plot(tmp_path / "new" / "dir" / cli.PLOT_NAME)  # --out was created
    code, out, err = run(capsys, "--data", str(path), "--max-samples", "80")
    assert code == 2 and out == ""
    assert err == (f"advsvm demo: {path}: target column 'y' is not in ['x', 'is7']; name the "
                   "label column with --target\n")


@pytest.mark.parametrize("labels, message", [
    # A null label counted as a third label (pandas read an integer column with nulls as
    # floats: NaN), and only nulls, lists or timestamps raised 'unexpected TypeError' or
    # 'unexpected IndexError'. A null is None among ints as in a column of nulls.
    ([1, None, 2, 1], "row 1 of the label column 'y': no label (a null): the demo learns"),
    ([None] * 4, "row 0 of the label column 'y': no label (a null)"),
    ([[1], [2], [1], [2]], "row 0 of the label column 'y': label [1] (a list) is not supported"),
    ([datetime.datetime(2020, 1, 1)] * 4, "row 0 of the label column 'y': label "),
])
def test_a_parquet_label_column_of_nulls_or_odd_types_is_one_line(capsys, tmp_path, labels,
                                                                   message):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "labels.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, 0.3, 0.4], "y": labels}), path)
    code, out, err = run(capsys, "--data", str(path), "--out", str(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith(f"advsvm demo: {path}: {message}") and err.count("\n") == 1, err


def test_the_plot_goes_under_a_git_ignored_directory_by_default(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "--max-samples", "40", "--test-samples", "0")
    assert code == 0
    check_plot(tmp_path / cli.DEFAULT_OUT / cli.PLOT_NAME)
    assert list(tmp_path.iterdir()) == [tmp_path / cli.DEFAULT_OUT]
    root = os.path.join(os.path.dirname(__file__), "..")
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{cli.DEFAULT_OUT}/{cli.PLOT_NAME}"],
                             cwd=root, capture_output=True)
    assert ignored.returncode == 0  # `make demo` writes it in the repository


def test_version_and_python_dash_m():
    import river_advsvm

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for argv in (["-m", "river_advsvm", "--version"], ["-m", "river_advsvm.cli", "--version"]):
        done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True,
                              timeout=60, check=True)
        assert done.stdout == f"advsvm {river_advsvm.__version__}\n"
    done = subprocess.run([sys.executable, "-m", "river_advsvm"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("advsvm: the following arguments are required: COMMAND (see advsvm "
                           "--help)\n")


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_the_demo_prints_to_an_output_in_a_legacy_encoding(tmp_path, encoding):
    """Redirected to a file on Windows (cp1252), or with PYTHONIOENCODING=ascii, the demo failed
    on its first 'ε' after the whole run: 'codec can't encode character', no table."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONIOENCODING=encoding)
    done = subprocess.run([sys.executable, "-m", "river_advsvm", "demo", "--max-samples", "20",
                           "--no-progress", "--out", str(tmp_path)], env=env,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode(encoding)
    assert "adversarial (L2 \\u03b5=1)" in out and "Plot of the rolling accuracies" in out

@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_unexpected_errors_are_one_line_unless_debug(capsys, monkeypatch, debug):
    def broken(args):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(cli, "_demo", broken)
    for argv in (["demo", *debug], [*debug, "demo"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.endswith("advsvm demo: unexpected RuntimeError: something broke (run with "
                            "--debug for the traceback)\n")
        assert ("Traceback (most recent call last)" in err) == bool(debug)
        assert err.count("\n") == (1 if not debug else err.count("\n"))


@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_a_warning_is_one_line_naming_the_command_unless_debug(capsys, monkeypatch, debug):
    """A model's warning in `advsvm demo` (epsilon as large as the box, on data of few inputs)
    printed Python's form: the `advsvm` script's path and line, then its source line
    `sys.exit(main())`."""
    import warnings

    from river_advsvm.collapse import CollapseWarning

    def warning(args):
        warnings.warn("epsilon=1 is at least half\nthe diagonal of the box", UserWarning)
        warnings.warn("AdvKernelSVM predicts a constant", CollapseWarning)
        return 0

    monkeypatch.setattr(cli, "_demo", warning)
    before = warnings.showwarning
    assert cli.main([*debug, "demo"]) == 0
    err = capsys.readouterr().err
    if debug:  # Python's own form (which pytest records here)
        assert "advsvm demo: warning" not in err
    else:
        assert err == ("advsvm demo: warning: epsilon=1 is at least half the diagonal of the "
                       "box\nadvsvm demo: CollapseWarning: AdvKernelSVM predicts a constant\n")
    assert warnings.showwarning is before  # (a program that ran `main` keeps its own)


@pytest.mark.parametrize(
    "error, code, message",
    [(KeyboardInterrupt(), 130, "advsvm demo: interrupted\n"),
     (ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"), 2,
      "advsvm demo: this needs the module matplotlib, which is not installed: install "
      "river-advsvm with its demo extra (in a clone: pip install -e '.[demo]')\n"),
     (PermissionError(13, "Permission denied", "/root/x.png"), 2,
      "advsvm demo: /root/x.png: Permission denied\n")],
)
def test_interrupts_missing_modules_and_os_errors(capsys, monkeypatch, error, code, message):
    def failing(args):
        raise error

    monkeypatch.setattr(cli, "_demo", failing)
    assert cli.main(["demo"]) == code
    assert capsys.readouterr().err == message


@pytest.mark.parametrize("arrays, message", [
    (dict(X_train=np.zeros((0, 4)), y_train=np.zeros(0)), "bad.npz: X_train holds no samples"),
    (dict(X_train=np.zeros((0, 2, 2)), y_train=np.zeros(0)), "bad.npz: X_train holds no samples"),
    (dict(X_train=np.zeros((40, 0)), y_train=np.resize([1, 2], 40)), "no inputs"),
    (dict(X_train=np.zeros((40, 4)), y_train=np.resize([1, 2], 30)),
     "bad.npz: X_train has 40 samples but y_train 30 labels"),
    (dict(X_train=np.zeros((40, 4)), y_train=np.resize([1, 2], 40), X_test=np.zeros((5, 3)),
          y_test=np.resize([1, 2], 5)), "bad.npz: X_test has 3 inputs per sample, X_train 4"),
    (dict(X_train=np.zeros((40, 4)), y_train=np.resize([1, 2], 40), X_test=np.zeros((5, 4)),
          y_test=np.resize([1, 2], 6)), "bad.npz: X_test has 5 samples but y_test 6 labels"),
    (dict(X_train=np.where(np.eye(40, 4) > 0, np.nan, 0.5), y_train=np.resize([1, 2], 40)),
     "the inputs hold 4 values that are NaN or infinite (the first at row 0, column 0, "
     "counting from 0)"),
    (dict(X_train=np.full((40, 4), 0.5), y_train=np.resize([1, 2], 40),
          X_test=np.full((5, 4), np.inf), y_test=np.resize([1, 2], 5)),
     "the test inputs hold 20 values that are NaN or infinite"),
    (dict(X_train=np.where(np.eye(40, 4, k=-7) > 0, np.inf, 0.5), y_train=np.resize([1, 2], 40)),
     "the inputs hold 4 values that are NaN or infinite (the first at row 7, column 0"),
])
def test_an_npz_the_demo_cannot_stream_is_one_line(capsys, tmp_path, monkeypatch, arrays,
                                                    message):
    """Numpy's own errors came out ('cannot reshape array of size 0', 'boolean index did not
    match', 'zero-size array to reduction operation'), one NaN made every input NaN and was
    reported as 'feature 0 is nan', and a test set of other inputs was evaluated silently."""
    monkeypatch.chdir(tmp_path)
    np.savez("bad.npz", **arrays)
    code, out, err = run(capsys, "--data", "bad.npz", "--all", "--test-samples", "5")
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and out == ""



@pytest.mark.parametrize("part", ["train", "test"])
@pytest.mark.parametrize("label, message", [
    (np.nan, "label nan is not allowed: a number label must be finite (a missing label is "
             "None, not NaN)"),
    (np.inf, "label inf is not allowed: a number label must be finite"),
])
@pytest.mark.parametrize("pair", [[], ["--all"]])
def test_an_npz_label_that_is_no_label_is_named_with_its_row(capsys, tmp_path, monkeypatch,
                                                             part, label, message, pair):
    """An .npz's labels are checked as a Parquet file's are. A NaN among 1.0 labels made the
    two 'labels' 1.0 and nan, refused as 'no sample has label nan', and a NaN test label was
    evaluated with --all as a class of its own."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    y = np.resize([0.0, 1.0], 40)
    bad = y.copy()
    bad[3] = label
    arrays = {"train": dict(X_train=rng.random((40, 4)), y_train=bad),
              "test": dict(X_train=rng.random((40, 4)), y_train=y,
                           X_test=rng.random((10, 4)), y_test=bad[:10])}[part]
    np.savez("bad.npz", **arrays)
    code, out, err = run(capsys, "--data", "bad.npz", *pair)
    assert code == 2 and out == ""
    assert err == f"advsvm demo: bad.npz: row 3 of y_{part}: {message}\n"

def test_a_test_set_without_the_pairs_labels_is_refused(capsys, tmp_path, monkeypatch):
    """The held-out table vanished without a word when no test sample had either label of the
    pair (the demo still exited 0)."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.savez("pair.npz", X_train=rng.random((40, 4)), y_train=np.resize([0, 1], 40),
             X_test=rng.random((10, 4)), y_test=np.resize([5, 6], 10))
    code, out, err = run(capsys, "--data", "pair.npz", "--pair", "0", "1")
    assert code == 2 and out == ""
    assert err == "advsvm demo: pair.npz: no sample of the test set is labelled 0 or 1\n"


def _compression_method(good: bytes, method: int) -> bytes:
    """`good` (a zip) with every member's compression method set to `method`."""
    data = bytearray(good)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.find(signature)
        while at >= 0:
            data[at + offset:at + offset + 2] = method.to_bytes(2, "little")
            at = data.find(signature, at + 1)
    return bytes(data)


def _encrypted(good: bytes) -> bytes:
    """`good` (a zip) with every member marked as encrypted (flag bit 0)."""
    data = bytearray(good)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at >= 0:
            data[at + offset] |= 1
            at = data.find(signature, at + 1)
    return bytes(data)


@pytest.mark.parametrize("content, message", [
    (lambda good: b"not an archive\n", "bad.npz is not an .npz archive"),
    # Deflate64 (Windows' zip of large files) or a damaged method: "unexpected
    # NotImplementedError" (and exit status 1, an unexpected error, from `serve --replay`).
    (lambda good: _compression_method(good, 9), "bad.npz is not a readable .npz archive "
                                               "(X_train: That compression method is not "
                                               "supported)"),
    # An encrypted member: "unexpected RuntimeError" (exit status 1 from `serve --replay`).
    (_encrypted, "bad.npz is not a readable .npz archive (X_train: File 'X_train.npy' is "
                 "encrypted, password required for extraction)"),
    (lambda good: good[:200], "bad.npz is not a readable .npz archive"),
    (lambda good: good[:-30], "bad.npz is not a readable .npz archive"),
    (lambda good: None, "bad.npz: y_train holds Python objects"),  # labels as objects
    (lambda good: "npy", "bad.npz holds one array, not an .npz archive"),
])
def test_a_file_that_is_no_npz_archive_is_one_line_naming_it(capsys, tmp_path, monkeypatch,
                                                              content, message):
    """A file that was not an archive was answered with numpy's advice to load it unsafely
    ('If you trust the file you can load it unsafely using the allow_pickle= keyword'), a
    truncated one with 'unexpected BadZipFile'."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.savez("good.npz", X_train=rng.random((40, 4)), y_train=np.resize([1, 2], 40))
    data = content((tmp_path / "good.npz").read_bytes())
    if data is None:
        np.savez("bad.npz", X_train=rng.random((4, 2)),
                 y_train=np.array([1, "a", None, 2], dtype=object))
    elif data == "npy":
        np.save("bad.npy", rng.random((4, 2)))
        (tmp_path / "bad.npy").rename(tmp_path / "bad.npz")
    else:
        (tmp_path / "bad.npz").write_bytes(data)
    code, out, err = run(capsys, "--data", "bad.npz")
    assert code == 2 and out == ""
    assert err.startswith(f"advsvm demo: {message}") and err.count("\n") == 1, err
    assert "allow_pickle" not in err and "unexpected" not in err

def test_to_unit_box_maps_constant_inputs_into_the_box():
    """Min-max scaling divided by hi - lo = 0 for constant negative inputs: every value NaN."""
    X, X_test, how = demo.to_unit_box(np.full((5, 2), -3.0), np.array([[-3.0, 2.0]]))
    assert np.isfinite(X).all() and ((X >= 0) & (X <= 1)).all()
    assert np.isfinite(X_test).all() and ((X_test >= 0) & (X_test <= 1)).all()


def test_to_unit_box_scales_by_the_training_range_and_clips_the_test_inputs():
    """Pixels 0..255 are divided by 255 (not min-max: a 0 stays 0); test values past the
    training range are clipped into the box; a stream shorter than the attack budget is
    attacked at every sample."""
    train = np.array([[0.0, 255.0], [51.0, 102.0]])
    X, X_test, how = demo.to_unit_box(train, np.array([[-10.0, 510.0], [51.0, 0.0]]))
    assert how == "inputs / 255"
    np.testing.assert_array_equal(X, train / 255)
    np.testing.assert_array_equal(X_test, [[0.0, 1.0], [0.2, 0.0]])
    assert demo.auto_sample_rate(5, False) == demo.auto_sample_rate(5, True) == 1.0
    assert demo.auto_sample_rate(10**9, False) == demo.WHITE_BOX_ATTACKS / 10**9


def test_no_test_samples_means_no_held_out_table(capsys, tmp_path, monkeypatch):
    """`--test-samples 0` printed a held-out table of 0 samples and 'nan' accuracies."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    X = rng.random((60, 3))
    y = (X[:, 0] > 0.5).astype(int)
    np.savez("data.npz", X_train=X, y_train=y, X_test=X[:10], y_test=y[:10])
    code, out, err = run(capsys, "--data", "data.npz", "--test-samples", "0")
    assert code == 0, err
    assert "Held-out" not in out and "nan" not in out


def test_the_plot_draws_every_kind_of_alert(tmp_path):
    """A `collapsed` alert counted in a panel's title had no line: the plot had no style for it."""
    from river_advsvm.alerts import ALERT_KINDS, Alert

    assert set(demo.ALERT_STYLES) == set(ALERT_KINDS)
    alerts = [Alert(kind, 50 + 10 * i, 1.0, 0.5, 0.5, 0.5, 10, "test")
              for i, kind in enumerate(ALERT_KINDS)]
    series = [{"step": s, "clean_accuracy": 1.0, "robust_accuracy": 0.5,
               "certified_accuracy": 0.5} for s in (10, 100)]
    run = demo.ModelRun("m", {}, series, alerts)
    result = demo.DemoResult("t", 1.0, "l2", 1.0, 50, False, [run])
    check_plot(pathlib.Path(demo.plot(result, tmp_path / "p.png")))


def test_the_robustness_report_example_runs_on_the_digits(tmp_path):
    """docs/attacks.md sends readers to examples/robustness_report.py; nothing else runs it."""
    script = pathlib.Path(__file__).resolve().parent.parent / "examples" / "robustness_report.py"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(script), "digits", "--test-samples", "40",
                           "--cw-samples", "2", "--zoo-samples", "2", "--zoo-search-steps", "1",
                           "--no-progress"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "digits 1 vs 7, natural" in done.stdout and "digits 1 vs 7, adversarial" in done.stdout
    rows = [line.split()[0] for line in done.stdout.splitlines() if line[:1] == " " or
            line.startswith("certified")]
    for attack in ("FGSM", "PGD-10", "C&W-L2", "ZOO", "certified"):
        assert rows.count(attack) >= 2 * 2, attack  # two radii, two models at least


def _npz_declaring(path, shape, y=np.resize([1, 2], 40), data=b"\0" * 64):
    """An .npz whose X_train header declares `shape` (float64) over `data`: a few bytes that
    numpy would allocate in full before finding them short."""
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    labels = io.BytesIO()
    np.save(labels, y)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X_train.npy", header.getvalue() + data)
        archive.writestr("y_train.npy", labels.getvalue())


@pytest.mark.parametrize("X, message", [
    # Each ran the demo on numbers numpy made of them, or failed in numpy's words.
    (np.full((40, 2), 1 + 2j), "bad.npz: X_train holds complex numbers (complex128); inputs "
                               "must be numbers"),
    (np.full((40, 2), "2020-01-01", "datetime64[D]"), "bad.npz: X_train holds dates or times"),
    (np.arange(80, dtype="timedelta64[s]").reshape(40, 2), "bad.npz: X_train holds durations"),
    (np.full((40, 2), "a"), "bad.npz: X_train holds strings (<U1)"),
    (np.full((40, 2), b"a"), "bad.npz: X_train holds bytes (|S1)"),
    (np.zeros(40, [("a", "f8"), ("b", "f8")]), "bad.npz: X_train holds records or raw bytes"),
    # 8 TB declared: "unexpected MemoryError" (and exit 5 from `serve --replay`).
    ((10**12, 1), "bad.npz: X_train declares 8,000,000,000,000 bytes of values (shape "
                  "(1000000000000, 1), float64) but its member holds 64"),
    # 8 GB declared: numpy allocated them, found the data short, and the demo said the
    # array held Python objects.
    ((40, 2**25), "bad.npz: X_train declares 10,737,418,240 bytes of values"),
])
def test_an_npz_of_inputs_that_are_no_numbers_or_that_lie_about_their_size(
        capsys, tmp_path, monkeypatch, X, message):
    monkeypatch.chdir(tmp_path)
    if isinstance(X, tuple):
        _npz_declaring("bad.npz", X)
    else:
        np.savez("bad.npz", X_train=X, y_train=np.resize([1, 2], 40))
    code, out, err = run(capsys, "--data", "bad.npz", "--all")
    assert code == 2 and out == ""
    assert err.startswith(f"advsvm demo: {message}") and err.count("\n") == 1, err
    assert "unexpected" not in err and "Python objects" not in err


def test_serve_replay_of_an_npz_declaring_terabytes_is_a_usage_error(capsys, tmp_path):
    """`advsvm serve --local-broker --replay` reads the file before starting any broker; the
    MemoryError of a file declaring 8 TB was exit status 5 (a fault of the machine: restart),
    and a supervisor restarted it forever."""
    pytest.importorskip("kafka")
    from river_advsvm.streams import cli as streams_cli

    path = tmp_path / "bomb.npz"
    _npz_declaring(path, (10**12, 1))
    code = streams_cli.main(["--local-broker", "--replay", str(path),
                             "--checkpoint-dir", str(tmp_path / "ck")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "declares 8,000,000,000,000 bytes" in err


def test_serve_replay_of_an_npz_holding_nan_is_refused_before_the_broker(capsys, tmp_path):
    """A NaN in an .npz's inputs was found only once the bundled broker ran, as a message
    JSON cannot carry ('Out of range float values are not JSON compliant')."""
    pytest.importorskip("kafka")
    from river_advsvm.streams import cli as streams_cli

    path = tmp_path / "nan.npz"
    X = np.full((20, 3), 0.5)
    X[7, 1] = np.nan
    np.savez(path, X_train=X, y_train=np.resize([0, 1], 20))
    code = streams_cli.main(["--local-broker", "--replay", str(path),
                             "--checkpoint-dir", str(tmp_path / "ck")])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.count("\n") == 1 and captured.out == "", captured.err
    assert "the inputs hold 1 value that is NaN or infinite" in captured.err
    assert not (tmp_path / "ck").exists()


def test_a_held_out_attack_that_met_no_gradient_says_so(capsys, tmp_path):
    """Twenty samples leave both models in their warm-up: PGD-10 on the test set finds no
    gradient to follow at most samples, and its accuracy counts them robust. The table said
    97.2% under attack and nothing else."""
    parquet = pytest.importorskip("river_advsvm.streams.parquet")
    X, y = demo.load_digits_pair(1, 7, seed=1)
    path = tmp_path / "digits.parquet"
    parquet.write(path, (X * 16).astype(np.uint8), y, layout="list", target_name="label")
    code, out, _ = run(capsys, "--data", str(path), "--target", "label", "--pair", "1", "7",
                       "--max-samples", "20", "--out", str(tmp_path))
    assert code == 0
    rows = table(out.split("Held-out test set")[1])
    assert rows["natural"]["test samples"] == "72"
    notes = re.findall(r"note, (.+?): PGD-10 met no usable gradient at (\d+) of 72 test samples",
                       words(out))
    assert [name for name, _ in notes] == ["natural", "adversarial (L2 ε=1)"]
    assert all(int(count) > 36 for _, count in notes)
    assert "may be an overestimate" in words(out)


@pytest.mark.parametrize("argv, prog", [
    (["demo", "--pairs", "1", "7"], "advsvm demo"),
    (["inspect", "ckpt", "--bogus"], "advsvm inspect"),
    (["data", "fetch", "mnist", "--bogus"], "advsvm data"),
    (["--debug", "data", "fetch", "mnist", "--force", "--bogus"], "advsvm data"),
])
def test_an_unknown_option_is_one_line_naming_its_command(capsys, argv, prog):
    """Named by the command's own parser (it was the top-level one's); `data fetch`, whose
    command is two words, raised a KeyError with a traceback."""
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"{prog}: unrecognized arguments: ") and "Traceback" not in err


@pytest.mark.parametrize("argv, prog", [(["--bogus"], "advsvm"),
                                        (["--debug", "--bogus=1"], "advsvm"),
                                        (["--bogus", "demo"], "advsvm demo")])
def test_an_unknown_option_before_the_command_is_named(capsys, argv, prog):
    """`advsvm --bogus` said only that the command was missing."""
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    unknown = [arg for arg in argv if arg.startswith("--b")]
    assert err == (f"{prog}: unrecognized arguments: {' '.join(unknown)} (see {prog} "
                   "--help)\n")


def test_no_command_says_so_and_options_may_be_abbreviated(capsys):
    assert cli.main([]) == 2
    assert capsys.readouterr().err == ("advsvm: the following arguments are required: COMMAND "
                                       "(see advsvm --help)\n")
    with pytest.raises(SystemExit) as version:  # argparse's abbreviation of --version
        cli.main(["--vers"])
    assert version.value.code == 0 and capsys.readouterr().out.startswith("advsvm ")
