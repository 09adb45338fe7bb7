"""Whether a binary classifier has collapsed to a constant on the stream it learns from.

A model whose decisions no longer depend on the input predicts no better than a constant: an
over-regularised step (or an adversarial term too large for the data) flattens `f`, and the
bias, which wanders with the labels, sets the decisions. `CollapseWatch` cuts the learned
samples into blocks of `block` and judges each full block in which both labels arrived (O(1) a
sample). A block in which each label is at least `min_share` looks constant when either

- the decisions are one-sided: all but `ONE_SIDED` of them (2%) predict the same class, so the
  model is wrong on nearly all of the other class; or
- they are lopsided, all but `LOPSIDED` of them (10%) predicting one class, and no better than
  a guess: their balanced accuracy (the mean of the two classes' recalls) is at most
  `1/2 + SLACK`. A model that answers the rarer label rarely but rightly is not caught (its
  balanced accuracy is high); one that adds a few scattered guesses to a constant is; or
- `f` is flat and the decisions are right about as often as a constant guess would be. Flat:
  the input's part of the decisions, `f(x) = g(x) - b`, varies over the block by less than
  `MIN_SPREAD` (standard deviation), a tenth of the unit margin the hinge loss asks of each
  side; a model that learns anything spreads its decisions by far more. As often as a guess:
  no more than the majority label's share, no less than the minority's (give or take
  `SLACK`). This catches a flat model whose bias, wandering with the labels, flips its
  decisions between the classes; or
- the decisions followed time, not the input: on a stream whose labels switch as often as
  independent labels would (at least `SHUFFLED` of that), the decisions switched class at most
  `TIME_RUNS` as often as independent decisions of their shares would (a runs test; with at
  least `MIN_SWITCHES` switches expected) and were right no more than `1/2 + 3 SLACK` of the
  time (balanced). This catches a model constant at each moment whose level swings with its
  steps (a radius as large as the gap between the classes, under a wide kernel): over a block
  its decisions go both ways, in runs, and `f` spreads by time. Or the decisions echoed the
  previous sample's label: they agreed with it at least `ECHO_SIGMAS` standard deviations
  more often than independent decisions of their share would, on labels that switched as
  often as independent ones (at least `ECHO_SHUFFLED` of that), and were right no more than
  `1/2 + SLACK` of the time (balanced). This catches a model whose bias step outweighs `f`:
  each label moves the bias past the margins, and the next decision is that label's, whatever
  the input. (On labels that persist, the previous label is a fair guess of the next, and a
  model given it as an input decides so by right: the labels' switches and the accuracy
  that asks for keep such a model out.)

A block in which one label is rarer than `min_share` (imbalanced data) looks constant when `f`
was 0 at every sample: the model holds nothing (adversarial training can shrink `f` to 0) and
the bias alone decides; or, while that label is at least `RARE_SHARE` of the block (7 of 128),
when the decisions are one-sided, as above: a model that answers at most 2 of 128 decisions
for a label that came 7 times or more is a constant (a radius too large for 90/10 data: every
decision the common class, f far from 0). With fewer samples of the rare label, decisions for
the common class alone are what a good model of imbalanced data often makes, and one still
learning that label may keep `f` small and flat for a long while: neither is judged by its
decisions.

A model's first `blocks` blocks (it starts at `f = 0`, and is still learning) look constant
only when `f` was 0 at every sample: every step it took was undone (a radius too large for the
data empties `f`).

A model that predicts with another function than the one it learns (an average of its iterates)
gives both margins: its decisions are judged as above on the function it learns, and in blocks
of their own on the one it predicts with, which lags behind (an average looks constant while
the model learns its first rule). Its collapse is then either the learned
function's (unless the predicting function's latest judged block, past its first ones, decided
as no constant does: an average of noisy iterates can decide well where each iterate
guesses), or the predicting function's over `blocks` blocks in which the learned function's
decisions were no better than a guess (balanced accuracy at most `1/2 + SLACK`): the average of
iterates that guess is a constant.

A model that has collapsed stays so until the function it predicts with decides again: over
`blocks` judged blocks in a row, past its first ones, its decisions did not look constant and
were better than a guess (balanced accuracy above `1/2 + SLACK`). One such block is not
enough: a flat `f` whose level drifts with the steps decides both ways over a block (by time,
not by input), and about one block in eight of a guess is that right by luck. After the
learned function recovers, an average takes about as many samples as it averages over to
follow it, and a constant still answers until then.

The model has collapsed when the last `blocks` judged blocks all look constant, or at once when
`f` was 0 at every sample of the last judged block: a model that took a block of samples of
both labels and holds nothing is a constant whatever came before (so that a stream of a few
hundred samples shows that collapse too). A block of one label is not judged and changes
nothing: a long run of one class neither hides a collapse nor ends it. A model that is wrong
for a while (the concept changed) is not flat: its `f` still varies with the input.

The watch also keeps the longest run of one label that ended in its judged blocks
(`longest_run`): a model learning online decides as its latest samples did, so a stream in
class order is followed class by class, and a collapse that follows a run of `LONG_RUN` blocks
or more is most likely that (the model's warning says so).

Examples
--------

>>> from river_advsvm.collapse import CollapseWatch

>>> watch = CollapseWatch(block=4, blocks=2, min_share=0.25)
>>> for label, margin, bias in [(1, -0.35, -0.3), (-1, -0.3, -0.25), (1, 0.3, 0.35),
...                             (-1, 0.42, 0.4)] * 2:
...     watch.update(label, margin, bias)
>>> watch.collapsed
True

Two blocks that decide both ways, and rightly, end it (one could be luck):

>>> for label, margin, bias in [(1, 0.8, 0.1), (-1, -0.9, 0.1), (1, 0.7, 0.1), (-1, -0.6, 0.1)]:
...     watch.update(label, margin, bias)
>>> watch.collapsed
True
>>> for label, margin, bias in [(1, 0.8, 0.1), (-1, -0.9, 0.1), (1, 0.7, 0.1), (-1, -0.6, 0.1)]:
...     watch.update(label, margin, bias)
>>> watch.collapsed
False

"""

from __future__ import annotations

import math

__all__ = ["LONG_RUN", "LOPSIDED", "MIN_SPREAD", "MIN_SWITCHES", "ONE_SIDED", "RARE_SHARE",
           "SHUFFLED", "SLACK", "TIME_RUNS", "CollapseWarning", "CollapseWatch"]

#: `f(x)` varying less than this (standard deviation over a block) is flat.
MIN_SPREAD = 0.1
#: The largest share of a block's decisions for the rarer class that still counts as one-sided.
ONE_SIDED = 0.02
#: The largest share of a block's decisions for the rarer class that counts as lopsided.
LOPSIDED = 0.1
#: How far from a constant guess's accuracy a block's accuracy may be and still look constant.
SLACK = 0.05
#: The least share of a block a label under `min_share` must have for one-sided decisions to
#: count.
RARE_SHARE = 0.05
#: Decisions switching class at most this share of what independent ones would, follow time.
TIME_RUNS = 0.4
#: ... on a stream whose labels switched at least this share of what independent ones would.
SHUFFLED = 0.7
#: The least number of decision switches independent decisions would make, for the runs test.
MIN_SWITCHES = 16
#: Decisions agreeing with the previous label this many standard deviations more often than
#: independent ones would, echo it ...
ECHO_SIGMAS = 4.0
#: ... on a stream whose labels switched at least this share of what independent ones would.
ECHO_SHUFFLED = 0.9
#: A run of one label this many blocks long, ended in the judged blocks, is a stream in class
#: order (with a tenth of the labels the other's, independent labels make such a run about
#: once in 10^11 samples).
LONG_RUN = 2


class CollapseWarning(RuntimeWarning):
    """A model's decisions have been those of a constant (one-sided, or flat and no better than
    a guess) for several blocks of samples in which both labels arrived."""


class CollapseWatch:
    """Per-block sums of the learned samples: labels, decisions, right signs, `f(x)` and its
    square.

    Parameters
    ----------
    block
        Samples per block.
    blocks
        How many consecutive blocks must look constant.
    min_share
        The least share of a block each label must have for the block to be judged.
    by_ranking
        For the model of one label in a one-vs-rest model, whose decisions are not the
        prediction (the label of the highest probability is): a block looks constant only when
        `f` was 0 at every sample, or flat and its decisions right about as often as a constant
        guess; its decisions for one class alone are what such a model of a rare label makes.

    """

    def __init__(self, block: int = 128, blocks: int = 2, min_share: float = 0.1,
                 by_ranking: bool = False):
        self.block = block
        self.blocks = blocks
        self.min_share = min_share
        self.by_ranking = by_ranking
        self._verdicts: list[bool] = []
        self._empty = False  # f was 0 at every sample of the last judged block
        self._guesses: list[bool] = []  # the decisions no better than a guess, per judged block
        self._latched = False  # collapsed at the last judged block (held until it decides)
        # Per judged block: past the early ones, it decided as no constant does (both ways,
        # and better than a guess).
        self._decisive: list[bool] = []
        # The function the model predicts with, when it is another (see the module).
        self.deployed: CollapseWatch | None = None
        # The previous sample's label and decision (1, 0; -1: none yet), for the runs test.
        self._previous = (-1, -1)
        # The length of the run of one label under way (its label is the previous sample's); and
        # per judged block, the longest run that ended in it (or went on through it).
        self._run = 0
        self._runs: list[int] = []
        self.restart_block()

    def __setstate__(self, state: dict) -> None:
        # A watch pickled before some of its flags were kept: as `restore` reads its state.
        self.__dict__.update({"_empty": False, "_guesses": [], "_latched": False,
                              "_decisive": [], "deployed": None, "by_ranking": False,
                              "_previous": (-1, -1),
                              "_label_switches": 0, "_decision_switches": 0, "_echoes": 0,
                              "_run": 0, "_runs": [], "_block_run": 0, **state})

    def restart_block(self) -> None:
        """Start a block: after a full one, or dropping the one under way when its samples were
        counted under labels' signs that no longer hold (a binary model's provisional positive
        class turned out to be the negative one)."""
        if self.deployed is not None:
            self.deployed.restart_block()
        self._new_block()

    def _new_block(self) -> None:
        self._positive = 0
        self._predicted_positive = 0
        self._right = 0
        self._right_positive = 0
        self._sum = 0.0
        self._squares = 0.0
        self._seen = 0
        self._label_switches = 0
        self._decision_switches = 0
        self._echoes = 0  # decisions equal to the previous sample's label, within the block
        self._block_run = 0  # the longest run of one label that ended in the block

    @property
    def window(self) -> int:
        """How many of the latest samples a collapse is judged on."""
        return self.block * self.blocks

    def samples_before_verdict(self) -> int:
        """How many samples the watch takes before its next verdict, which may change
        `collapsed` (that sample included): it judges whole blocks."""
        left = self.block - self._seen
        if self.deployed is not None:  # (its verdicts change `collapsed` too, at its own blocks
            # of at most one margin a learned sample)
            left = min(left, self.deployed.samples_before_verdict())
        return left

    def update(self, label: float, margin: float, bias: float, early: bool = False,
               deployed: tuple[float, float] | None = None) -> None:
        """Record one learned sample: the sign of its label, its decision `margin` and the
        bias in that decision. With `early` (a model's first `window` samples: it starts at
        `f = 0` and is still learning), a block ending at this sample looks constant only when
        `f` was 0 at every sample of it. `deployed`: the margin and bias the model predicts
        the sample with, when it predicts with another function (see the module)."""
        if deployed is not None:
            if self.deployed is None:
                self.deployed = CollapseWatch(self.block, self.blocks, self.min_share,
                                              self.by_ranking)
            # Its own first blocks are early too: it starts at f = 0, and it may be given
            # fewer samples than this watch.
            self.deployed.update(label, *deployed,
                                 early or len(self.deployed._verdicts) < self.blocks)
        positive = label > 0
        decided = margin > 0
        f = margin - bias
        last_label, last_decision = self._previous
        if self._seen and last_label >= 0:  # (switches within the block)
            self._label_switches += positive != last_label
            self._decision_switches += decided != last_decision
            self._echoes += decided == last_label
        self._previous = (int(positive), int(decided))
        if positive == last_label:
            self._run += 1
        else:
            self._block_run = max(self._block_run, self._run)
            self._run = 1
        self._positive += positive
        self._predicted_positive += margin > 0
        self._right += (margin > 0) == positive
        self._right_positive += positive and margin > 0
        self._sum += f
        # (A nonzero f whose square underflows still counts: `_looks_constant` reads a sum of
        # squares of 0 as f = 0 at every sample.)
        square = f * f
        self._squares += square if square or not f else math.ulp(0.0)
        self._seen += 1
        if self._seen == self.block:
            if 0 < self._positive < self.block:  # (a block of one label is not judged)
                constant = self._looks_constant(early)
                self._verdicts = [*self._verdicts, constant][-self.blocks:]
                guess = self._balanced_accuracy() <= 0.5 + SLACK
                self._decisive = [*self._decisive, not early and not constant and not guess][
                    -self.blocks:]
                self._empty = self._squares == 0.0
                self._guesses = [*self._guesses, guess][-self.blocks:]
                self._latched = self.collapsed
                self._runs = [*self._runs, max(self._block_run, self._run)][-self.blocks:]
            # (The deployed watch counts its own blocks: it may be given fewer samples.)
            self._new_block()

    def _balanced_accuracy(self) -> float:
        """The mean of the two labels' recalls over the block (both labels arrived)."""
        right_negative = self._right - self._right_positive
        return (self._right_positive / self._positive
                + right_negative / (self.block - self._positive)) / 2

    def judge_by_ranking(self) -> None:
        """Judge as `by_ranking` says from now on (the watch of the function predicted with
        too)."""
        self.by_ranking = True
        if self.deployed is not None:
            self.deployed.by_ranking = True

    def _looks_constant(self, early: bool = False) -> bool:
        if self._squares == 0.0:  # f = 0 at every sample: the bias alone decides
            return True
        n = self.block
        fewest, most = sorted((self._positive, n - self._positive))
        if self.by_ranking:
            return not early and self._flat_guess(fewest, most)
        rarer = min(self._predicted_positive, n - self._predicted_positive)
        if early or fewest < self.min_share * n:
            return not early and fewest >= RARE_SHARE * n and rarer <= ONE_SIDED * n
        if rarer <= ONE_SIDED * n:
            return True
        if rarer <= LOPSIDED * n and self._balanced_accuracy() <= 0.5 + SLACK:
            return True
        return self._flat_guess(fewest, most) or self._follows_time()

    def _flat_guess(self, fewest: int, most: int) -> bool:
        """`f` flat over the block, and its decisions right about as often as a constant guess
        (see the module)."""
        n = self.block
        mean = self._sum / n
        variance = max(self._squares / n - mean * mean, 0.0)
        slack = SLACK * n
        return variance < MIN_SPREAD**2 and fewest - slack <= self._right <= most + slack

    def _follows_time(self) -> bool:
        """The block's decisions came in runs or echoed the previous label, on a stream whose
        labels did not come in runs, and were hardly better than a guess (see the module)."""
        n = self.block
        def independent(positives):  # switches expected of independent values of this share
            share = positives / n
            return 2.0 * share * (1.0 - share) * (n - 1)
        expected = independent(self._predicted_positive)
        if expected < MIN_SWITCHES:
            return False
        label_switches = self._label_switches / independent(self._positive)
        accuracy = self._balanced_accuracy()
        if (label_switches >= SHUFFLED and accuracy <= 0.5 + 3 * SLACK
                and self._decision_switches <= TIME_RUNS * expected):
            return True
        if label_switches < ECHO_SHUFFLED or accuracy > 0.5 + SLACK:
            return False
        # Agreements of independent decisions with the previous label: a binomial count.
        label, decision = self._positive / n, self._predicted_positive / n
        agree = label * decision + (1.0 - label) * (1.0 - decision)
        echoes = self._echoes - agree * (n - 1)
        return echoes >= ECHO_SIGMAS * math.sqrt((n - 1) * agree * (1.0 - agree))

    @property
    def _decides(self) -> bool:
        """The last `blocks` judged blocks each decided as no constant does (one such block
        in a model at chance is a matter of luck: about one in eight)."""
        return len(self._decisive) == self.blocks and all(self._decisive)

    @property
    def longest_run(self) -> int:
        """The longest run of samples of one label that ended in the last `blocks` judged
        blocks, or went on through one of them: a stream in class order when it is `LONG_RUN`
        blocks or more."""
        return max(self._runs, default=0)

    @property
    def emptied(self) -> bool:
        """True when `f` was 0 at every sample of the last judged block."""
        return self._empty

    @property
    def collapsed(self) -> bool:
        """True when the last `blocks` judged blocks all looked constant, or `f` was 0 at every
        sample of the last; or the function the model predicts with collapsed while the one it
        learns guessed; and, once collapsed, until the function the model predicts with
        decides again (see the module)."""
        predicting = self if self.deployed is None else self.deployed
        return self._own_collapse or (self._latched and not predicting._decides) or (
            self.deployed is not None and self.deployed.collapsed
            and len(self._guesses) == self.blocks and all(self._guesses))

    @property
    def _own_collapse(self) -> bool:
        """The function the model learns collapsed (`collapsed` without the deployed one): it
        held nothing, or it looked constant unless the one the model predicts with decided
        as no constant does over its latest judged block (an average's decisions can be
        better than a noisy iterate's guesses)."""
        deployed = self.deployed
        return self._empty or (len(self._verdicts) == self.blocks and all(self._verdicts)
                               and not (deployed is not None and deployed._decisive[-1:] == [True]))

    @property
    def collapsed_deployed(self) -> bool:
        """Whether `collapsed` is the function the model predicts with (not the one it
        learns)."""
        return self.collapsed and not self._own_collapse

    def state(self) -> dict:
        """The verdicts of the last judged blocks and the sums of the block under way, as JSON."""
        state = {"verdicts": list(self._verdicts), "empty": self._empty,
                 "guesses": list(self._guesses), "latched": self._latched,
                 "decisive": list(self._decisive),
                 "counts": [int(c) for c in (self._seen, self._positive,
                                             self._predicted_positive, self._right,
                                             self._right_positive)],
                 "switches": [self._label_switches, self._decision_switches,
                              *self._previous],
                 "echoes": self._echoes,
                 "runs": [self._run, self._block_run, *self._runs],
                 "sums": [float(self._sum), float(self._squares)]}
        if self.deployed is not None:
            state["deployed"] = self.deployed.state()
        return state

    def restore(self, state: dict) -> None:
        """Take back `state()`; `ValueError` (nothing changed) unless it is one of this watch."""
        verdicts, counts, sums = state["verdicts"], state["counts"], state["sums"]
        # (Not in states saved before they were kept.)
        empty, guesses = state.get("empty", False), state.get("guesses", [])
        latched, decisive = state.get("latched", False), state.get("decisive", [])
        deployed = None
        if state.get("deployed") is not None:
            deployed = CollapseWatch(self.block, self.blocks, self.min_share, self.by_ranking)
            deployed.restore(state["deployed"])
        if not (isinstance(verdicts, list) and len(verdicts) <= self.blocks
                and all(type(v) is bool for v in verdicts)):
            raise ValueError(f"collapse verdicts {verdicts!r:.60} are not those of a watch")
        if type(empty) is not bool or (empty and not (verdicts and verdicts[-1])):
            raise ValueError(f"collapse flag 'empty' {empty!r:.60} is not one of a watch")
        if not (isinstance(guesses, list) and len(guesses) <= self.blocks
                and all(type(v) is bool for v in guesses)):
            raise ValueError(f"collapse guesses {guesses!r:.60} are not those of a watch")
        if not (isinstance(decisive, list) and len(decisive) <= len(verdicts)
                and all(type(v) is bool for v in decisive)
                and not any(d and v for d, v in zip(decisive[::-1], verdicts[::-1]))):
            # (a block that decided did not look constant)
            raise ValueError(f"collapse flags 'decisive' {decisive!r:.60} are not those of a "
                             "watch")
        if type(latched) is not bool:
            raise ValueError(f"collapse flag 'latched' {latched!r:.60} is not a bool")
        if not (isinstance(counts, list) and len(counts) == 5
                and all(type(c) is int for c in counts)):
            raise ValueError(f"collapse counts {counts!r:.60} are not 5 ints")
        seen, positive, predicted, right, right_positive = counts
        if not (0 <= seen < self.block and 0 <= right_positive <= min(positive, predicted)
                and max(positive, predicted, right) <= seen):
            raise ValueError(f"collapse counts {counts!r} are out of range")
        # (Not in states saved before the runs test: none counted, no previous sample.)
        switches = state.get("switches", [0, 0, -1, -1])
        if not (isinstance(switches, list) and len(switches) == 4
                and all(type(c) is int for c in switches)
                and 0 <= switches[0] <= max(seen - 1, 0) and 0 <= switches[1] <= max(seen - 1, 0)
                and all(c in (-1, 0, 1) for c in switches[2:])
                and (switches[2] < 0) == (switches[3] < 0)):
            raise ValueError(f"collapse switches {switches!r:.60} are not those of a watch")
        echoes = state.get("echoes", 0)  # (not in states saved before the echo test)
        if not (type(echoes) is int and 0 <= echoes <= max(seen - 1, 0)):
            raise ValueError(f"collapse echoes {echoes!r:.60} are not those of a watch")
        # (Not in states saved before runs were kept: none judged, and one sample long under
        # way if a sample came before. A run is under way exactly when a previous sample is.)
        runs = state.get("runs", [0, 0] if switches[2] < 0 else [1, 0])
        if not (isinstance(runs, list) and 2 <= len(runs) <= 2 + len(verdicts)
                and all(type(r) is int and r >= 0 for r in runs)
                and (runs[0] == 0) == (switches[2] < 0)):
            raise ValueError(f"collapse runs {runs!r:.60} are not those of a watch")
        if not (isinstance(sums, list) and len(sums) == 2
                and all(type(v) in (int, float) and math.isfinite(v) for v in sums)
                and sums[1] >= 0):
            raise ValueError(f"collapse sums {sums!r:.60} are not finite, or negative squares")
        self._verdicts, self._empty, self._guesses = list(verdicts), empty, list(guesses)
        self._latched, self._decisive = latched, list(decisive)
        self.deployed = deployed
        (self._seen, self._positive, self._predicted_positive, self._right,
         self._right_positive) = counts
        self._label_switches, self._decision_switches = switches[:2]
        self._echoes = echoes
        self._run, self._block_run, self._runs = runs[0], runs[1], runs[2:]
        self._previous = (switches[2], switches[3])
        self._sum, self._squares = float(sums[0]), float(sums[1])
