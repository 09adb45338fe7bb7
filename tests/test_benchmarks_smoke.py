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
    "monitor": {"d", "samples", "setting", "samples_per_s", "ratio_to_bare"},
    "scaleout": {"workers", "messages", "seconds", "group_msg_per_s", "worker_msg_per_s_mean"},
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
