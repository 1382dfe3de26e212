"""The sidebar's hygiene without a browser: every pair of choices driven through the
widgets leaves the controls consistent, never raises, and shows only what applies."""
import itertools

import pytest

from bnlab.engine.loop import get_engine
from bnlab.infer import validate_settings
from bnlab.ui.controls import SECTIONS, Controls, Status
from bnlab.ui.problem import SettingError, build_problem
from bnlab.ui.runner import make_runner
from bnlab.ui.settings import LabSettings

PAIRS = (("model", "kernel"), ("likelihood", "method"), ("method", "covariance"))
DEFAULTS = {name: LabSettings.param[name].default
            for name in ("model", "kernel", "likelihood", "method", "covariance", "dataset")}


def _choices(name):
    return list(LabSettings.param[name].objects)


def _drive(controls, first, second):
    """Choose two (control, value) pairs in order through the widgets, as a user does."""
    for name, value in (first, second):
        widget = controls.widgets[name]
        if value in widget.disabled_options:
            assert controls.hints[name].visible, f"{name}={value} disabled without a reason"
            continue
        widget.value = value
        assert getattr(controls.settings, name) == value


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "-".join(p))
def test_every_pair_of_choices_in_either_order_never_raises(pair):
    """Model = Markov GP then Kernel = RBF used to raise Panel's "Cannot set
    disabled_options of Select to a list that includes the current value 'markov'"."""
    settings, status = LabSettings(), Status()
    controls = Controls(settings, status)
    a, b = pair
    for va, vb in itertools.product(_choices(a), _choices(b)):
        for order in (((a, va), (b, vb)), ((b, vb), (a, va))):
            settings.param.update(**DEFAULTS)
            _drive(controls, *order)
            for name in (a, b):
                current = getattr(settings, name)
                assert current not in controls.widgets[name].disabled_options


def test_an_impossible_model_stays_chosen_with_its_reason_in_one_line():
    settings, status = LabSettings(model="markov"), Status()
    controls = Controls(settings, status)
    controls.widgets["kernel"].value = "rbf"
    hint = controls.hints["model"]
    assert settings.model == "markov" and hint.visible and "bn-error" in hint.object
    assert "Matérn" in hint.object and "\n" not in hint.object
    with pytest.raises(SettingError) as err:      # the run is not rebuilt: its control says why
        build_problem(settings)
    assert err.value.control == "model"
    controls.widgets["kernel"].value = "matern32"
    assert "bn-error" not in controls.hints["model"].object


def _shown(controls):
    return {n for _, names in SECTIONS for n in names if controls.rows[n].visible}


def test_only_the_controls_that_apply_are_visible():
    settings, status = LabSettings(method="vi"), Status()
    controls = Controls(settings, status)
    shown = _shown(controls)
    # probit data, Matérn kernel, full model, VI
    assert {"dataset", "n", "likelihood", "kernel", "lengthscale", "variance", "model",
            "method", "rho", "backtrack", "accelerate", "cubature_order"} <= shown
    assert not shown & {"csv", "lik_scale", "df", "period", "num_inducing", "alpha", "base",
                        "covariance", "band"}
    settings.param.update(likelihood="student_t", kernel="periodic", model="sparse",
                          method="pep")
    assert {"lik_scale", "df", "period", "num_inducing", "alpha"} <= _shown(controls)
    assert not _shown(controls) & {"backtrack", "covariance", "base"}
    settings.param.update(method="gkl", covariance="banded")
    assert {"covariance", "band"} <= _shown(controls) and "rho" not in _shown(controls)
    settings.param.update(method="heuristic", base="pep")
    assert {"base", "alpha"} <= _shown(controls)
    settings.param.update(dataset="csv")
    assert {"csv"} <= _shown(controls) and "n" not in _shown(controls)
    for name in _shown(controls):          # nothing on screen is a disabled dead end
        assert not controls.widgets[name].disabled


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "-".join(p))
def test_every_pair_configures_a_run_or_names_its_control(pair):
    """Behind the controls: each pair either configures the engine (the step programs
    themselves are compiled on the first build, not here) or raises the one-line
    user-facing error that the live view puts under a control."""
    a, b = pair
    for va, vb in itertools.product(_choices(a), _choices(b)):
        settings = LabSettings(**{a: va, b: vb})
        try:
            _configure(build_problem(settings), settings)
        except (SettingError, ValueError, TypeError) as exc:
            message = str(exc).strip()
            assert message and "\n" not in message, (va, vb, exc)


def _configure(problem, s):
    """What ``make_runner`` checks and builds before compiling anything."""
    if s.method == "gkl":
        make_runner(problem, s)                # DirectRunner solves on the first step only
        return
    validate_settings(s.method, s.effective_alpha(), s.rho, 1, 1e-8)
    get_engine(problem.model, s.method, ("gauss_hermite", int(s.cubature_order)),
               s.method_options())
