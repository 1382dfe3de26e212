"""The iteration: ``loop`` (init/step/run of the damped site update, step control and
the PSD/finiteness rejection), ``anderson`` (acceleration of the site map) and
``energies`` (each method's approximation of log p(y | θ))."""
