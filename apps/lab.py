"""`panel serve apps/lab.py` — the bnlab lab (see bnlab/ui/server.py)."""
import logging

import panel as pn

from bnlab.ui.server import serve_lab

logging.getLogger("bnlab.ui").setLevel(logging.INFO)   # session lifecycle in the server log
pn.extension(nthreads=4, notifications=True, sizing_mode="stretch_width")
serve_lab().servable(title="bnlab lab")
