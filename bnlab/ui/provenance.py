"""The sidebar settings a computed result was made with, and a note once they differ
from the ones shown. Compare's pair and α sweep and the Surfaces page are computed on
demand and stay on screen: after the data, the model or a hyperparameter changed in
the sidebar, they would otherwise be read as results for the settings now shown."""
from __future__ import annotations

from . import markup
from .settings import URL_PARAMS, LabSettings

#: settings only the Live page's run reads (its pace and its cap)
LIVE_ONLY = ("speed", "max_iters")


class ComputedWith:
    """Records the settings a result depends on (every URL setting and the uploaded
    CSV, less ``ignore`` and ``LIVE_ONLY``) when it is computed; ``note`` names those
    that have changed since, with their values then, until the result is computed
    again or dropped."""

    def __init__(self, settings: LabSettings, ignore=()):
        self.settings = settings
        skip = set(ignore) | set(LIVE_ONLY)
        self.names = [p for p in (*URL_PARAMS, "csv_text") if p not in skip]
        self.values: dict | None = None
        self.free: set = set()
        self.note = markup.html_pane("", sizing_mode="stretch_width", visible=False,
                                 css_classes=["bn-stale"])
        settings.param.watch(lambda *_: self._show(), self.names)

    def current(self) -> dict:
        """The settings a result computed now would depend on."""
        return {k: getattr(self.settings, k) for k in self.names}

    def record(self, values: dict, free=()):
        """The result on screen was computed with ``values`` (``current()`` when it
        started); the settings in ``free`` it does not depend on (a surface's axes)."""
        self.values, self.free = dict(values), set(free)
        self._show()

    def forget(self):
        """No result on screen."""
        self.values = None
        self._show()

    def changed(self) -> dict:
        """{setting: its value when the result was computed} for those that differ now."""
        if self.values is None:
            return {}
        now = self.current()
        return {k: v for k, v in self.values.items() if k not in self.free and now[k] != v}

    def _show(self):
        changed = self.changed()
        self.note.visible = bool(changed)
        if not changed:
            self.note.object = ""
            return
        was = "; ".join("another uploaded CSV" if k == "csv_text" else
                        f"{k} was “{str(v)[:40]}”" for k, v in changed.items())
        self.note.object = markup.warning(f"Computed with other sidebar settings ({was}): "
                                          "compute again for the settings shown.")
