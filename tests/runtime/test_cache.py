"""The disk cache heals: a damaged, altered or foreign entry is a miss (recomputed,
replaced, with a warning naming the file), entries of another sampler version are never
served, and a cache directory that cannot be written costs the cache, never the result.
The reference for every case is the same AIS run without the cache."""
import re
import shutil
import warnings

import numpy as np
import pytest

import bnlab
from bnlab.studies import mcmc
from bnlab._runtime import disk_cache as cache

SETTINGS = dict(num_temps=20, num_chains=4)


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def problem():
    ds = bnlab.datasets.load("classification_1d", n=12)
    model = bnlab.GP(bnlab.kernels.Matern32(), bnlab.likelihoods.Bernoulli("logit"))
    return model, ds.X, ds.y


@pytest.fixture(scope="module")
def uncached(problem):
    return mcmc.ais(*problem, **SETTINGS, use_cache=False)


def _run(problem, **kw):
    return mcmc.ais(*problem, **{**SETTINGS, **kw})


def _entries(root):
    return sorted((root / "ais").glob("*.npz"))


def _resave(path, change):
    """Rewrite an entry by hand with ``change`` applied to its fields (a checksum field,
    if any, kept as it was)."""
    with np.load(path) as data:
        fields = {k: data[k] for k in data.files}
    change(fields)
    with open(path, "wb") as fh:
        np.savez(fh, **fields)


def _restore(path, change):
    """Rewrite an entry through ``cache.store`` (a valid checksum) with ``change``
    applied: a layout the sampler never produces."""
    fields = cache.load("ais", path.stem)
    change(fields)
    cache.store("ais", path.stem, fields)


def _shift_log_z(f):
    f["log_z"] = f["log_z"] + 100.0


def _drop_column(f):
    f["samples"] = f["samples"][:, :-1]


def _as_int(f):
    f["log_weights"] = np.round(f["log_weights"]).astype(np.int64)


DAMAGE = {
    "truncated": lambda path, problem: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "empty": lambda path, problem: path.write_bytes(b""),
    "not a zip": lambda path, problem: path.write_bytes(b"log_z=1.0\n"),
    "missing field": lambda path, problem: _resave(path, lambda f: f.pop("log_z_se")),
    "log_z altered by +100": lambda path, problem: _resave(path, _shift_log_z),
    "samples altered": lambda path, problem: _resave(path, _drop_column),
    "missing field, valid checksum": lambda path, problem: _restore(path, lambda f: f.pop("lpd")),
    "wrong shape, valid checksum": lambda path, problem: _restore(path, _drop_column),
    "wrong dtype, valid checksum": lambda path, problem: _restore(path, _as_int),
    "another key's entry": lambda path, problem: _copy_other_entry(path, problem),
}


def _copy_other_entry(path, problem):
    """Put the entry of another seed in this key's file."""
    _run(problem, seed=3)
    [other] = [p for p in _entries(path.parents[1]) if p != path]
    shutil.copyfile(other, path)


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_entry_is_recomputed_and_replaced_with_a_warning(problem, uncached, cache_root,
                                                                   damage):
    first = _run(problem)
    [path] = _entries(cache_root)
    DAMAGE[damage](path, problem)
    with pytest.warns(UserWarning, match=re.escape(str(path))):
        healed = _run(problem)
    assert healed.log_z == uncached.log_z and healed.log_z_se == uncached.log_z_se
    np.testing.assert_array_equal(healed.samples, uncached.samples)
    np.testing.assert_array_equal(healed.log_weights, uncached.log_weights)
    assert first.log_z == uncached.log_z
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the entry was replaced: a clean hit now
        again = _run(problem)
    assert again.log_z == uncached.log_z
    np.testing.assert_array_equal(again.samples, uncached.samples)


def test_entries_of_another_sampler_version_are_not_served(problem, cache_root, monkeypatch):
    _run(problem)
    [old] = _entries(cache_root)
    _resave(old, _shift_log_z)                  # served, it would show as log_z + 100
    monkeypatch.setattr(mcmc, "AIS_VERSION", getattr(mcmc, "AIS_VERSION", 1) + 1, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # not even read: another key
        new = _run(problem)
    assert len(_entries(cache_root)) == 2
    assert abs(new.log_z - mcmc.ais(*problem, **SETTINGS, use_cache=False).log_z) < 1e-12


def test_an_unwritable_cache_directory_costs_the_cache_not_the_result(problem, uncached, tmp_path,
                                                                       monkeypatch):
    blocker = tmp_path / "a_file"               # tests run as root, where chmod stops no
    blocker.write_text("")                      # write: a directory under a file cannot exist
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(UserWarning, match=f"cannot write to {re.escape(str(blocker))}.*running "
                                         f"without the disk cache"):
        res = _run(problem)
    assert res.log_z == uncached.log_z
    np.testing.assert_array_equal(res.samples, uncached.samples)


def test_an_unwritable_cache_directory_keeps_a_whole_surface(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(blocker / "cache"))
    ds = bnlab.datasets.load("classification_1d", n=12)
    model = bnlab.GP(bnlab.kernels.Matern32(), bnlab.likelihoods.Bernoulli("logit"))
    grid = {"lengthscale": np.array([0.5, 2.0]), "variance": np.array([1.0, 3.0])}
    with pytest.warns(UserWarning, match="running without the disk cache"):
        surf = bnlab.surface(model, ds.X, ds.y, methods=["mcmc"], grid=grid,
                             mcmc_options=SETTINGS)
    assert np.isfinite(surf.log_marginal.values).all()


def test_store_refuses_fields_it_cannot_checksum():
    with pytest.raises(TypeError, match="'names'"):
        cache.store("ais", "k", {"names": np.array(["a", "b"], dtype=object)})
