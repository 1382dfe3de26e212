"""The lab's Panel/HoloViews user interface (``panel serve apps/lab.py``).

The engine (``bnlab`` proper) never imports this package; the UI only calls the engine.
"""
import holoviews as hv

hv.extension("bokeh", logo=False)
