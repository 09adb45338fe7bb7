"""Fault points: named places in the service where a test makes it die or freeze on purpose.

A crash test must reach the windows it claims (inside a checkpoint write, between a publication
and the local write that follows it, while holding work not yet published); a kill at a random
time mostly lands elsewhere. The service calls `reach(point)` at each such place; nothing
happens unless the environment asks for it:

    ADVSVM_FAULTS="checkpoint.temp-written:kill:3"   # the 3rd time: SIGKILL itself
    ADVSVM_FAULTS="batch.learned:stop:2"             # the 2nd time: SIGSTOP itself
    ADVSVM_FAULTS="group.joining:term"               # the 1st time: SIGTERM itself
    ADVSVM_FAULT_MARKS=/some/directory               # where a point reached leaves a mark

Several faults are separated by commas; the count defaults to 1. Before acting, the point
writes `ADVSVM_FAULT_MARKS/<point>` (JSON: the point, how many times it was reached, and what
the caller passed), synced, so a test can assert that the kill or freeze happened there.

Points:

- `outputs.flushed`: the outputs before a checkpoint are delivered; the checkpoint is not
  written yet;
- `checkpoint.temp-written`: inside a checkpoint write: the new file is written and synced
  under its temporary name, not renamed over the old one yet;
- `checkpoint.written`: the checkpoint is replaced; Kafka's offsets are not committed yet;
- `snapshot.published`: a group worker's snapshot is acknowledged by the broker; its local
  copy is not written yet;
- `batch.decided`: a batch was learned, its outputs not handed over yet (a test that freezes
  the broker here has them unacknowledged, however fast it would have answered);
- `batch.learned`: a batch was learned and its outputs handed over, with work not yet in a
  checkpoint or snapshot (`unpublished`: how many messages; `left`: the records of the poll
  after the batch);
- `group.joining`: a poll returned while the consumer's join of its group waits for the
  broker's answer;
- `service.closing`: the service stopped and closes its Kafka clients.
"""

from __future__ import annotations

import json
import os
import signal

__all__ = ["POINTS", "reach"]

POINTS = ("outputs.flushed", "checkpoint.temp-written", "checkpoint.written",
          "snapshot.published", "batch.decided", "batch.learned", "group.joining",
          "service.closing")
_ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM}


def _plan(text: str) -> dict[str, tuple[str, int]]:
    plan = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = item.split(":")
        if len(parts) == 2:  # POINT:ACTION: the first time
            parts.append("1")
        point, action, count = parts if len(parts) == 3 else (None, None, "")
        # (A count of 0 never fires: a crash test would believe a fault armed that never came.)
        if (point not in POINTS or action not in _ACTIONS or not count.isdecimal()
                or int(count) < 1):
            raise ValueError(f"ADVSVM_FAULTS: {item!r} is not POINT:kill|stop|term[:N] "
                             f"(N >= 1) with a point of {', '.join(POINTS)}")
        plan[point] = (action, int(count))
    return plan


_PLAN = _plan(os.environ.get("ADVSVM_FAULTS", ""))
_REACHED: dict[str, int] = {}


def reach(point: str, **detail) -> None:
    """The service is at `point`: die or freeze there if the environment asked for it."""
    if point not in _PLAN:
        return
    _REACHED[point] = _REACHED.get(point, 0) + 1
    action, count = _PLAN[point]
    if _REACHED[point] != count:
        return
    marks = os.environ.get("ADVSVM_FAULT_MARKS")
    if marks:
        # Written whole under another name, then renamed: whoever waits for the mark never
        # reads it half written.
        path = os.path.join(marks, point)
        with open(path + ".part", "w") as f:
            json.dump({"point": point, "reached": _REACHED[point], "action": action, **detail}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".part", path)
    os.kill(os.getpid(), _ACTIONS[action])
