"""The lab's Panel/HoloViews user interface: ``panel serve apps/lab.py --warm``, or
``bnlab.ui.Lab()`` as the last expression of a Jupyter cell (after ``pn.extension()``).

The engine (``bnlab`` proper) never imports this package; the UI only calls the engine,
through its public names (``bnlab.__all__`` followed down; ``tests/test_architecture.py``).
"""
import holoviews as hv

from .queued_writes import install as _send_every_queued_write
from .session_callbacks import install as _route_session_callbacks

hv.extension("bokeh", logo=False)
_route_session_callbacks()   # no change lost to a worker thread under a hold (see there)
_send_every_queued_write()   # no message left in Panel's write queue (see there)

from .app import Lab  # noqa: E402  (after the HoloViews extension it renders with)

__all__ = ["Lab"]
