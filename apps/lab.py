"""`panel serve apps/lab.py` — the bnlab lab (see bnlab/ui/server.py)."""
import logging

import panel as pn

import bnlab
from bnlab.ui.server import serve_lab

bnlab.configure()      # float64, one OpenBLAS thread, the persistent compilation cache

logging.getLogger("bnlab.ui").setLevel(logging.INFO)   # session lifecycle in the server log
pn.extension(nthreads=4, notifications=True, sizing_mode="stretch_width")
serve_lab().servable(title="bnlab lab")
