"""decode_records (``RecordBatch.records()``) in two or more trees, paired.

    python benchmarks/decode_before_after.py --baseline /work/wt-before13 [--tree PATH ...]
        [--rounds 5] [--instructions]

Each tree is a kchannel checkout with its compiled twins built in place
(``python3 setup.py build_ext --inplace``).  This checkout is always one of
the trees (the last); ``--baseline`` is the tree the others are divided by
(issue 21's: ebe5f2b, records as plain tuples) and ``--tree`` adds more
(main, say).

Timed (default): ``records_clients.decode_ratio()`` of each tree, each in a
process of its own with that tree alone on its path (2000 records of 100 B,
records per CPU-second of the pure and the compiled twin), the trees
alternating for ``--rounds`` rounds so that a change of the machine's load
hits all of them alike.  Printed: every round's compiled rates and their
ratios to the baseline, then the medians (pure twin too).

``--instructions``: instructions per decoded record of the compiled twin,
counted by valgrind's callgrind (independent of the load): each tree's
decode runs twice under callgrind, 10 and 60 calls of a 2000-record batch,
and the difference is divided by the 100,000 extra records (start-up and
imports cancel out).  The decoded lists are dropped at once, as
decode_ratio drops them: what a record costs from its decoding to its
freeing, collector passes included.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_TIMED = (
    "import json, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "import kchannel, records_clients as r\n"
    "assert kchannel.implementation() == 'compiled', kchannel.implementation()\n"
    "print(json.dumps(r.decode_ratio()))\n"
)

_COUNTED = (
    "import sys\n"
    "import kchannel._crecords as c\n"
    "recs = [(1_700_000_000_000 + i, None, b'x' * 100, []) for i in range(2000)]\n"
    "raw = c.encode_records(recs, recs[0][0])\n"
    "c.decode_records(raw, len(recs), 0, recs[0][0], None)\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    c.decode_records(raw, len(recs), 0, recs[0][0], None)\n"
)


def _env(tree):
    # The tree alone: no other checkout's kchannel on the path.
    return dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0")


def timed(tree):
    import json
    out = subprocess.run([sys.executable, "-c", _TIMED, os.path.join(tree, "benchmarks")],
                         env=_env(tree), cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _total(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no total in {path}")


def instructions(tree, small=10, big=60):
    totals = []
    with tempfile.TemporaryDirectory() as d:
        for n in (small, big):
            out = os.path.join(d, f"cg.{n}")
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, "-c", _COUNTED, str(n)], env=_env(tree), cwd=tree,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            totals.append(_total(out))
    return (totals[1] - totals[0]) / ((big - small) * 2000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="tree the others are divided by")
    ap.add_argument("--tree", action="append", default=[], help="another tree to measure")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--instructions", action="store_true")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in [args.baseline] + args.tree + [ROOT]]
    names = [os.path.basename(t) for t in trees]
    if args.instructions:
        base = None
        for name, tree in zip(names, trees):
            per = instructions(tree)
            base = base or per
            print(f"{name:<16} {per:8,.0f} instructions per record ({per / base:.2f} x baseline)")
        return
    rates = {t: [] for t in trees}
    for r in range(args.rounds):
        row = []
        for t in trees:
            rates[t].append(timed(t))
        b = rates[trees[0]][-1]["compiled"]
        for name, t in zip(names, trees):
            c = rates[t][-1]["compiled"]
            row.append(f"{name} {c / 1e6:5.2f} M/s ({c / b:.2f})")
        print(f"round {r + 1}: " + "  ".join(row), flush=True)
    b = statistics.median(x["compiled"] for x in rates[trees[0]])
    print("medians (records per CPU-second, 2000 x 100 B):")
    for name, t in zip(names, trees):
        c = statistics.median(x["compiled"] for x in rates[t])
        p = statistics.median(x["pure"] for x in rates[t])
        print(f"  {name:<16} compiled {c / 1e6:5.2f} M/s ({c / b:.2f} x baseline)   "
              f"pure {p / 1e6:5.2f} M/s")


if __name__ == "__main__":
    main()
