"""Print framing throughput of each twin and the compiled/pure ratio.

    python benchmarks/framing_ratio.py [--seconds 1.0]

Throughput is payload frames per CPU second (time.process_time), best of
several rounds, so other load on the machine disturbs it little.  Decode
feeds 64 KiB reads and drains them with ``frames()``; ``next_frame()`` is
shown too.  The headline figure is the 100-byte decode ratio.
"""
import argparse
import importlib
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SIZES = [("100 B", 100), ("1 KiB", 1024), ("16 KiB", 16384), ("1 MiB", 1 << 20)]
READ = 65536
STREAM_BYTES = 8 << 20


def _best_rate(fn, frames_per_call, seconds):
    """Frames per CPU second: best round over about ``seconds`` of CPU."""
    fn()  # warm up
    best = 0.0
    spent = 0.0
    rounds = 0
    while spent < seconds or rounds < 3:
        t0 = time.process_time()
        fn()
        dt = time.process_time() - t0
        spent += dt
        rounds += 1
        if dt > 0:
            best = max(best, frames_per_call / dt)
    return best


def measure(fr, size, seconds):
    n = max(8, STREAM_BYTES // size)
    payloads = [b"\xab" * size] * n
    stream = fr.encode_frames(payloads)
    chunks = [stream[i:i + READ] for i in range(0, len(stream), READ)]

    def decode_frames():
        d = fr.FrameDecoder()
        got = 0
        for c in chunks:
            d.feed(c)
            got += len(d.frames())
        assert got == n

    def decode_next():
        d = fr.FrameDecoder()
        nxt = d.next_frame
        got = 0
        for c in chunks:
            d.feed(c)
            while nxt() is not None:
                got += 1
        assert got == n

    def encode_each():
        enc = fr.encode_frame
        for p in payloads:
            enc(p)

    def encode_batch():
        fr.encode_frames(payloads)

    return {
        "decode frames()": _best_rate(decode_frames, n, seconds),
        "decode next_frame()": _best_rate(decode_next, n, seconds),
        "encode_frame()": _best_rate(encode_each, n, seconds),
        "encode_frames()": _best_rate(encode_batch, n, seconds),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="CPU seconds per measurement (default 0.5)")
    args = parser.parse_args(argv)

    from kchannel import _impl

    pure_name, compiled_name = _impl.TWINS["framing"]
    twins = {"pure": importlib.import_module(pure_name)}
    try:
        twins["compiled"] = importlib.import_module(compiled_name)
    except ImportError as exc:
        print(f"compiled twin not available ({exc}); run "
              "'python setup.py build_ext --inplace' first", file=sys.stderr)

    results = {}
    rates = {}
    print(f"{'size':>7}  {'operation':<20}" + "".join(f"{k:>18}" for k in twins)
          + ("     ratio" if len(twins) == 2 else ""))
    for label, size in SIZES:
        per_twin = {kind: measure(mod, size, args.seconds) for kind, mod in twins.items()}
        for op in per_twin["pure"]:
            row = f"{label:>7}  {op:<20}"
            for kind in twins:
                row += f"{per_twin[kind][op]:>12,.0f} fr/s"
            if len(twins) == 2:
                ratio = per_twin["compiled"][op] / per_twin["pure"][op]
                row += f"   {ratio:6.2f}x"
                results[(size, op)] = ratio
                rates[(size, op)] = {k: per_twin[k][op] for k in twins}
            print(row, flush=True)
    if results:
        print(f"\ncompiled/pure ratio, 100 B decode (frames()): "
              f"{results[(100, 'decode frames()')]:.2f}x")
        print(f"compiled/pure ratio, 100 B decode (next_frame()): "
              f"{results[(100, 'decode next_frame()')]:.2f}x")
        from _results import row
        ratio = results[(100, 'decode frames()')]
        row("100 B frame decode (`frames()`), compiled vs pure twin (`framing_ratio.py`)",
            f"{ratio:.1f}x ({rates[(100, 'decode frames()')]['compiled'] / 1e6:.1f} M vs "
            f"{rates[(100, 'decode frames()')]['pure'] / 1e6:.1f} M frames/CPU-s)",
            ">= 4x", ratio >= 4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
