"""Server processes that open the same new SQLite store at the same moment
(``kchannel serve`` workers starting together) all get a working store.

Switching a new file to WAL does not go through SQLite's busy handler, so
without a retry one of several processes racing on a fresh file fails at once
with "database is locked" (seen as a worker of ``kchannel serve`` failing to
start).  Each round forks processes that wait at a barrier, then open one
fresh file."""
import multiprocessing
import os

import pytest

from kchannel.security.authorizer.store import SqliteAclStore
from kchannel.security.sasl.scram_store import SqliteScramCredentialStore
from kchannel.tokens.store import SqliteTokenStore

PROCESSES = 6
ROUNDS = 12


def _open_in_process(cls, path, barrier, results):
    barrier.wait()
    try:
        store = cls(path)
        store.close()
        results.put("ok")
    except Exception as exc:  # reported to the parent, which asserts
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("cls", [SqliteTokenStore, SqliteAclStore, SqliteScramCredentialStore])
def test_processes_opening_one_new_store_together_all_succeed(cls, tmp_path):
    ctx = multiprocessing.get_context("fork")
    failures = []
    for n in range(ROUNDS):
        path = os.path.join(tmp_path, f"round{n}", "store.db")
        barrier = ctx.Barrier(PROCESSES)
        results = ctx.Queue()
        procs = [ctx.Process(target=_open_in_process, args=(cls, path, barrier, results))
                 for _ in range(PROCESSES)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        failures += [o for o in outcomes if o != "ok"]
    assert failures == []
