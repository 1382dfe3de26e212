"""A data point clicked on the Live band opens its local picture beside the band: q(fᵢ)
is the run's posterior marginal there (an independent ``bnlab.infer`` run's predictive
at that input), and at EP's fixed point it has the tilted distribution's mean and
variance (moment matching, Minka 2001), which is what the picture shows."""
import holoviews as hv
import numpy as np

import bnlab
from bnlab.ui.controls import Status
from bnlab.ui.live import LiveView
from bnlab.ui.settings import LabSettings


def _curve(overlay, label):
    (curve,) = [el for el in overlay if isinstance(el, hv.Curve) and el.label == label]
    f, density = curve.dimension_values(0), curve.dimension_values(1)
    mean = np.trapezoid(f * density, f)
    return mean, np.trapezoid((f - mean) ** 2 * density, f)


def test_a_clicked_point_shows_q_against_its_tilted_distribution():
    s = LabSettings(dataset="separated_1d", likelihood="probit", lengthscale=2.0,
                    variance=100.0, method="ep", rho=0.5)
    live = LiveView(s, Status())
    assert live.rebuild() and not live.local_box.visible
    assert live.solve()
    live._on_tap("indices", [], [7])
    assert live.local_box.visible and live.point == 7
    overlay = live.local_pane.object
    q_mean, q_var = _curve(overlay, "q(fᵢ)")
    p = live.problem
    res = bnlab.infer(p.model, np.asarray(p.X), np.asarray(p.y), method="ep", damping=0.5,
                      params=p.params, tol=1e-10, max_iters=1000)
    m, v = res.predict(np.asarray(p.X)[7:8])
    np.testing.assert_allclose([q_mean, q_var], [float(m[0]), float(v[0])], rtol=1e-4)
    t_mean, t_var = _curve(overlay, "tilted ∝ cavity × p(yᵢ|fᵢ)^1")
    np.testing.assert_allclose([t_mean, t_var], [q_mean, q_var], rtol=1e-3, atol=1e-3)
    assert "point 7" in overlay.opts.get().kwargs["xlabel"]
    live.close_local()
    live.step(1)
    assert not live.local_box.visible and live.point is None


def test_g_kl_says_it_has_no_local_picture():
    s = LabSettings(method="gkl")
    live = LiveView(s, Status())
    assert live.rebuild()
    live.step(1)
    live._on_tap("indices", [], [2])
    assert "no sites" in live.local_pane.object.opts.get().kwargs["title"]
