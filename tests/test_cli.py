"""The bnlab command line: a surface written to netCDF, and clear errors: the output
path checked before any work, the input never overwritten, the output written
atomically, every numeric option validated by argparse naming the option."""
import os
import stat

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bnlab
from bnlab.cli import build_parser, main


@pytest.fixture
def csv(tmp_path):
    ds = bnlab.datasets.load("classification_1d", n=24)
    path = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(path, index=False)
    return path, ds


def test_surface_command_writes_the_same_values_as_the_library(csv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path / "cache"))
    path, ds = csv
    out = tmp_path / "s.nc"
    rc = main(["surface", "--data", str(path), "--likelihood", "probit", "--methods", "laplace,vi",
               "--mcmc", "--temps", "20", "--chains", "2", "--grid", "lengthscale=-1:1:2",
               "--grid", "variance=0:1:2", "--out", str(out)])
    assert rc == 0
    surf = xr.load_dataset(out)
    assert list(surf["scheme"].values) == ["laplace", "vi", "mcmc"]
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    lib = bnlab.surface(model, ds.X, ds.y, methods=["laplace", "vi"],
                        grid={"lengthscale": np.exp([-1.0, 1.0]), "variance": np.exp([0.0, 1.0])})
    np.testing.assert_allclose(surf.log_marginal.values[:2], lib.log_marginal.values, rtol=1e-12)
    assert np.isfinite(surf.log_marginal_se.values[2]).all()
    assert "wrote" in capsys.readouterr().out
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "data.csv", "s.nc"]


def _exit_code(argv):
    """main's return value, or the exit code of an argparse error."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("args, message", [
    (["--grid", "lengthscale"], "bad --grid"),
    (["--grid", "lengthscale=-1:1:3", "--grid", "colour=0:1:2"], "unknown grid parameter"),
    (["--methods", "newton"], "unknown method"),
])
def test_surface_command_reports_bad_input(csv, tmp_path, capsys, args, message):
    path, _ = csv
    rc = _exit_code(["surface", "--data", str(path), "--likelihood", "probit",
                     "--out", str(tmp_path / "x.nc")] + args)
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def no_work(monkeypatch):
    """Any computation (reading the data, a surface, a paper's table) fails the test."""
    def refuse(*args, **kwargs):
        pytest.fail("the command started work before refusing its arguments")
    monkeypatch.setattr(bnlab.datasets, "from_csv", refuse)
    monkeypatch.setattr(bnlab, "surface", refuse)
    monkeypatch.setattr("bnlab.papers.li2023.li2023", refuse)


def _surface_argv(data, out, *extra):
    return ["surface", "--data", str(data), "--likelihood", "probit", "--out", str(out), *extra]


def test_a_missing_output_directory_is_refused_before_any_work(csv, tmp_path, capsys, no_work):
    path, _ = csv
    out = tmp_path / "no" / "such" / "dir" / "s.nc"
    assert _exit_code(_surface_argv(path, out)) == 2
    err = capsys.readouterr().err
    assert str(out) in err and "does not exist" in err


def test_a_directory_as_output_is_refused_before_any_work(csv, tmp_path, capsys, no_work):
    path, _ = csv
    assert _exit_code(_surface_argv(path, tmp_path)) == 2
    assert f"--out {tmp_path} is a directory" in capsys.readouterr().err


def test_an_output_directory_that_takes_no_file_is_refused_before_any_work(csv, tmp_path, capsys,
                                                                          no_work, monkeypatch):
    def read_only(*args, **kwargs):            # tests run as root, which chmod does not stop
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr("tempfile.mkstemp", read_only)
    path, _ = csv
    out = tmp_path / "s.nc"
    assert _exit_code(_surface_argv(path, out)) == 2
    assert f"--out {out}: cannot create a file in {tmp_path} (Permission denied)" in \
        capsys.readouterr().err


def _alias(path, tmp_path, spelling):
    """Another name for the file ``path``."""
    if spelling == "same path":
        return path
    if spelling == "dotted path":
        (tmp_path / "sub").mkdir()
        return tmp_path / "." / "sub" / ".." / path.name
    alias = tmp_path / "alias.csv"
    (alias.symlink_to if spelling == "symlink" else alias.hardlink_to)(path)
    return alias


@pytest.mark.parametrize("spelling", ["same path", "dotted path", "symlink", "hard link"])
def test_the_input_is_never_the_output(csv, tmp_path, capsys, no_work, spelling):
    path, _ = csv
    before = path.read_bytes()
    assert _exit_code(_surface_argv(path, _alias(path, tmp_path, spelling))) == 2
    assert "is the input --data file" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_a_failed_write_leaves_the_previous_output_and_no_partial_file(csv, tmp_path,
                                                                       monkeypatch):
    path, _ = csv
    out = tmp_path / "s.nc"
    out.write_bytes(b"the previous surface")

    def fail_midway(self, target, *args, **kwargs):
        with open(target, "wb") as fh:
            fh.write(b"CDF\x01 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", fail_midway)
    with pytest.raises(OSError, match="No space left"):
        main(_surface_argv(path, out, "--methods", "laplace", "--grid", "lengthscale=0:1:2",
                           "--grid", "variance=0:1:2"))
    assert out.read_bytes() == b"the previous surface"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "s.nc"]


@pytest.mark.parametrize("argv, option", [
    (["--test-fraction", "-0.5"], "--test-fraction"),
    (["--test-fraction", "1"], "--test-fraction"),
    (["--test-fraction", "nan"], "--test-fraction"),
    (["--damping", "0"], "--damping"),
    (["--damping", "1.5"], "--damping"),
    (["--damping", "inf"], "--damping"),
    (["--max-iters", "0"], "--max-iters"),
    (["--max-iters", "2.5"], "--max-iters"),
    (["--temps", "0"], "--temps"),
    (["--chains", "1"], "--chains"),
    (["--seed", "-1"], "--seed"),
    (["--grid", "lengthscale=-1:1:0"], "--grid"),
    (["--grid", "lengthscale=-1:inf:3"], "--grid"),
    (["--grid", "lengthscale=-1:1000:3"], "--grid"),
    (["--grid", "lengthscale=-1:1:3", "--grid", "lengthscale=0:1:3"], "--grid"),
])
def test_surface_numeric_options_are_validated(csv, tmp_path, capsys, no_work, argv, option):
    path, _ = csv
    assert _exit_code(_surface_argv(path, tmp_path / "s.nc", *argv)) == 2
    assert f"argument {option}:" in capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["--folds", "1"], "--folds"), (["--seeds", "0"], "--seeds"), (["--workers", "0"], "--workers"),
])
def test_reproduce_numeric_options_are_validated(capsys, no_work, argv, option):
    assert _exit_code(["reproduce", "li2023", *argv]) == 2
    assert f"argument {option}:" in capsys.readouterr().err


def test_valid_numeric_options_are_kept():
    args = build_parser().parse_args(_surface_argv(
        "d.csv", "s.nc", "--test-fraction", "0.25", "--damping", "1", "--chains", "2", "--seed",
        "0", "--grid", "lengthscale=-1:1:3"))
    assert (args.test_fraction, args.damping, args.chains, args.seed) == (0.25, 1.0, 2, 0)
    np.testing.assert_allclose(args.grid["lengthscale"], np.exp([-1.0, 0.0, 1.0]))
