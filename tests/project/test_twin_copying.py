"""How much of each pure twin is copied verbatim into its compiled twin.

A twin built from one source (Cython's pure-Python mode: the pure twin's
``.py`` compiled with an augmenting ``_c<name>.pxd``) copies nothing; a
hand-written ``kchannel_ext/_c<name>.pyx`` repeats some of its pure twin's
lines, which then must be changed in two places.  The measure is the README's
("Which implementation is active", "How the twins are paired"): the share of
the pure twin's non-blank lines (stripped of indentation) that occur verbatim
among the ``.pyx``'s lines.

``python3 tests/project/test_twin_copying.py`` prints the table; the test
fails when the share of all hand-written twins together grows above the
figure the README states (a ratchet: lower it there when copying goes down).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from kchannel import _impl  # noqa: E402

# The measure reads the source checkout (the .pyx files are not installed):
# the binary-wheel check (.ci/wheels) runs the tests from a copy without it.
if __name__ != "__main__" and not (ROOT / "kchannel_ext").is_dir():
    pytest.skip("needs the source tree (kchannel_ext/*.pyx), which an installed wheel's "
                "test copy does not have", allow_module_level=True)

# The README sentence the test reads its ratchet from.
README_SHARE = re.compile(r"Share of\s+the pure twins' non-blank lines found verbatim in a\s+"
                          r"`\.pyx`: (\d+)% \(([\d,]+) of\s+([\d,]+) lines")


def _stripped_lines(path):
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def twin_copying():
    """[(twin, how it is built, copied lines, pure twin's lines)], one row per
    registered twin; how: ``"pyx"`` (hand-written) or ``"pure mode"``."""
    rows = []
    for name, (pure, compiled) in sorted(_impl.TWINS.items()):
        source = ROOT / (pure.replace(".", "/") + ".py")
        stem = compiled.rsplit(".", 1)[1]
        pyx = ROOT / "kchannel_ext" / f"{stem}.pyx"
        lines = _stripped_lines(source)
        if pyx.exists():
            theirs = set(_stripped_lines(pyx))
            rows.append((name, "pyx", sum(1 for line in lines if line in theirs), len(lines)))
        else:
            assert source.with_name(f"{stem}.pxd").exists(), (
                f"twin {name}: neither kchannel_ext/{stem}.pyx nor {stem}.pxd beside {source}")
            rows.append((name, "pure mode", 0, len(lines)))
    return rows


def _total(rows):
    copied = sum(r[2] for r in rows if r[1] == "pyx")
    lines = sum(r[3] for r in rows if r[1] == "pyx")
    return copied, lines


def test_copying_does_not_grow_above_the_readme_figure():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = README_SHARE.search(readme)
    assert m, "README: the sentence stating the twins' verbatim share is gone or reworded"
    stated_share = int(m.group(1))
    copied, lines = _total(twin_copying())
    share = 100.0 * copied / lines
    # One point of slack: a twin's lines move by a few with any edit.
    assert share <= stated_share + 1, (
        f"{copied} of {lines} lines ({share:.0f}%) of the hand-written twins' pure sources "
        f"are copied verbatim into their .pyx, above the README's {stated_share}%: share the "
        "code (pure mode, a .pxd) instead of copying it, or state the new figure")


def test_every_twin_is_measured():
    # A new twin is paired one of the two ways, so the measure covers it.
    names = {r[0] for r in twin_copying()}
    assert names == set(_impl.TWINS)


if __name__ == "__main__":
    rows = twin_copying()
    for name, how, copied, lines in rows:
        print(f"{name:12} {how:10} {copied:5} of {lines:5} lines copied ({100 * copied / lines:.0f}%)")
    copied, lines = _total(rows)
    print(f"hand-written .pyx twins: {copied} of {lines} lines ({100 * copied / lines:.0f}%)")
