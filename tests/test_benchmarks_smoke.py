"""Every benchmark script runs end to end in its tiny --quick mode and writes flat records."""

from __future__ import annotations

import importlib
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"

REQUIRED_KEYS = {
    "throughput": {"kind"},
    "memory": {"kind"},
    "river_streams": {"kind"},
    "one_pass": {"kind"},
    "paper_tables": {"kind", "pair"},
    "past_boundary": {"kind", "pair", "threat", "reach"},
    "robust_training": {"kind", "pair"},
    "budget_policies": {"kind", "policy", "budget"},
    "monitor": {"d", "samples", "setting", "samples_per_s", "ratio_to_bare"},
    "scaleout": {"workers", "messages", "seconds", "group_msg_per_s", "worker_msg_per_s_mean"},
    "scaleout_sim": {"kind"},
    "decoding": {"d", "decoder", "us_per_message", "ratio_to_stdlib"},
    "vw_ksvm": {"kind", "pair"},
}


def benchmark_module(name: str):
    """A benchmark script imported as a module (the scripts import their `common` by name)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    """Each script's --quick records, run once per test session."""
    cache, paths = {}, {}

    def run(name):
        if name not in cache:
            out = tmp_path_factory.mktemp("bench") / f"{name}.json"
            subprocess.run(
                [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick", "--out", str(out)],
                check=True, capture_output=True, text=True, timeout=300,
            )
            cache[name], paths[name] = json.loads(out.read_text()), out
        return cache[name]

    run.path = paths.__getitem__
    return run


@pytest.mark.parametrize("name", sorted(REQUIRED_KEYS))
def test_benchmark_quick_mode(quick_results, name):
    records = quick_results(name)
    assert records and all(REQUIRED_KEYS[name] <= r.keys() for r in records)
    assert all(not isinstance(v, (dict, list)) for r in records for v in r.values())


def test_paper_tables_quick_mode_fills_every_column(quick_results):
    records = quick_results("paper_tables")
    kinds = {r["kind"] for r in records}
    assert {"grid", "selected", "svc", "model", "learn_one", "attack_subset", "sweep", "summary",
            "target", "flip_check", "dtype_gap"} <= kinds
    summaries = {r["model"]: r for r in records
                 if r["kind"] == "summary" and r["dtype"] == "float32"}
    for model in ("Natural", "adv-linear-SVM", "adv-SVM(D)", "adv-SVM(C)", "SV Natural",
                  "SV adv L-inf 8/255", "SV adv L-inf 0.1", "SV adv L2 1.0"):
        row = summaries[model]
        for key in ("clean", "fgsm", "pgd", "pgd_01", "pgd_l2", "pgd_2", "certified",
                    "certified_l2", "certified_2", "cw", "train_seconds", "predict_us",
                    "seeds"):
            assert row[key] is not None, (model, key)
    for model in ("SV Natural", "SV adv L-inf 8/255"):
        assert summaries[model]["representation"] == "support vectors"
        assert 0 < summaries[model]["support_vectors"] <= 256
        assert summaries[model]["features"] == 0
    assert summaries["Natural"]["features"] == 256 and summaries["Natural"]["support_vectors"] == 0
    assert summaries["adv-SVM(C)"]["zoo"] is not None
    # float64 evaluations of every kernel model on the same seeds, compared pairwise.
    assert {r["model"] for r in records if r["kind"] == "summary" and r["dtype"] == "float64"} \
        == {name for name, row in summaries.items() if row["representation"] != "linear"}
    assert {r["metric"] for r in records if r["kind"] == "dtype_gap"} >= {"clean", "pgd"}
    # learn_many is a learn_one loop: the two learn the same model.
    assert all(r["max_decision_gap_to_learn_many"] < 1e-9
               for r in records if r["kind"] == "learn_one")
    assert all(r["points"] > 0 for r in records if r["kind"] == "attack_subset")
    # The exact SVC is attacked through its exact gradient: PGD cannot raise its accuracy.
    svc = next(r for r in records if r["kind"] == "svc")
    assert svc["pgd_01"] <= svc["pgd"] <= svc["clean"]
    # Every certified point of the subset was attacked, and none flipped.
    checks = [r for r in records if r["kind"] == "flip_check"]
    assert sum(r["certified_points"] for r in checks) > 0
    assert all(r["flipped"] == 0 for r in checks)
    sweeps = {r["sweep"] for r in records if r["kind"] == "sweep"}
    assert sweeps == {"steps", "epsilon"}


def test_paper_tables_writes_its_markdown_summary(quick_results):
    quick_results("paper_tables")
    text = quick_results.path("paper_tables").with_suffix(".md").read_text()
    for heading in ("## Both representations", "## Against the paper", "## float32 against "
                    "float64", "## Are certified points ever flipped?", "## Targets"):
        assert heading in text
    assert "SV Natural" in text and "exact SVC" in text


def test_robust_training_quick_mode_scores_every_model_and_check(quick_results):
    records = quick_results("robust_training")
    summaries = {r["model"]: r for r in records if r["kind"] == "summary"}
    assert set(summaries) == {"Natural", "Adversarial L-inf 8/255", "Adversarial L-inf 0.1",
                              "Adversarial L2 1.0", "Closed form L-inf 8/255", "Exact SVC"}
    assert all(r["seeds"] == (1 if name.startswith("Closed form") else 2)
               for name, r in summaries.items())
    for name in ("Adversarial L-inf 8/255", "Adversarial L-inf 0.1", "Adversarial L2 1.0"):
        row = summaries[name]
        # Restarts and more steps can only find more flips than PGD-10 from the point.
        assert row["strong_pgd"] <= row["strong_pgd10"]
    models = [r for r in records if r["kind"] == "model" and "certified_2" in r]
    assert len(models) == 8
    # Certified, attacked and clean at L2 1.0, on the same points.
    assert all(r["certified_2"] <= r["pgd_2"] <= r["clean_attacked"] for r in models)
    # The stream order changes with the seed: the two orders do not learn the same model.
    natural = [r for r in models if r["model"] == "Natural"]
    assert natural[0]["support_vectors"] != natural[1]["support_vectors"] or \
        any(natural[0][k] != natural[1][k] for k in ("clean", "pgd_0", "pgd_1", "pgd_2"))
    kinds = {r["kind"] for r in records}
    assert {"radius_grid", "radius_check", "defaults_grid", "defaults_check", "bounds_check",
            "target"} <= kinds
    assert sum(r["chosen"] for r in records if r["kind"] == "defaults_grid") == 1
    text = quick_results.path("robust_training").with_suffix(".md").read_text()
    assert "## Targets" in text and "Exact SVC" in text


def test_a_grey_pair_is_its_colour_images_in_grey_cropped_to_28_by_28(tmp_path):
    """Each pixel of a grey pair is the rounded luma of the colour pixel at its place, 2 in from
    each side of a 32 x 32 image (brute force, pixel by pixel); the other classes are left out."""
    robust_training = benchmark_module("robust_training")
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (12, 3 * 32 * 32), dtype=np.uint8)
    y = np.array([1, 9, 5] * 4, dtype=np.uint8)
    np.savez(tmp_path / "cifar10_pairs.npz", X_train=X, y_train=y, X_test=X[:6], y_test=y[:6])
    pair = robust_training.load_pair("cifar-grey-automobile-truck", str(tmp_path))
    images = X[np.isin(y, [1, 9])].reshape(-1, 3, 32, 32).tolist()
    grey = [[round(0.299 * image[0][r][c] + 0.587 * image[1][r][c] + 0.114 * image[2][r][c])
             for r in range(2, 30) for c in range(2, 30)] for image in images]
    np.testing.assert_array_equal(pair["X_train"], np.array(grey) / 255.0)
    assert pair["X_test"].shape == (4, 784) and list(pair["y_train"]) == [1, 9] * 4


def test_scaleout_sim_lengthens_mnist_with_shifted_copies_that_keep_their_labels(tmp_path):
    """`--shifted-copies 2`: each training image once as it is and once under each of the first
    two shifts, with its own label, in one shuffled stream; the test set untouched."""
    common, scaleout_sim = benchmark_module("common"), benchmark_module("scaleout_sim")
    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, (10, 784), dtype=np.uint8)
    y = np.array([8, 9, 3, 8, 9, 8, 9, 9, 8, 1], dtype=np.uint8)
    np.savez(tmp_path / "mnist.npz", X_train=X, y_train=y, X_test=X[:4], y_test=y[:4])
    pair = scaleout_sim.mnist(str(tmp_path), shifted_copies=2)
    kept = np.isin(y, [8, 9])
    images = [(row.reshape(28, 28), label) for row, label in zip(X[kept] / 255.0, y[kept])]
    expected = sorted((np.roll(image, shift, axis=(0, 1)).tobytes(), int(label))
                      for image, label in images for shift in common.SHIFTS[:3])
    got = sorted((row.tobytes(), int(label)) for row, label in zip(pair["X_train"],
                                                                    pair["y_train"]))
    assert got == expected and len(got) == 3 * kept.sum()
    assert not np.array_equal(pair["y_train"], np.tile(y[kept], 3))  # shuffled
    assert pair["X_test"].shape == (3, 784)


def test_budget_policies_quick_mode_compares_every_policy_to_its_unbounded_model(quick_results):
    records = quick_results("budget_policies")
    summaries = [r for r in records if r["kind"] == "summary"]
    assert {r["policy"] for r in summaries} == {"merge", "remove", "unbounded", "compact",
                                                "compact_slot", "truncate", "grow"}
    assert {r["dtype"] for r in summaries} == {"float32", "float64"}
    assert all(0 <= r["clean"] <= 1 and 0 <= r["pgd"] <= 1 for r in summaries)
    assert all(r["clean_vs_unbounded"] == 0 for r in summaries
               if r["policy"] in ("grow", "unbounded"))
    for r in summaries:
        if r["representation"] == "support vectors":
            assert r["features"] == 0 and r["support_vectors"] <= (r["budget"] or 10**9)
            assert r["degradation_per_event"] >= 0
        else:
            assert r["support_vectors"] == 0
    # The smallest support-vector budget binds on the quick stream: merges happened.
    merge = [r for r in summaries if r["policy"] == "merge" and r["budget"] == 16]
    assert merge and all(r["merges"] > 0 and r["degradation_per_event"] > 0 for r in merge)
    assert [r["policy"] for r in records if r["kind"] == "pick"]
    assert quick_results.path("budget_policies").with_suffix(".md").is_file()


@pytest.mark.parametrize("name", ["paper_tables", "budget_policies"])
def test_missing_data_fails_with_a_clear_message(tmp_path, name):
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), "--data", str(tmp_path / "nowhere"),
         "--out", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "not found" in result.stderr and "--data" in result.stderr
    assert not (tmp_path / "out.json").exists()


# -- throughput, memory, river_streams ------------------------------------------------------------


def test_throughput_measures_every_mode_against_its_reference(quick_results):
    records = quick_results("throughput")
    rates = {(r["system"], r["dtype"], r["mode"]): r for r in records if r["kind"] == "rate"}
    for dtype in ("float32", "float64"):
        for mode, reference in [("learn_one", "hand loop"), ("predict_one", "hand loop (predict)"),
                                ("learn_many", "batch limit"),
                                ("decision_then_learn_many", "batch limit")]:
            r = rates[("river-advsvm compact", dtype, mode)]
            assert r["reference"] == reference and r["samples_per_s"] > 0 and r["ratio"] > 0
    assert ("hand loop", "float32", "learn_one") in rates
    assert ("batch limit", "float32", "batch") in rates
    targets = [r for r in records if r["kind"] == "target"]
    assert {t["target"].split()[0] for t in targets} >= {"learn_one", "predict_one", "learn_many"}
    assert all(isinstance(t["met"], bool) for t in targets)


def test_throughput_measures_the_support_vector_step_against_the_hand_step(quick_results):
    rows = {(r["data"], r["mode"]): r for r in quick_results("throughput")
            if r["kind"] == "support_step"}
    assert {data for data, _ in rows} == {"noisy", "digits 8 vs 9"}
    for data in ("noisy", "digits 8 vs 9"):
        for mode, reference in [("learn_one", "hand step"), ("learn_many", "hand step"),
                                ("hand step with merge", "hand step"),
                                ("hand predict (average)", "hand predict"),
                                ("predict_one", "hand predict (average)")]:
            r = rows[(data, mode)]
            assert r["reference"] == reference and r["ratio"] > 0
            assert r["n_support_vectors"] == r["budget"]  # measured at full budget
            # The average predicts over the vectors and those it keeps: at most 1.5 budgets.
            assert r["budget"] <= r["averaged_rows"] <= r["budget"] * 3 // 2
        assert rows[(data, "learn_one")]["merges_per_sample"] >= 0
    # Almost every noisy sample violates the margin: the budget merges on most of them.
    assert rows[("noisy", "learn_one")]["merges_per_sample"] > 0.3


def test_throughput_pass_learns_the_learn_one_model_bit_for_bit(quick_results):
    passes = [r for r in quick_results("throughput") if r["kind"] == "mnist"
              and r["system"] == "river-advsvm"]
    assert {r["dtype"] for r in passes} == {"float32", "float64"}
    assert all(r["same_as_learn_one_loop"] is True for r in passes if r["dtype"] == "float32")
    assert all(0.5 < r["accuracy"] <= 1 for r in passes)


def test_throughput_profile_splits_each_call_into_its_parts(quick_results):
    records = quick_results("throughput")
    for call in ("learn_one", "predict_one"):
        parts = [r for r in records if r["kind"] == "profile" and r["call"] == call]
        assert {"dict -> array", "projection", "cos", "python overhead"} <= {
            r["part"] for r in parts}
        assert all(r["us_per_call"] >= 0 for r in parts)
        assert any(r["kind"] == "cprofile" and r["call"] == call for r in records)


def test_throughput_conversion_check_tells_honest_candidates_from_parsers(quick_results):
    honest = {(r["candidate"], r["d"]): r["refuses_bad_values"]
              for r in quick_results("throughput") if r["kind"] == "conversion"}
    # What the library uses and the general path refuse every bad value; np.fromiter parses
    # "1.5" and struct alone converts a Decimal: the check must catch both, or it would pass
    # anything.
    lenient = {"fromiter", "struct alone", "array('d')"}
    assert honest and all(v for (name, _), v in honest.items() if name not in lenient)
    assert {name for (name, _), v in honest.items() if not v} == lenient


def test_memory_float32_model_is_smaller_and_bounded_policies_stay_flat(quick_results):
    records = quick_results("memory")
    for r in records:
        if r["kind"] == "dtype" and r["dtype"] == "float32":
            assert r["model_mb_ratio_to_float64"] < 0.8
    for policy in ("compact", "compact_slot", "truncate"):
        final = [r for r in records if r["kind"] == "stream" and r["policy"] == policy][-1]
        assert final["features"] <= final["budget"]
        assert final["model_growth_after_first"] < 0.05
    for policy in ("merge", "remove"):
        rows = [r for r in records if r["kind"] == "stream" and r["policy"] == policy]
        if rows:  # the support-vector representation is installed
            assert rows[-1]["support_vectors"] <= rows[-1]["budget"]
            # A few cached kilobytes come and go with the step's scratch state; grow is > 100%.
            assert rows[-1]["model_growth_after_first"] < 0.25
    grow = [r for r in records if r["kind"] == "stream" and r["policy"] == "grow"][-1]
    assert grow["model_growth_after_first"] > 1.0


def test_memory_hostile_names_are_refused_past_max_features(quick_results):
    hostile = [r for r in quick_results("memory") if r["kind"] == "hostile"]
    assert hostile
    for r in hostile:
        assert r["inputs"] <= r["max_features"]
    final = hostile[-1]
    assert final["refused"] > 0 and final["refused_codes"] == "too_many_features"
    # Samples with known names only are still learned after the limit is reached.
    first = next(r for r in hostile if r["policy"] == final["policy"])
    assert final["learned"] > first["learned"]


def test_river_streams_runs_every_model_on_every_stream(quick_results):
    records = quick_results("river_streams")
    runs = [r for r in records if r["kind"] == "run"]
    streams = {r["stream"] for r in runs}
    assert streams == {"Phishing", "Bananas", "Hyperplane", "Agrawal", "SEA", "SEA-drift",
                       "Sine", "Mixed"}
    models = {r["model"] for r in runs}
    assert {"ARF(10)", "AdvKernelSVM(compact) MinMaxScaler"} <= models
    assert len(runs) == len(streams) * len(models)
    # River's MinMaxScaler emits NaN for features it has not seen: it must not crash the model.
    assert all(r["error"] is None for r in runs if r["family"] == "AdvKernelSVM")
    assert all(0 <= r["accuracy"] <= 1 for r in runs if r["error"] is None)
    assert any(r["kind"] == "target" for r in records)


def test_one_pass_goes_on_over_the_stream_and_takes_other_streams(tmp_path):
    """`--passes` reports each model after every further pass; `--streams` draws the named
    streams, two of them beside `river_streams.py`'s (one a thresholded regression target)."""
    out = tmp_path / "one_pass.json"
    subprocess.run([sys.executable, str(BENCHMARKS / "one_pass.py"), "--quick", "--out", str(out),
                    "--passes", "3", "--streams", "Phishing", "Agrawal-f3", "Friedman-14"],
                   check=True, capture_output=True, text=True, timeout=300)
    records = json.loads(out.read_text())
    firsts = {(r["pair"], r["seed"], r["reprocess"]) for r in records if r["kind"] == "mnist"}
    passes = sorted((r["pair"], r["seed"], r["reprocess"], r["passes"])
                    for r in records if r["kind"] == "passes")
    assert firsts and passes == sorted((*key, n) for key in firsts for n in (2, 3))
    assert [r["stream"] for r in records if r["kind"] == "stream" and r["reprocess"] == 1] \
        == ["Phishing", "Agrawal-f3", "Friedman-14"]
    friedman = [r for r in records if r["kind"] == "stream" and r["stream"] == "Friedman-14"]
    assert all(0.5 <= r["holdout_svc"] <= 1 for r in friedman)
    assert "| passes |" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("flags, options", [
    ([], ""), pytest.param(["--last-iterate"], "--averaging 0", marks=pytest.mark.slow)])
def test_scaleout_noisy_serves_the_model_it_names(tmp_path, flags, options):
    """`scaleout.py --noisy`: one `advsvm serve` with no model options (the default model), or
    with `--averaging 0`, and the same model's call in process, over the same messages."""
    out = tmp_path / "noisy.json"
    subprocess.run([sys.executable, str(BENCHMARKS / "scaleout.py"), "--noisy", "--quick",
                    *flags, "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    (record,) = json.loads(out.read_text())
    assert record["serve_options"] == options
    assert record["model"] == ("AdvKernelSVM()" if not flags else "AdvKernelSVM(averaging=None)")
    assert record["messages"] == 1500 and record["d"] == 784 and record["runs"] == 1
    for key in ("service_msg_per_s", "model_call_msg_per_s", "learner_msg_per_s"):
        assert record[key] > 0
    assert record["service_msg_per_s_min"] == record["service_msg_per_s"]
