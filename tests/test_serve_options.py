"""`advsvm serve`'s command line is outside input: any values of its options make a service
(made for real; only its run, which connects, is not started) or exit 2 with one line on
stderr, never a traceback; the model a service is made with learns and stays finite."""

from __future__ import annotations

import contextlib
import io
import math
import subprocess
import sys
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")
from river_advsvm.streams import cli, service  # noqa: E402

NUMBERS = st.one_of(
    st.integers(1, 1000).map(str), st.floats(0.001, 10).map(repr),
    st.floats(0.001, 0.999).map(repr), st.floats().map(repr),
    st.integers(-10**20, 10**20).map(str), st.integers(0, 2000).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "1e-320", "0", "-0", "1e6", "1e10", "2e15",
                     "0x10", "1_000", " 5", "5 ", "", "abc", "１２", "1e", "True"]))
NAMES = st.one_of(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(max_size=8),
                  st.sampled_from(["t", "a.b", "..", ".", "x" * 250, "t-g-snapshots"]))
NUMERIC = ["--checkpoint-every", "--checkpoint-interval", "--exit-when-idle",
           "--max-message-bytes", "--features", "--connect-timeout", "--session-timeout-ms",
           "--max-poll-records", "--shutdown-timeout", "--blas-threads", "--sync-every",
           "--basis-refresh-every", "--monitor-sample-rate", "--monitor-epsilon", "--epsilon",
           "--adversary-steps", "--reprocess", "--averaging", "--gamma", "--regularization",
           "--step-size", "--bias-step-size", "--budget", "--max-features", "--seed",
           "--liveness-timeout"]
PAIRS = ["--labels", "--monitor-bounds", "--input-bounds"]
TOPICS = ["--predictions-topic", "--alerts-topic", "--dead-letter-topic", "--sync-topic",
          "--worker-id"]
CHOICES = {"--model": ["kernel", "linear"], "--norm": ["l2", "linf"],
           "--budget-policy": ["merge", "truncate", "compact", "grow"],
           "--kernel": ["rbf", "laplacian"], "--dtype": ["float32", "float64"],
           "--schedule": ["constant", "diminishing"], "--adversary": ["pgd", "closed_form"],
           "--group-model": ["basis", "union"], "--monitor-norm": ["l2", "linf"]}


@st.composite
def command_lines(draw, directory):
    argv = ["--bootstrap-servers", "127.0.0.1:1", "--topic",
            draw(st.one_of(st.just("in"), NAMES)), "--group",
            draw(st.one_of(st.just("g"), NAMES)), "--checkpoint-dir", directory]
    for flag in draw(st.lists(st.sampled_from(NUMERIC), max_size=4, unique=True)):
        argv.append(f"{flag}={draw(NUMBERS)}")
    for flag in draw(st.lists(st.sampled_from(PAIRS), max_size=2, unique=True)):
        argv += [flag, draw(NUMBERS), draw(NUMBERS)]
    for flag in draw(st.lists(st.sampled_from(TOPICS), max_size=2, unique=True)):
        argv.append(f"{flag}={draw(NAMES)}")
    for flag in draw(st.lists(st.sampled_from(sorted(CHOICES)), max_size=3, unique=True)):
        argv += [flag, draw(st.sampled_from(CHOICES[flag]))]
    return argv


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_serve_options_make_a_service_or_one_line(tmp_path_factory, data):
    argv = data.draw(command_lines(str(tmp_path_factory.mktemp("ckpt"))))
    made = []

    def run(self):
        made.append(self)
        return 0

    err = io.StringIO()
    with mock.patch.object(service.Service, "run", run), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    text = err.getvalue()
    event(f"exit {code}")
    if code == 0:
        served, = made
        model = served.model_factory()
        rng = np.random.default_rng(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(30):
                x = {"a": float(rng.random()), "b": float(rng.random())}
                model.learn_one(x, x["a"] > 0.5)
            assert math.isfinite(model.decision_one({"a": 0.3, "b": 0.9}))
        return
    assert code == 2, (argv, code, text)
    assert "Traceback" not in text, text
    assert text.strip().splitlines()[-1].startswith(("advsvm serve", "usage")), text


def test_a_service_without_a_monitor_does_not_load_the_monitors_metrics(tmp_path):
    """River's metrics import SciPy's statistics (about a second): a service with no alerts
    topic checks its monitor flags without them, and with one it loads them."""
    script = (
        "import sys\n"
        "from unittest import mock\n"
        "from river_advsvm.streams import cli, service\n"
        "argv = ['--bootstrap-servers', '127.0.0.1:1', '--topic', 't', '--group', 'g',\n"
        f"        '--checkpoint-dir', {str(tmp_path)!r}, '--monitor-sample-rate', '0.5']\n"
        "argv += sys.argv[1:]\n"
        "with mock.patch.object(service.Service, 'run', lambda self: 0):\n"
        "    assert cli.main(argv) == 0\n"
        "print('river.metrics' in sys.modules)\n"
    )
    loaded = [subprocess.run([sys.executable, "-c", script, *extra], capture_output=True,
                             text=True, check=True).stdout.split()[-1]
              for extra in ([], ["--alerts-topic", "alerts"])]
    assert loaded == ["False", "True"]
