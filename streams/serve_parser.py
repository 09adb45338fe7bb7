"""The options of `advsvm serve`: every one of them, described (`advsvm serve --help`)."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap

from river_advsvm.cli import whole_numbers
from river_advsvm.streams import logs, metrics, security

__all__ = ["build_parser"]

DESCRIPTION = (
    "Consume JSON messages {\"id\", \"x\", \"y\"} from a Kafka topic: predict each one "
    "(published to the predictions topic), learn the labelled ones, dead-letter the invalid "
    "ones with a reason code, and checkpoint model + offsets atomically so that every message "
    "is learned exactly once even across crashes. A checkpoint in --checkpoint-dir wins over "
    "the model options. x is an object of name -> number or an array of numbers; y (optional) "
    "a string, integer, boolean or number."
)

# One line per paragraph and per status: `_Formatter` fills them to the terminal's width.
EPILOG = "\n".join([
    "signals and exit statuses:",
    "  SIGTERM, SIGHUP and SIGINT (Ctrl-C) drain: the batch in hand is finished, outputs are "
    "flushed, a final checkpoint is written; a second Ctrl-C stops at once (the last "
    "checkpoint stays valid).",
    "    0    stopped by SIGTERM, SIGHUP or --exit-when-idle, final checkpoint written",
    "    1    outputs not delivered within --shutdown-timeout (no final checkpoint; what came "
    "after the last one is learned again at the next start), or an unexpected error",
    "    2    usage error: bad options, unusable security settings or files, unreadable "
    "checkpoint or one beyond --budget / --max-features / --dtype, checkpoint directory in "
    "use, a group's snapshot topic of more than one partition, --metrics-port in use",
    "    3    no broker answered within --connect-timeout at start-up, or the consumer group's "
    "rebalance did not end within the group's rebalance timeout (it may come back: restart)",
    "    4    at start-up the cluster answered and refused the connection settings (wrong CA, "
    "certificate not valid for the host, client certificate missing or refused, plaintext "
    "against TLS or TLS against plaintext, wrong SASL password or mechanism): fix them",
    "    5    a fault of the machine (disk full, I/O error, out of memory): the last checkpoint "
    "is intact; restart once it is gone",
    "    130  stopped by SIGINT, after the same drain as SIGTERM",
    "  A message never stops the service: whatever goes wrong with one is its dead letter (out "
    "of memory is status 5).",
]) + "\n"


def _label(text: str):
    """A label from the command line: JSON when it parses (1, true, 2.5), else the string."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (bool, int, float, str)) else text


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Each line of the description, of the groups' texts and of the epilog (one paragraph or
    one exit status each) filled to the terminal's width, its continuation lines under its
    text (an exit status's: under the text after the number)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            lead = len(line) - len(line.lstrip(" "))
            numbered = re.match(r" *\d+ +", line)
            hang = numbered.end() if numbered else lead
            lines.append(textwrap.fill(line[lead:], width, initial_indent=indent + " " * lead,
                                       subsequent_indent=indent + " " * hang) or indent)
        return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit status 2."""

    def error(self, message: str):
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The parser of `advsvm serve`."""
    parser = _Parser(prog="advsvm serve", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=_Formatter)
    where = parser.add_argument_group("where (all four required, unless --local-broker)")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                       help="the Kafka brokers to start from, comma-separated")
    where.add_argument("--topic", metavar="T", help="the input topic")
    where.add_argument("--group", metavar="G",
                       help="the consumer group: the checkpoint decides where each partition it "
                       "holds resumes; one it does not hold (a new checkpoint directory, or a "
                       "partition another service of the group handed over) resumes at the "
                       "group's committed offset, or at its beginning without one")
    where.add_argument("--checkpoint-dir", metavar="DIR",
                       help="where the checkpoint is kept (created if missing; one service per "
                       "directory)")
    outputs = parser.add_argument_group("outputs (each optional)")
    outputs.add_argument("--predictions-topic", metavar="P",
                         help="one JSON prediction per valid message: id, label, probability, "
                         "where the message was")
    outputs.add_argument("--alerts-topic", metavar="A",
                         help="the robustness monitor's alerts as JSON (turns the monitor on)")
    outputs.add_argument("--dead-letter-topic", metavar="D",
                         help="every refused message: its reason code, its position and its "
                         "original bytes in base64")
    service = parser.add_argument_group("service")
    service.add_argument("--checkpoint-every", type=whole_numbers(1), default=1000, metavar="N",
                         help="checkpoint after N messages (default 1000)")
    service.add_argument("--checkpoint-interval", type=float, default=10.0, metavar="SECONDS",
                         help="or after this long with progress (default 10)")
    service.add_argument("--exit-when-idle", type=float, metavar="SECONDS",
                         help="stop cleanly after this long without a message, caught up with "
                         "every partition assigned (with none: after twice the session timeout "
                         "too) (default: run until SIGTERM)")
    service.add_argument("--max-message-bytes", type=whole_numbers(1), default=2**20,
                         metavar="BYTES",
                         help="larger messages are dead letters (default 1 MiB)")
    service.add_argument("--features", type=int, metavar="N",
                         help="length of array-form x, at most --max-features; other lengths are "
                         "dead letters (default: the first learned array's)")
    service.add_argument("--labels", nargs=2, type=_label, metavar=("A", "B"),
                         help="pin the two classes, in either order, as the messages' JSON "
                         "spells them (1 7, "
                         "true false; anything else is a string: False True are the strings "
                         "'False' and 'True'); other labels are dead letters (default: the "
                         "first two labels seen)")
    service.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                         help="at start-up, give up (exit status 3) if no broker answers within "
                         "this long (default 30); a broker that answers and refuses the "
                         "security settings stops it at once (status 4); later outages are "
                         "waited out")
    service.add_argument("--session-timeout-ms", type=int, default=10000, metavar="MS",
                         help="the consumer group's session timeout: a frozen service loses its "
                         "partitions after this long (default 10000, at most 534999: the "
                         "Kafka client's limit)")
    service.add_argument("--max-poll-records", type=int, default=500, metavar="N",
                         help="records per poll, learned as one batch (default 500)")
    service.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="SECONDS",
                         help="how long the stop waits for the broker, all told: final "
                         "flush, leaving the group (default 30)")
    service.add_argument("--debug", action="store_true",
                         help="show the traceback of an error, not only its one-line message")
    service.add_argument("--log-level", default="info",
                         choices=["debug", "info", "warning", "error"],
                         help="what goes to stderr (default info; debug also shows the Kafka "
                         "client's messages and tracebacks)")
    logs.add_arguments(service)
    service.add_argument("--blas-threads", type=int, default=1, metavar="N",
                         help="BLAS threads in the service (default 1: per-message products "
                         "gain nothing from more; 0 leaves BLAS as it is; at most 4096)")
    group = parser.add_argument_group(
        "scale-out (several workers, one model)",
        "Start N services with the same --group and --sync-every: Kafka splits the partitions "
        "between them and they average their models through a snapshot topic. Needs the "
        "same model options everywhere, a numeric --gamma and the 'merge', 'remove' or "
        "'compact' policy.")
    group.add_argument("--sync-every", type=whole_numbers(1), metavar="N",
                       help="be one worker of the group: every N messages average the peers' "
                       "models in and publish this one (replaces --checkpoint-every)")
    group.add_argument("--sync-topic", metavar="S",
                       help="the group's snapshot topic (default <topic>-<group>-snapshots)")
    group.add_argument("--worker-id", metavar="ID",
                       help="this worker's id (default: kept in the checkpoint directory)")
    group.add_argument("--group-model", default="basis", choices=["basis", "union"],
                       help="how workers with support vectors (--budget-policy merge or remove) "
                       "fold their peers: 'basis' (default) projects each model onto vectors "
                       "the group shares and averages --budget coefficients per peer; 'union' "
                       "takes every peer's vectors, then merges back down to --budget, at a "
                       "cost that grows with the number of workers. 'compact' random features "
                       "average their coefficients either way")
    group.add_argument("--basis-refresh-every", type=int, default=1, metavar="K",
                       help="with --group-model basis: a worker proposes its vectors (filled "
                       "up with its peers') as the group's new basis after K of its folds on "
                       "the same one; default 1, about one new basis per round of syncs of "
                       "the group (each costs every worker a --budget x --budget kernel matrix "
                       "and its inverse)")
    watch = parser.add_argument_group(
        "robustness monitor (on with --alerts-topic)",
        "Before learning each labelled message, a RobustnessMonitor checks the current model on "
        "it and, on a share of them, attacks it with PGD-10 and certifies it; drift in clean or "
        "robust accuracy, or a clean-robust gap, is published as JSON to the alerts topic. Its "
        "windows and detectors are saved in the checkpoint.")
    watch.add_argument("--monitor-sample-rate", type=float, default=0.05, metavar="R",
                       help="share of labelled messages attacked (default 0.05)")
    watch.add_argument("--monitor-epsilon", type=float, metavar="EPS",
                       help="radius of the monitor's attack (default: the model's epsilon "
                       "if > 0, a checkpoint's when one is restored, else 8/255)")
    watch.add_argument("--monitor-norm", choices=["l2", "linf"],
                       help="norm of the monitor's attack (default: the model's norm)")
    watch.add_argument("--monitor-bounds", nargs=2, type=float, metavar=("LOW", "HIGH"),
                       help="the box the inputs live in, which attacked inputs stay in (e.g. "
                       "0 1 for pixels; default: no box)")
    security.add_arguments(parser)
    metrics.add_arguments(parser)
    _add_model(parser.add_argument_group("model (ignored when a checkpoint exists)"))
    _add_local(parser.add_argument_group("local broker (one-command demo)"))
    return parser


def _add_model(model) -> None:
    model.add_argument("--model", choices=["kernel", "linear"], default="kernel",
                       help="AdvKernelSVM (a kernel SVM, default) or AdvLinearSVM")
    model.add_argument("--epsilon", type=float, default=0.0,
                       help="radius of the worst case the model trains against (default 0: "
                       "a plain SVM)")
    model.add_argument("--norm", default="l2", choices=["l2", "linf"],
                       help="norm of that radius (default l2)")
    model.add_argument("--adversary", default="pgd", choices=["pgd", "closed_form"],
                       help="how the kernel model finds the worst case while learning: gradient "
                       "steps on its own margin (default) or the paper's closed-form bound")
    model.add_argument("--adversary-steps", type=whole_numbers(1, 100), metavar="K",
                       help="gradient steps of the 'pgd' adversary (default: the model's, 1)")
    model.add_argument("--reprocess", type=whole_numbers(0, 100), metavar="N",
                       help="hinge steps on stored support vectors after each message (default: "
                       "the model's, 1; 0 for plain SGD)")
    model.add_argument("--averaging", type=whole_numbers(0, 1_000_000), metavar="H",
                       help="predict with the average of the model's iterates over about H "
                       "messages (default: the model's, 1000); 0: the last iterate predicts")
    model.add_argument("--input-bounds", nargs=2, type=float, metavar=("LOW", "HIGH"),
                       help="the box every input stays in while attacked in training, e.g. 0 1 "
                       "for pixels (default: none)")
    model.add_argument("--kernel", default="rbf", choices=["rbf", "laplacian"],
                       help="the kernel (default rbf)")
    model.add_argument("--gamma", default="scale",
                       help="kernel width: a positive number, or 'scale' (fitted on the first 100 "
                       "labelled samples; default). A worker group needs a number: 2/(d Var x) "
                       "over a sample of inputs on one scale is what 'scale' fits")
    model.add_argument("--regularization", type=float, default=1e-4,
                       help="the L2 penalty, lambda (default 1e-4)")
    model.add_argument("--step-size", type=float,
                       help="the step of the coefficients (default: the model's)")
    model.add_argument("--bias-step-size", type=float,
                       help="the step of the bias (default: the model's)")
    model.add_argument("--schedule", default="constant", choices=["constant", "diminishing"],
                       help="step schedule (default constant)")
    model.add_argument("--budget", type=whole_numbers(1, 1_000_000), default=1024,
                       help="support vectors or random features kept (default 1024): memory "
                       "and time per message ('grow' keeps adding features, whatever it is)")
    model.add_argument("--budget-policy", default="merge", metavar="POLICY",
                       choices=["merge", "remove", "compact", "compact_slot", "truncate",
                                "grow"],
                       help="'merge' or 'remove' keep support vectors (exact kernel), "
                       "'compact', 'compact_slot', 'truncate' or 'grow' random features; what "
                       "happens past the budget (default merge, as the library's)")
    model.add_argument("--dtype", choices=["float32", "float64"],
                       help="the number type of the stored vectors or features (default: the "
                       "model's, float32: half the memory and time of float64; a checkpoint "
                       "of float64 vectors needs float64)")
    model.add_argument("--max-features", type=int, metavar="N",
                       help="most input names the model learns; a message that would add more "
                       "is a dead letter, code too_many_features (default: the model's, "
                       "10,000)")
    model.add_argument("--seed", type=int, default=0,
                       help="seed of the model's random choices (default 0: restarts reproduce)")


#: The options of the kernel model alone, by dest: with --model linear, one that differs from
#: its default is refused rather than ignored.
KERNEL_ONLY = {"--kernel": "kernel", "--gamma": "gamma", "--budget": "budget",
               "--budget-policy": "budget_policy", "--seed": "seed", "--adversary": "adversary",
               "--adversary-steps": "adversary_steps", "--reprocess": "reprocess",
               "--averaging": "averaging", "--input-bounds": "input_bounds",
               "--dtype": "dtype"}
#: The options of --local-broker alone (each None unless given), and the defaults of those
#: that have one: given without it, they are refused rather than ignored.
LOCAL_ONLY = {"--replay": "replay", "--replay-target": "replay_target",
              "--replay-limit": "replay_limit", "--replay-pair": "replay_pair",
              "--replay-unlabelled-every": "replay_unlabelled_every",
              "--partitions": "partitions", "--show": "show", "--outputs-file": "outputs_file"}
LOCAL_DEFAULTS = {"replay": "phishing", "replay_target": "y", "replay_unlabelled_every": 10,
                  "show": 5}
#: The most worker processes --local-broker starts (each a Python process on this machine).
MAX_LOCAL_WORKERS = 32


def _add_local(local) -> None:
    local.add_argument("--local-broker", action="store_true",
                       help="start the bundled broker on 127.0.0.1, create the topics, replay a "
                       "data set into the input topic, serve it until idle, show a sample of "
                       "the predictions and alerts, and stop the broker")
    local.add_argument("--replay", metavar="SOURCE",
                       help=f"{LOCAL_DEFAULTS['replay']!r} (default), a .parquet file or an .npz "
                       "with X_train/y_train")
    local.add_argument("--replay-target", metavar="COLUMN",
                       help=f"label column of a Parquet file (default "
                       f"{LOCAL_DEFAULTS['replay_target']})")
    local.add_argument("--replay-limit", type=whole_numbers(1), metavar="N",
                       help="replay only the first N samples")
    local.add_argument("--replay-pair", nargs=2, type=_label, metavar=("A", "B"),
                       help="keep only these two labels (e.g. 1 7 for MNIST); needed when the "
                       "source has more than two")
    local.add_argument("--replay-unlabelled-every", type=whole_numbers(0), metavar="K",
                       help=f"send every K-th message without its label (default "
                       f"{LOCAL_DEFAULTS['replay_unlabelled_every']}; 0: never)")
    local.add_argument("--partitions", type=whole_numbers(1), metavar="N",
                       help="partitions of the input topic (default 1, or 2 per worker)")
    local.add_argument("--workers", type=whole_numbers(1, MAX_LOCAL_WORKERS), metavar="N",
                       help=f"run N worker processes that sync (default --sync-every 1000; at "
                       f"most {MAX_LOCAL_WORKERS}: a group on one machine)")
    local.add_argument("--show", type=whole_numbers(0), metavar="N",
                       help="print the first N predictions and alerts before the broker stops "
                       f"(default {LOCAL_DEFAULTS['show']}; 0: none)")
    local.add_argument("--outputs-file", metavar="PATH",
                       help="also write every prediction, alert and dead letter there, one "
                       "JSON object per line")
