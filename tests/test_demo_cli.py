"""`advsvm demo` end to end: digits, an .npz, a Parquet file, --all, --help, errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from river_advsvm import cli, demo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["demo", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str, first_column: str = "model") -> dict[str, dict[str, str]]:
    """The table printed after a header line starting with `first_column`, as {model: row};
    cells are separated by two spaces or more."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_column))
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
    assert list(rows) == ["natural", "adversarial (L2 ε=0.5)"]
    _, y = demo.load_digits_pair(1, 7, seed=0)
    second_label_at = int(np.flatnonzero(y != y[0])[0])  # models know both labels after it
    for row in rows.values():
        assert row["samples"] == "361"
        clean, robust, certified = (float(row[k]) for k in ("clean %", "robust %", "certified %"))
        assert 0 <= certified <= robust <= clean <= 100  # certified and attacked are bounds
        assert int(row["attacked"]) == 361 - second_label_at - 1  # every sample after that
    assert float(rows["natural"]["clean %"]) > 90
    # Trained at half the attack radius, the adversarial model keeps most of its clean
    # accuracy and withstands PGD more often than the natural one.
    adversarial = rows["adversarial (L2 ε=0.5)"]
    assert float(adversarial["clean %"]) > 90
    assert float(adversarial["robust %"]) > float(rows["natural"]["robust %"])
    check_plot(tmp_path / cli.PLOT_NAME)
    assert f"{tmp_path / cli.PLOT_NAME}" in out


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
    assert list(held_out) == ["natural", "adversarial (L2 ε=0.5)"]
    assert [row["test samples"] for row in held_out.values()] == ["60", "60"]
    check_plot(tmp_path / cli.PLOT_NAME)


def test_demo_reads_a_parquet_file_with_a_held_out_fraction(capsys, tmp_path):
    parquet = pytest.importorskip("streams.parquet")
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
     (["--out", "no/such/dir"], "not a directory")],
)
def test_demo_errors_are_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    np.savez("labels.npz", X_train=np.random.default_rng(0).random((40, 4)),
             y_train=np.resize([1, 2], 40))
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("advsvm demo:") and message in err
    assert not (tmp_path / cli.PLOT_NAME).exists()


def test_the_core_imports_no_optional_dependency():
    code = ("import sys, river_advsvm, river_advsvm.monitor, river_advsvm.evaluate, "
            "river_advsvm.demo, river_advsvm.cli, river_advsvm.multiclass; "
            "print(sorted(m for m in ('sklearn', 'matplotlib', 'tqdm', 'pandas', 'pyarrow', "
            "'streams') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
