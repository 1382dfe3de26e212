"""The sidebar: one widget per setting, shown only while it means something for the
current data, likelihood, kernel, model and method, each with a line under it that says
what went wrong with it (bad CSV, labels that do not fit, a model the kernel cannot
have …). No combination of choices raises: an impossible one is explained there."""
from __future__ import annotations

import panel as pn
import param

from . import catalog, markup
from .problem import MAX_UPLOAD_BYTES, MAX_UPLOAD_ROWS, SettingError, upload_text
from .settings import LabSettings


def _method_labels() -> dict:
    """{method: "name — description"} of the methods registered now (a method added
    with ``register`` is offered by a sidebar built after it)."""
    return {k: f"{k} — {v}" for k, v in catalog.methods().items()}


#: {setting: (label, {value: text} or a function giving it when a sidebar is built)}
_SELECT_LABELS = {
    "dataset": ("Data set", catalog.DATASETS),
    "likelihood": ("Likelihood", catalog.likelihood_choices),
    "kernel": ("Kernel", catalog.KERNEL_LABELS),
    "model": ("Model", catalog.MODELS),
    "method": ("Inference method", _method_labels),
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


def _label_beside_its_box(widget):
    """Panel aligns an editable slider's label with the bottom of its number box, so the
    label reads as sitting under it; centred on the box, it reads as the box's label.
    (Panel 1.9 has no parameter for it: its label is the composite's ``_label``.)"""
    label = getattr(widget, "_label", None)
    if label is not None:
        label.align = "center"


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
            options = options() if callable(options) else options
            opts = {v: k for k, v in options.items()} if options else list(
                settings.param[name].objects)
            self.widgets[name] = pn.widgets.Select.from_param(
                settings.param[name], label=label, options=opts, sizing_mode="stretch_width")
        for name, (label, cls) in _NUMBERS.items():
            # a slider sets its setting when released: dragging one sent every value it
            # passed, each rebuilding the run and redrawing the page
            slider = issubclass(cls, (pn.widgets.EditableFloatSlider, pn.widgets.IntSlider))
            self.widgets[name] = cls.from_param(settings.param[name], label=label,
                                                sizing_mode="stretch_width", throttled=slider)
            _label_beside_its_box(self.widgets[name])
        self.widgets["backtrack"] = pn.widgets.Checkbox.from_param(
            settings.param.backtrack, label="Step control: shorten a step that lowers the ELBO (or Laplace's Ψ)",
            sizing_mode="stretch_width")
        self.widgets["accelerate"] = pn.widgets.Checkbox.from_param(
            settings.param.accelerate, label="Anderson acceleration (same fixed point)",
            sizing_mode="stretch_width")
        self.upload = pn.widgets.FileInput(
            accept=".csv,text/csv", sizing_mode="stretch_width", label="CSV file",
            description=f"A header row, then one row per point; the last column is the target. "
                        f"Up to {MAX_UPLOAD_BYTES // 2**20} MB and {MAX_UPLOAD_ROWS} rows.")
        self.upload.param.watch(self._on_upload, ["value", "filename"])
        self.widgets["csv"] = self.upload
        self.rows = {}
        for name, widget in self.widgets.items():
            self.hints[name] = markup.html_pane("", css_classes=["bn-hint"], visible=False,
                                                sizing_mode="stretch_width",
                                                margin=(0, 10, 6, 10))
            self.rows[name] = pn.Column(widget, self.hints[name], margin=0,
                                        css_classes=[f"ctl-{name}"], sizing_mode="stretch_width")
        settings.param.watch(lambda *_: self.refresh(), list(settings.param))
        status.param.watch(lambda *_: self.refresh(), ["errors", "input_dim"])
        self.refresh()

    def _on_upload(self, *events):
        """A file was chosen: its content replaces the data if the lab can read it, else
        its own error replaces any earlier one. Panel reports an empty file as no value
        with a file name."""
        raw, name = self.upload.value, self.upload.filename
        if raw is None and not name:          # nothing chosen (the widget was cleared)
            return
        try:
            text = upload_text(b"" if raw is None else raw)
        except SettingError as exc:
            self.status.errors = {exc.control: str(exc)}
            return
        self.settings.param.update(csv_text=text, dataset="csv")

    def refresh(self):
        """Show the controls that apply, disable the options that cannot be chosen, and
        put the one-line explanation or error under its control.

        The current value of a Select is never among its disabled options (Panel refuses
        that): a choice that another one made impossible (Markov GP, then the RBF kernel)
        stays selected, with the reason under it, and the run is not rebuilt until it is
        changed."""
        s, st = self.settings, self.status
        hidden = s.reasons(st.input_dim)
        option_reasons = {"model": s.model_reasons(st.input_dim)}
        for name, reasons in option_reasons.items():
            current = getattr(s, name)
            self.widgets[name].disabled_options = [o for o in reasons if o != current]
        # the chosen method in full: its box shows the first ≈ 45 characters only
        captions = {"method": catalog.methods().get(s.method, "")}
        for name, row in self.rows.items():
            row.visible = name not in hidden and (name != "csv" or s.dataset == "csv")
            error = st.errors.get(name) or option_reasons.get(name, {}).get(getattr(s, name, None))
            note = "; ".join(option_reasons.get(name, {}).values())
            hint = self.hints[name]
            hint.object = (markup.error(error) if error else
                           markup.reason(note) if note else
                           markup.caption(captions[name]) if name in captions else "")
            hint.visible = bool(hint.object) and (name != "csv" or s.dataset == "csv")

    def __panel__(self):
        cards = [pn.Card(*(self.rows[n] for n in names), title=title, collapsible=True,
                         sizing_mode="stretch_width") for title, names in SECTIONS]
        return pn.Column(*cards, sizing_mode="stretch_width")
