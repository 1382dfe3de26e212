"""The sidebar: one widget per setting, each with a line under it that says why it is
disabled, or what went wrong with it (bad CSV, labels that do not fit …)."""
from __future__ import annotations

import panel as pn
import param

from . import catalog, markup
from .problem import MAX_UPLOAD_BYTES, MAX_UPLOAD_ROWS, SettingError, upload_text
from .settings import LabSettings

_SELECT_LABELS = {
    "dataset": ("Data set", catalog.DATASETS),
    "likelihood": ("Likelihood", catalog.LIKELIHOODS),
    "kernel": ("Kernel", catalog.KERNEL_LABELS),
    "model": ("Model", catalog.MODELS),
    "method": ("Inference method", {k: f"{k} — {v}" for k, v in catalog.METHODS.items()}),
    "base": ("Base method (heuristic fix)", {b: b for b in catalog.BASES}),
    "covariance": ("G-KL covariance structure", None),
}
_NUMBERS = {
    "n": ("Number of points (0: preset)", pn.widgets.IntInput),
    "lengthscale": ("Lengthscale ℓ", pn.widgets.EditableFloatSlider),
    "variance": ("Signal variance σ²", pn.widgets.EditableFloatSlider),
    "period": ("Period", pn.widgets.EditableFloatSlider),
    "lik_scale": ("Noise variance / scale", pn.widgets.EditableFloatSlider),
    "df": ("Student-t degrees of freedom ν", pn.widgets.EditableFloatSlider),
    "num_inducing": ("Inducing points M", pn.widgets.IntInput),
    "alpha": ("Power α", pn.widgets.EditableFloatSlider),
    "rho": ("Damping ρ", pn.widgets.EditableFloatSlider),
    "band": ("Band / rank K", pn.widgets.IntInput),
    "cubature_order": ("Gauss–Hermite order", pn.widgets.IntSlider),
}
SECTIONS = (("Data", ("dataset", "csv", "n", "likelihood", "lik_scale", "df")),
            ("Prior", ("kernel", "lengthscale", "variance", "period", "model", "num_inducing")),
            ("Inference", ("method", "base", "alpha", "rho", "backtrack", "accelerate",
                           "covariance", "band", "cubature_order")))


class Status(param.Parameterized):
    """What the sidebar shows besides the settings: errors per control, input size."""
    errors = param.Dict(default={})
    input_dim = param.Integer(default=1)


class Controls(pn.viewable.Viewer):
    def __init__(self, settings: LabSettings, status: Status, **params):
        super().__init__(**params)
        self.settings, self.status = settings, status
        self.widgets, self.hints = {}, {}
        for name, (label, options) in _SELECT_LABELS.items():
            opts = {v: k for k, v in options.items()} if options else list(
                settings.param[name].objects)
            self.widgets[name] = pn.widgets.Select.from_param(
                settings.param[name], label=label, options=opts, sizing_mode="stretch_width")
        for name, (label, cls) in _NUMBERS.items():
            self.widgets[name] = cls.from_param(settings.param[name], label=label,
                                                sizing_mode="stretch_width")
        self.widgets["backtrack"] = pn.widgets.Checkbox.from_param(
            settings.param.backtrack, label="Step control: halve ρ when the ELBO falls",
            sizing_mode="stretch_width")
        self.widgets["accelerate"] = pn.widgets.Checkbox.from_param(
            settings.param.accelerate, label="Anderson acceleration (same fixed point)",
            sizing_mode="stretch_width")
        self.upload = pn.widgets.FileInput(
            accept=".csv,text/csv", sizing_mode="stretch_width", label="CSV file",
            description=f"A header row, then one row per point; the last column is the target. "
                        f"Up to {MAX_UPLOAD_BYTES // 2**20} MB and {MAX_UPLOAD_ROWS} rows.")
        self.upload.param.watch(self._on_upload, "value")
        self.widgets["csv"] = self.upload
        for name in self.widgets:
            self.hints[name] = pn.pane.HTML("", css_classes=["bn-hint"], visible=False,
                                            sizing_mode="stretch_width", margin=(0, 10, 6, 10))
        settings.param.watch(lambda *_: self.refresh(), list(settings.param))
        status.param.watch(lambda *_: self.refresh(), ["errors", "input_dim"])
        self.refresh()

    def _on_upload(self, event):
        if event.new is None:
            return
        try:
            text = upload_text(event.new)
        except SettingError as exc:
            self.status.errors = {exc.control: str(exc)}
            return
        self.settings.param.update(csv_text=text, dataset="csv")

    def refresh(self):
        s, st = self.settings, self.status
        avail = catalog.available()
        reasons = s.reasons(st.input_dim, avail)
        self.widgets["model"].disabled_options = list(s.model_reasons(st.input_dim, avail))
        self.widgets["method"].disabled_options = list(s.method_reasons(avail))
        option_reasons = {**s.model_reasons(st.input_dim, avail), **s.method_reasons(avail)}
        self.upload.visible = s.dataset == "csv"
        for name, w in self.widgets.items():
            error = st.errors.get(name)
            reason = reasons.get(name)
            if name == "model" and option_reasons:
                reason = "; ".join(v for k, v in option_reasons.items() if k in catalog.MODELS)
            if name == "method" and "gkl" in option_reasons:
                reason = option_reasons["gkl"]
            if name != "csv":
                w.disabled = name in reasons
            hint = self.hints[name]
            if error:
                hint.object = markup.error(error)
            elif reason:
                hint.object = markup.reason(reason)
            hint.visible = bool(error or reason) and (name != "csv" or s.dataset == "csv")

    def __panel__(self):
        cards = []
        for title, names in SECTIONS:
            items = []
            for n in names:
                items.append(pn.Column(self.widgets[n], self.hints[n], margin=0,
                                       css_classes=[f"ctl-{n}"], sizing_mode="stretch_width"))
            cards.append(pn.Card(*items, title=title, collapsible=True,
                                 sizing_mode="stretch_width"))
        return pn.Column(*cards, sizing_mode="stretch_width")
