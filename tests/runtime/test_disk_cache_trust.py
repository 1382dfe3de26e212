"""The disk cache's trust model (``bnlab._runtime.disk_cache``): its directory is made
private (0700), one that group or others can write is refused for reading and writing
(a planted entry with a recomputed checksum would be served otherwise), and
``bnlab cache verify|clear`` check and empty it."""
import stat

import numpy as np
import pytest

from bnlab._runtime import disk_cache
from bnlab.cli import main

KEY = "ab" * 32


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "home" / "bnlab"
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(root))
    return root


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_cache_directory_is_private(cache):
    assert disk_cache.store("ais", KEY, {"log_z": np.array([1.5])})
    assert _mode(cache) == 0o700 and _mode(cache / "ais") == 0o700


@pytest.mark.parametrize("where", ["root", "kind"])
def test_a_directory_others_can_write_is_neither_read_nor_written(cache, where):
    assert disk_cache.store("ais", KEY, {"log_z": np.array([1.5])})
    (cache if where == "root" else cache / "ais").chmod(0o777)
    with pytest.warns(disk_cache.CacheWarning, match="can be written by its group or others"):
        assert disk_cache.load("ais", KEY) is None
    with pytest.warns(disk_cache.CacheWarning, match="chmod 700"):
        assert not disk_cache.store("ais", "cd" * 32, {"log_z": np.array([2.0])})
    assert not (cache / "ais" / f"{'cd' * 32}.npz").exists()


def test_cache_verify_names_a_damaged_entry_and_clear_removes_all(cache, capsys):
    assert disk_cache.store("ais", KEY, {"log_z": np.array([1.5])})
    assert disk_cache.store("ais", "cd" * 32, {"log_z": np.array([2.5])})
    damaged = cache / "ais" / f"{'cd' * 32}.npz"
    raw = bytearray(damaged.read_bytes())
    raw[-30] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    assert main(["cache", "verify"]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {damaged}" in out and "1 entries verified, 1 damaged" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 2 cache entries" in capsys.readouterr().out
    assert list((cache / "ais").iterdir()) == []
    assert main(["cache", "verify"]) == 0
    assert "0 entries verified, 0 damaged" in capsys.readouterr().out


def test_cache_verify_refuses_a_directory_others_can_write(cache, capsys):
    assert disk_cache.store("ais", KEY, {"log_z": np.array([1.5])})
    cache.chmod(0o775)
    assert main(["cache", "verify"]) == 2
    assert "the bnlab cache is not trusted" in capsys.readouterr().err
