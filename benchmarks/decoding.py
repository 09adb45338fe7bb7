"""How fast the service's message decoding is, against the candidates it was chosen from.

    python benchmarks/decoding.py [--quick] [--out FILE]

On the service's two message shapes (d = 16 objects, d = 784 arrays), microseconds per message for:
the standard library with the strict hooks (what the service used before, and still uses to name the
reason of a refusal), msgspec's typed decoder alone, orjson (if installed) plus the checks msgspec's
types do in C, and `river_advsvm.streams.kafka.decode` as the service calls it. Ratios are to the
standard library in the same run; BLAS is not involved (one thread anyway).

"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

import common

sys.path.insert(0, str(common.BENCHMARKS.parent))


def _messages(n: int, d: int) -> list[bytes]:
    from river_advsvm.streams import kafka as kafka_io

    rng = np.random.default_rng(0)
    X = rng.random((n, d)).round(5)
    if d >= 100:
        return [kafka_io.encode(x, i % 2, id=i) for i, x in enumerate(X.tolist())]
    return [kafka_io.encode({f"f{j}": v for j, v in enumerate(x)}, i % 2, id=i)
            for i, x in enumerate(X.tolist())]


def _checked(message: dict) -> dict:
    """What msgspec's types check in C, done in Python after a parser that checks nothing."""
    x = message["x"]
    for v in (x.values() if type(x) is dict else x):
        kind = type(v)
        if kind is float:
            if not math.isfinite(v):
                raise ValueError
        elif kind is not int and kind is not bool:
            raise ValueError
    return message


def _per_message_us(decoders: dict, values: list[bytes], rounds: int = 5) -> dict:
    """Each decoder's best time per message over `rounds`, the decoders taking turns in each
    round (a slower spell of a shared machine falls on all of them)."""
    best = dict.fromkeys(decoders, math.inf)
    for _ in range(rounds):
        for name, decode in decoders.items():
            started = time.perf_counter()
            for value in values:
                decode(value)
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: 1e6 * seconds / len(values) for name, seconds in best.items()}


def main(argv=None) -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args(argv)
    from river_advsvm.streams import kafka as kafka_io

    candidates = {
        "stdlib_strict": kafka_io._decode_strictly,
        "msgspec_typed": kafka_io._FAST.decode,
        "service_decode": lambda v: kafka_io.decode(v, 2**20),
    }
    try:
        import orjson

        candidates["orjson_checked"] = lambda v: _checked(orjson.loads(v))
    except ImportError:
        pass
    records = []
    for d in (16, 784):
        values = _messages(200 if args.quick else 5000, d)
        with common.one_blas_thread():
            times = _per_message_us(candidates, values)
        for name, us in times.items():
            records.append({"d": d, "form": "array" if d >= 100 else "object",
                            "decoder": name, "us_per_message": us,
                            "ratio_to_stdlib": times["stdlib_strict"] / us,
                            "message_bytes": round(sum(map(len, values)) / len(values)),
                            **common.machine()})
    print(common.format_table(records, [
        ("d", "d", "d"), ("decoder", "decoder", "s"), ("us_per_message", "us/msg", ".2f"),
        ("ratio_to_stdlib", "x stdlib", ".1f"), ("message_bytes", "bytes", "d")]))
    common.write_records(records, args.out, "decoding", args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
