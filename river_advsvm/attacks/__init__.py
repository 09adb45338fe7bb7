"""Attacks on binary classifiers: white box through the margin API, black box through scores.

Every attack drives the margin of the true label below zero inside a threat set, the ball
`||x' - x|| <= epsilon` (L2 or L-inf) intersected with the box `bounds` (default `[0, 1]`):

| attack            | norm        | needs                             | returns                   |
|-------------------|-------------|-----------------------------------|---------------------------|
| `FGSM`            | L-inf or L2 | gradients (analytic or estimated) | one step of size epsilon  |
| `PGD`             | L-inf or L2 | gradients (analytic or estimated) | best of K projected steps |
| `CarliniWagnerL2` | L2          | gradients (analytic or estimated) | smallest flip found       |
| `ZOO`             | L2          | probabilities only                | smallest flip found       |

Models with this package's margin API (`AdvKernelSVM`, `AdvLinearSVM`) are attacked through
`decision_many` / `decision_gradient_many`; any other River binary classifier through
`predict_proba_*`, with gradients estimated by central finite differences (see
`base.Oracle`). `perturb_one(model, x, y)` attacks a dict and gives a dict, `perturb_many(model,
X, y)` a batch (vectorised; a DataFrame gives a DataFrame, an array an array), `run` also says
which samples were fooled and which got no usable gradient.

"""

from __future__ import annotations

from river_advsvm.attacks.base import Attack, AttackResult, NoGradientWarning, Oracle
from river_advsvm.attacks.cw import CarliniWagnerL2
from river_advsvm.attacks.fgsm import FGSM
from river_advsvm.attacks.pgd import PGD
from river_advsvm.attacks.zoo import ZOO

__all__ = [
    "FGSM",
    "PGD",
    "ZOO",
    "Attack",
    "AttackResult",
    "CarliniWagnerL2",
    "NoGradientWarning",
    "Oracle",
]
