"""The `advsvm` command: argument parsing only; the work is done by the library."""

from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from river_advsvm import demo

    rows = demo.run_demo(pair=tuple(args.pair), epsilon=args.epsilon, seed=args.seed)
    print()
    print(demo.format_table(rows))
    return 0


def _add_demo(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="natural vs adversarial AdvKernelSVM on a stream of scikit-learn's digits",
        description="Stream scikit-learn's bundled digits through a natural and an "
        "adversarially trained AdvKernelSVM (test, then train) and print a results table.",
    )
    parser.add_argument("--pair", nargs=2, type=int, default=[1, 7], metavar=("A", "B"),
                        help="the two digits to separate (default: 1 7)")
    parser.add_argument("--epsilon", type=float, default=0.3,
                        help="L2 attack radius the adversarial model trains against")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffle and the models")
    parser.set_defaults(run=_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advsvm", description="Adversarially robust kernel SVMs for streams."
    )
    subparsers = parser.add_subparsers(required=True, metavar="COMMAND")
    _add_demo(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
