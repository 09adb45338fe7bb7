"""What a group's latest snapshots say together: claims, totals, the group's model.

Pure functions over `river_advsvm.streams.snapshot.Snapshot`s (no Kafka): the resume point of every
partition (`claims`) and where the outputs published since those claims start
(`claimed_output_ends`), the snapshots that a later one has entirely folded in (`superseded`),
the merged model a new worker starts from (`group_model`) and the group's counters
(`totals`, what `advsvm inspect` shows). See `river_advsvm.streams.group` for the protocol.

"""

from __future__ import annotations

import json
import logging

from river_advsvm.streams import merge, output_log
from river_advsvm.streams.snapshot import Snapshot

__all__ = ["claimed_output_ends", "claims", "group_model", "members", "superseded", "totals"]

log = logging.getLogger(__name__)


def claims(snapshots, topic_ids: dict | None = None) -> dict[str, dict[int, int]]:
    """The group's next offset of every partition: the largest any snapshot holds for it.

    `topic_ids` (topic -> current id) drops the offsets of a topic's earlier incarnation: those
    positions are in a log that is gone.
    """
    result: dict[str, dict[int, int]] = {}
    for snapshot in snapshots:
        ids = snapshot.fields["topic_ids"]
        for topic, parts in snapshot.offsets.items():
            current = (topic_ids or {}).get(topic)
            if current is not None and ids.get(topic) not in (None, current):
                continue
            mine = result.setdefault(topic, {})
            for partition, offset in parts.items():
                mine[partition] = max(mine.get(partition, 0), offset)
    return result


def claimed_output_ends(snapshots, claimed: dict, partitions,
                        topic_ids: dict | None = None) -> tuple[dict, dict]:
    """Where the outputs of the messages to be learned again start, and the resume offsets to
    read them back for: `(ends, resume)`, `ends` per output partition, `resume` as `claimed`.

    A claimed partition is learned again from its claim: its outputs since were published
    after the snapshots that hold the claim noted their ends (each noted them once the outputs
    before its offsets were delivered; whoever learned on from a claim published after it). A
    partition no snapshot claims is learned from its beginning; a worker that learned some of
    it would have claimed it in its next snapshot, so its outputs came after some worker's
    latest snapshot: they are read from the least end the latest snapshots noted, and from
    offset 0 (only when a snapshot knows the topic as it is now, `topic_ids`: the outputs of
    an earlier incarnation name the offsets of the new messages). Ends are the least any of
    the snapshots used noted; an output topic that one of them did not note is left out (see
    `river_advsvm.streams.output_log`)."""
    wanted = {(tp.topic, tp.partition): claimed.get(tp.topic, {}).get(tp.partition)
              for tp in partitions}
    holders = [s for s in snapshots
               if any(o is not None and s.offsets.get(t, {}).get(p) == o
                      for (t, p), o in wanted.items())]
    known = {t for t, _ in wanted
             if any(output_log.read_as_now(s.fields["topic_ids"], s.offsets, t,
                                           (topic_ids or {}).get(t)) for s in snapshots)}
    resume = output_log.resume_offsets(claimed, partitions, known)
    if any(o is None and t in known for (t, _), o in wanted.items()):
        holders = list(snapshots)  # (an unclaimed partition: after any latest snapshot)
    if not holders:
        return {}, resume
    noted = [s.fields["output_ends"] for s in holders]
    ends: dict = {}
    for topic in set.intersection(*(set(n) for n in noted)):
        parts = set().union(*(n[topic] for n in noted))
        ends[topic] = {p: min(n[topic].get(p, 0) for n in noted) for p in parts}
    return ends, resume


def superseded(snapshots) -> set[str]:
    """Workers whose latest snapshot is entirely inside a later one: a snapshot published after
    it (higher position) that had folded in all of its samples."""
    out = set()
    for s in snapshots:
        for t in snapshots:
            if t.position > s.position and t.worker != s.worker \
                    and t.folded.get(s.worker, -1) >= s.learned:
                out.add(s.worker)
                break
    return out


def members(snapshots) -> tuple[list[Snapshot], dict[str, str]]:
    """The latest snapshots of the group's workers, in the order they were published, and why
    each other one is left out (worker -> reason): the group is the snapshots whose models can
    be averaged with the options most of them share (ties: the earliest snapshot's), so that a
    snapshot with other options, however early, does not decide for the others."""
    ordered = sorted(snapshots, key=lambda s: s.position)
    if not ordered:
        return [], {}
    base = _votes(ordered)[0][0]
    kept, left_out = [], {}
    for s in ordered:
        reason = None if s is base else merge.incompatibility(base.meta, s.meta)
        if reason is None:
            kept.append(s)
        else:
            left_out[s.worker] = reason
    return kept, left_out


def _params_key(meta: dict) -> str:
    return json.dumps(meta.get("params"), sort_keys=True, default=str)


def _votes(ordered: list[Snapshot]) -> list[list[Snapshot]]:
    """The snapshots (in the order given) grouped by their model options, most shared first
    (ties: the group of the earliest snapshot first)."""
    votes: dict = {}
    for s in ordered:
        votes.setdefault(_params_key(s.meta), []).append(s)
    return sorted(votes.values(), key=len, reverse=True)  # (sorted is stable)


def options_to_adopt(snapshots, meta: dict) -> Snapshot | None:
    """The snapshot whose model options a worker starting with the options of `meta` adopts,
    or None if it keeps its own: the group's (see `members`), unless the worker's own options
    count more snapshots with the worker itself than the group's count (a snapshot of other
    options, such as a misconfigured worker's that is gone, does not win over the options the
    others share and the worker starts with)."""
    ordered = sorted(snapshots, key=lambda s: s.position)
    if not ordered:
        return None
    base, mine = _votes(ordered)[0], _params_key(meta)
    own = sum(_params_key(s.meta) == mine for s in ordered) + 1
    return None if own > len(base) else base[0]


def group_model(snapshots):
    """The group's model: what a new worker starts from, as a fitted model (None if empty).

    The latest snapshots of the group (`members`) that no later snapshot has folded in
    entirely, averaged with weights = their `samples_learned`; `n_learned` is the sum over the
    group's latest snapshots. Snapshots left out are logged.
    """
    group, left_out = members(snapshots)
    for worker, reason in left_out.items():
        log.error("leaving out the snapshot of %s: %s", worker, reason)
    averaged = _averaged_members(group)
    if not averaged:
        return None
    return merge.to_model(*merge.average(averaged, sum(s.learned for s in group)))


def _averaged_members(group: list[Snapshot]) -> list[tuple]:
    for s in group:
        if s.model_unread is not None:
            log.error("leaving out the snapshot of %s: %s", s.worker, s.model_unread)
    group = [s for s in group if s.model_unread is None]
    gone = superseded(group)
    return [(*s.whole(), 0.0 if s.worker in gone else float(s.learned)) for s in group]


def totals(snapshots) -> dict:
    """What the group has done, over the latest snapshot of every worker of the group
    (`members`); `left_out` names the others, with why. The messages (consumed, predicted,
    unlabelled, dead letters) and the resume points are every snapshot's: the workers resume
    from them all, and a worker left out did consume what it claims. The samples learned and
    the accuracy are the members', whose models make the group's."""
    every = list(snapshots)
    snapshots, left_out = members(every)
    sums = {key: sum(s.fields["counters"][key] for s in every)
            for key in ("consumed", "predicted", "unlabelled", "dead_letters")}
    sums.update({key: sum(s.fields["counters"][key] for s in snapshots)
                 for key in ("learned", "learned_correct")})
    all_claims = claims(every)
    runs = [s.group["run"] for s in snapshots if s.group["run"]["first"] is not None]
    return {
        "workers": sorted(s.worker for s in snapshots),
        "samples_learned": sums["learned"],
        "consumed": sums["consumed"],
        "predicted": sums["predicted"],
        "unlabelled": sums["unlabelled"],
        "dead_letters": sums["dead_letters"],
        "test_then_train_accuracy": (sums["learned_correct"] / sums["learned"]
                                     if sums["learned"] else None),
        "offsets": {t: {str(p): o for p, o in sorted(parts.items())}
                    for t, parts in sorted(all_claims.items())},
        "claimed_messages": sum(o for parts in all_claims.values() for o in parts.values()),
        "first_message_at": min((r["first"] for r in runs), default=None),
        "last_message_at": max((r["last"] for r in runs), default=None),
        "left_out": left_out,
    }
