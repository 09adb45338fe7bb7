"""Every benchmark script runs end to end in its tiny --quick mode and writes flat records."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"

REQUIRED_KEYS = {
    "throughput": {"system", "d", "budget", "mode", "samples_per_s", "ratio_to_numpy"},
    "memory": {"policy", "samples", "rss_mb", "model_mb", "features"},
    "paper_tables": {"kind", "pair"},
    "budget_policies": {"kind", "policy", "budget"},
    "monitor": {"d", "samples", "setting", "samples_per_s", "ratio_to_bare"},
    "scaleout": {"workers", "messages", "seconds", "group_msg_per_s", "worker_msg_per_s_mean"},
    "decoding": {"d", "decoder", "us_per_message", "ratio_to_stdlib"},
}


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    """Each script's --quick records, run once per test session."""
    cache = {}

    def run(name):
        if name not in cache:
            out = tmp_path_factory.mktemp("bench") / f"{name}.json"
            subprocess.run(
                [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick", "--out", str(out)],
                check=True, capture_output=True, text=True, timeout=300,
            )
            cache[name] = json.loads(out.read_text())
        return cache[name]

    return run


@pytest.mark.parametrize("name", sorted(REQUIRED_KEYS))
def test_benchmark_quick_mode(quick_results, name):
    records = quick_results(name)
    assert records and all(REQUIRED_KEYS[name] <= r.keys() for r in records)
    assert all(not isinstance(v, (dict, list)) for r in records for v in r.values())


def test_bounded_policies_are_flat_in_the_memory_benchmark(quick_results):
    records = quick_results("memory")
    for policy in ("compact", "compact_slot", "truncate"):
        final = [r for r in records if r["policy"] == policy][-1]
        assert final["features"] <= 1024
        assert final["model_growth_after_warmup"] < 0.05
    grow = [r for r in records if r["policy"] == "grow"][-1]
    assert grow["model_growth_after_warmup"] > 1.0


def test_paper_tables_quick_mode_fills_every_column(quick_results):
    records = quick_results("paper_tables")
    kinds = {r["kind"] for r in records}
    assert {"grid", "selected", "svc", "model", "learn_one", "attack_subset", "sweep", "summary",
            "target"} <= kinds
    summaries = {r["model"]: r for r in records if r["kind"] == "summary"}
    for model in ("Natural", "adv-linear-SVM", "adv-SVM(D)", "adv-SVM(C)"):
        row = summaries[model]
        for key in ("clean", "fgsm", "pgd", "certified", "cw", "train_seconds", "seeds"):
            assert row[key] is not None, (model, key)
    assert summaries["adv-SVM(C)"]["zoo"] is not None
    # learn_many is a learn_one loop: the two learn the same model.
    assert all(r["max_decision_gap_to_learn_many"] < 1e-9
               for r in records if r["kind"] == "learn_one")
    assert all(r["points"] > 0 for r in records if r["kind"] == "attack_subset")
    sweeps = {r["sweep"] for r in records if r["kind"] == "sweep"}
    assert sweeps == {"steps", "epsilon"}


def test_budget_policies_quick_mode_compares_every_policy_to_grow(quick_results):
    records = quick_results("budget_policies")
    summaries = [r for r in records if r["kind"] == "summary"]
    assert {r["policy"] for r in summaries} == {"compact", "compact_slot", "truncate", "grow"}
    assert all(0 <= r["clean"] <= 1 and 0 <= r["pgd"] <= 1 for r in summaries)
    assert all(r["clean_vs_grow"] == 0 for r in summaries if r["policy"] == "grow")
    assert [r["policy"] for r in records if r["kind"] == "pick"]


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
