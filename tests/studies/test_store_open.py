"""Opening a surface's Zarr store (``bnlab.studies.surfaces.store``): threads opening one new
store at once all get it (created once), and a path that cannot hold a store is a
ValueError naming it."""
import threading

import numpy as np
import pytest

from bnlab.studies.surfaces.store import BlockStore, fingerprint

LAYOUT = {"ep": (3, {"energy": ((2,), "float64")})}


def test_threads_opening_one_new_store_at_once_share_it(tmp_path):
    path = tmp_path / "s.zarr"
    prints = fingerprint(data=[np.arange(3.0)])
    start = threading.Barrier(6)
    errors, stores = [], []

    def open_it():
        start.wait()
        try:
            stores.append(BlockStore(path, prints, LAYOUT))
        except Exception as exc:  # noqa: BLE001 — any failure fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 6
    stores[0].save("ep", 1, {"energy": np.array([1.5, -2.0])})
    assert stores[-1].load()["ep"].keys() == {1}
    np.testing.assert_array_equal(stores[-1].load()["ep"][1]["energy"], [1.5, -2.0])


@pytest.mark.parametrize("where", ["missing directory", "under a file"])
def test_a_path_that_cannot_hold_a_store_is_named(tmp_path, where):
    if where == "missing directory":
        path = tmp_path / "no" / "such" / "s.zarr"
    else:
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "s.zarr"
    with pytest.raises(ValueError, match=f"store '{path}' cannot be opened or created"):
        BlockStore(path, fingerprint(data=[np.arange(3.0)]), LAYOUT)
