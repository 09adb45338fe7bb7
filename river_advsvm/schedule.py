"""Step sizes of the online SVMs: a constant or a diminishing schedule, and the clock of a
worker whose model is averaged with a group's (`StepSchedule.join_group`)."""

from __future__ import annotations

import math

from river_advsvm import inputs

__all__ = ["MAX_GROUP_RATE", "MAX_STEP", "SCHEDULES", "StepSchedule"]

SCHEDULES = ("constant", "diminishing")
#: The most samples of a group one worker's sample may stand for (`StepSchedule.join_group`).
MAX_GROUP_RATE = 1e6
#: The largest step of `f` and of the bias (the defaults are 0.5 and 0.05): with larger ones the
#: coefficients, the norm or the bias of a long stream could leave float64's range.
MAX_STEP = 1e6


class StepSchedule:
    """`(eta_t, eta_b_t)`, the steps of `f` and of the bias at each 0-based step `t`.

    'constant' is `(step_size, bias_step_size)` at every step. 'diminishing' is
    `eta_0 / (1 + eta_0 lambda t)`: Pegasos' `1 / (lambda (t + t0))` with
    `t0 = 1 / (eta_0 lambda)`, which starts at `step_size` and behaves as `1 / (lambda t)`
    (the paper's `theta / t` with `theta = 1` in its C-scaled form). The bias follows the same
    schedule.

    Parameters
    ----------
    schedule
        'constant' or 'diminishing'.
    step_size
        `eta_0`, in `(0, MAX_STEP]`, with `step_size * regularization < 1` (the shrink factor
        stays positive).
    bias_step_size
        The bias's first step, in `[0, MAX_STEP]`.
    regularization
        `lambda`, >= 0; > 0 for 'diminishing'.

    Examples
    --------

    >>> from river_advsvm.schedule import StepSchedule
    >>> steps = StepSchedule("diminishing", step_size=0.5, bias_step_size=0.05,
    ...                      regularization=0.1)
    >>> steps.sizes(0), steps.sizes(20)
    ((0.5, 0.05), (0.25, 0.025))

    A worker of a group of 4 steps at the group's count, 4 times as far:

    >>> steps.join_group(start=0, rate=4.0, n_learned=0)
    >>> steps.sizes(5)
    (1.0, 0.1)

    """

    def __init__(self, schedule: str, step_size: float, bias_step_size: float,
                 regularization: float):
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        for name, value, low in [("regularization", regularization, 0.0),
                                 ("step_size", step_size, None),
                                 ("bias_step_size", bias_step_size, 0.0)]:
            if not (inputs.is_number(value) and math.isfinite(value)
                    and (value > 0 if low is None else value >= low)):
                bound = "> 0" if low is None else ">= 0"
                raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
        for name, value in [("step_size", step_size), ("bias_step_size", bias_step_size)]:
            if value > MAX_STEP:
                raise ValueError(f"{name} must be at most {MAX_STEP:g}, got {value!r}")
        if not step_size * regularization < 1:
            raise ValueError(
                "step_size * regularization must be < 1, or the shrink factor "
                f"1 - step_size * regularization = {1 - step_size * regularization} flips f"
            )
        if schedule == "diminishing" and regularization == 0:
            raise ValueError("the diminishing schedule 1 / (regularization t) needs "
                             "regularization > 0")
        self.schedule = schedule
        self.step_size = step_size
        self.bias_step_size = bias_step_size
        self.regularization = regularization
        # (the step at which the group's clock started, samples of the group per step here)
        self.group_clock: tuple[int, float] = (0, 1.0)

    def sizes(self, t: int) -> tuple[float, float]:
        """`(eta_t, eta_b_t)` at 0-based step `t`."""
        start, rate = self.group_clock
        if rate == 1.0:
            return self._scheduled(t)
        eta, eta_bias = self._scheduled(start + rate * (t - start))
        eta = rate * eta
        if self.regularization > 0:  # the shrink factor 1 - eta lambda stays above 1/2
            eta = min(eta, 0.5 / self.regularization)
        return eta, rate * eta_bias

    def _scheduled(self, t: float) -> tuple[float, float]:
        if self.schedule == "constant":
            return self.step_size, self.bias_step_size
        decay = 1.0 / (1.0 + self.step_size * self.regularization * t)
        return self.step_size * decay, self.bias_step_size * decay

    def join_group(self, start: int, rate: float, n_learned: int) -> None:
        """From step `start` (at most `n_learned`, the steps taken) on, step as a worker of a
        group where `rate` samples reach the group for each one learned here: `rate` times the
        step the schedule gives at the group's count, `start + rate (t - start)`, capped at
        `0.5 / regularization`. `rate = 1` is learning alone."""
        if type(start) is not int or not 0 <= start <= n_learned:
            raise ValueError(f"the group clock starts at a sample learned, not {start!r}")
        if not (inputs.is_number(rate) and 1.0 <= rate <= MAX_GROUP_RATE):  # NaN fails too
            raise ValueError(f"rate must be a number in [1, {MAX_GROUP_RATE:g}], got {rate!r}")
        self.group_clock = (start, float(rate))
