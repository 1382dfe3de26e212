"""The walk over a surface's grid (``bnlab.studies.surfaces.blocks``) and its thread pool."""
import threading
import time

import numpy as np
import pytest

from bnlab.studies.surfaces.blocks import (CANCEL_GRACE_S, ThreadPool, for_runs, padded,
                                         plan_blocks, run_blocks)


@pytest.mark.parametrize("shape,chunk", [((4, 5), 5), ((4, 5), 2), ((3, 1), 2), ((1, 6), 4)])
def test_warm_plan_covers_the_grid_once_as_a_comb(shape, chunk):
    blocks = plan_blocks(shape, chunk, warm_start=True)
    points = np.concatenate([b.points for b in blocks])
    assert sorted(points.tolist()) == list(range(shape[0] * shape[1]))
    assert all(len(b.points) <= chunk for b in blocks)
    finished = set()
    for i, b in enumerate(blocks):
        assert b.after < i                                  # parents come first
        if b.after >= 0:
            assert b.source in blocks[b.after].points       # start from a finished point
        finished.update(b.points.tolist())
        row, col = np.divmod(b.points, shape[1])
        if b.source < 0:
            assert i == 0 and b.points[0] == 0              # only the very first is cold
        elif col[0] == 0:                                   # the first column: a chain
            assert np.all(col == 0) and b.source == b.points[0] - shape[1]
        else:                                               # a row continues its row
            assert len(set(row)) == 1 and b.source == b.points[0] - 1


def test_cold_plan_has_independent_blocks():
    blocks = plan_blocks((3, 4), 5, warm_start=False)
    assert [b.points.tolist() for b in blocks] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert all(b.source == -1 and b.after == -1 for b in blocks)


def test_several_runs_share_one_plan_and_wait_only_for_their_own_blocks():
    plan = plan_blocks((3, 4), 4, warm_start=True)
    blocks = for_runs(plan, 3)
    assert len(blocks) == 3 * len(plan)
    for i, b in enumerate(blocks):
        base = plan[i % len(plan)]
        assert b.run == i // len(plan)
        np.testing.assert_array_equal(b.points, base.points)
        assert b.source == base.source
        assert (b.after < 0) == (base.after < 0)
        if b.after >= 0:
            assert blocks[b.after].run == b.run and b.after % len(plan) == base.after


def test_padding_repeats_the_last_point():
    np.testing.assert_array_equal(padded(np.array([4, 7]), 4), [4, 7, 7, 7])


def test_pool_respects_dependencies_runs_rows_together_and_cancels():
    blocks = plan_blocks((4, 3), 3, warm_start=True)       # column, then 4 row blocks
    index = {id(b): i for i, b in enumerate(blocks)}
    done, active, most = set(), [0], [0]
    lock = threading.Lock()

    def solve(blocks):
        (block,) = blocks
        with lock:
            assert block.after < 0 or block.after in done_blocks
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return {"points": block.points}

    done_blocks = set()

    def store(blocks, out):
        (block,) = blocks
        done_blocks.add(index[id(block)])
        done.update(out["points"].tolist())

    def task(group):
        return solve, (group,)

    assert not run_blocks(blocks, task, store, pool=ThreadPool(3), cancelled=lambda: False)
    assert done == set(range(12)) and most[0] >= 2          # rows overlapped in time
    done.clear(), done_blocks.clear()
    assert run_blocks(blocks, task, store, pool=ThreadPool(2), cancelled=lambda: len(done) >= 4)
    assert 4 <= len(done) < 12


def test_blocks_already_done_release_their_dependants_and_batches_group_one_run():
    blocks = for_runs(plan_blocks((3, 4), 4, warm_start=True), 2)   # 2 runs × (column + 3 rows)
    groups = []

    def task(group):
        return (lambda: [b.run for b in group]), ()

    def store(group, runs):
        groups.append(runs)

    run_blocks(blocks, task, store, pool=ThreadPool(1), batch=3, done={0},
               cancelled=lambda: False)
    solved = sorted(len(g) for g in groups)
    assert all(len(set(g)) == 1 for g in groups)              # one run per batch
    assert sum(solved) == 7                                   # 8 blocks, run 0's column read
    assert [0, 0, 0] in groups                                # its rows at once, in one batch


def test_a_cancel_returns_though_a_running_block_never_does():
    """A block stuck in its computation (here: waiting on an event nobody sets until the
    end) must not hold the caller after a cancel: the block that finishes within the
    grace period is kept, the stuck one abandoned, and the call returns soon after."""
    blocks = plan_blocks((1, 2), 1, warm_start=False)           # two independent blocks
    release = threading.Event()
    stored, cancel = [], threading.Event()

    def solve(block):
        if block.points[0] == 0:
            release.wait(60)                                  # stuck
        else:
            cancel.set()                                      # the user cancels now …
            time.sleep(0.3)                                   # … and this one still ends
        return block.points

    def store(group, points):
        stored.extend(points.tolist())

    pool = ThreadPool(2)
    start = time.monotonic()
    try:
        assert run_blocks(blocks, lambda g: (solve, (g[0],)), store, pool=pool,
                          cancelled=cancel.is_set)
        waited = time.monotonic() - start
        pool.close()                                          # does not join the stuck thread
        assert stored == [1]
        assert CANCEL_GRACE_S < waited < CANCEL_GRACE_S + 5
    finally:
        release.set()
