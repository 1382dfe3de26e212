"""The About page's text: what the lab is, its pages in detail, and the papers behind it."""

ABOUT = """
### What is this?
A lab for **approximate Bayesian inference in Gaussian-process models**. Pick a data set,
a likelihood, a kernel and an inference method in the sidebar, then press **Run** (or
**Step**) on the *Live* page and watch the approximation converge — or fail.

* *Posterior*: the latent function's mean and a ±2σ band; grey dots are the data.
* *Energy*: the method's approximation of the log marginal likelihood, per iteration.
* *PSD status*: a red square marks an iteration where the posterior or a cavity
  distribution stopped being a valid Gaussian (not positive definite); an amber one, a
  proposed step that would have, which the safeguards rejected (the iterate stayed).
* *Sites*: the Gaussian factors that stand in for each data point's likelihood.
* *Two points*: click two data points to see the joint Gaussian of their latent values.

*Compare* runs two methods side by side and sweeps the Power-EP power α from
variational inference (α → 0) to EP (α = 1), with the MCMC reference as the truth
once it is computed on the Live page. *Surfaces* maps the approximate marginal
likelihood over a grid of hyperparameters.

The address bar always holds the current settings: copy it to share this exact demo.

### The pages in detail
* *Live*: the status line says why a run stopped (converged; diverged, by the posterior,
  a cavity or non-finite values; the iteration cap; stalled; cancelled). Click a point
  to compare its q(fᵢ) with its cavity and tilted distribution, click two for their
  joint 2σ ellipse. The MCMC reference's log p(y) is an interval, forward AIS (a
  stochastic lower bound) and reverse AIS from posterior samples (an upper bound): it
  is *resolved* when the interval, widened by two standard errors each side, is
  narrower than 0.05 nats; press again for four times the temperatures. Exports: the
  trace, the band and the MCMC reference as CSV, each plot as PNG (its save tool).
* *Compare*: each method at its own α and ρ (a diverged one draws no band). The α
  explorer computes 21 values of α from 0.001 to 1 at once; the slider and ▶ then show
  any of them, every diverged α marked.
* *Surfaces*: contours on a shared colour scale, a slice view, learning trajectories
  over every panel, CSV and netCDF downloads. A cell where a method diverged is grey;
  lines count those cells, the ones at the iteration cap and the MCMC cells not
  resolved. Compare and Surfaces say when the sidebar changed since they were computed.
* *Guided tours*: Next / Back set the controls, which stay free to change in between; a
  step shows its run already solved (⟲ Replay animates it); the address names the step,
  and Exit takes the tour away.
* *Presentation mode* (the header's Present switch): the sidebar folded (☰ opens it),
  larger type; Space runs or pauses, ← / → go through a tour's steps.
* *Copy link* brings back what the page showed: a run solved to its stop and the same
  MCMC reference, so a student's page shows the teacher's numbers.

### Serving a class
Serve behind a compressing reverse proxy: a first visit is 4 MB, 1 MB gzipped.
"""

#: the page's last section, after the tours
REFERENCES = """
### References
- W. J. Wilkinson, S. Särkkä, A. Solin. Bayes–Newton methods for approximate Bayesian
  inference with PSD guarantees. *JMLR* 24, 2023.
- T. D. Bui, J. Yan, R. E. Turner. A unifying framework for Gaussian process pseudo-point
  approximations using Power Expectation Propagation. *JMLR* 18, 2017.
- T. D. Bui, M. K. Titsias. Sparse Gaussian processes: structured approximations and
  Power-EP revisited. 2025.
- E. Challis, D. Barber. Gaussian Kullback–Leibler approximate inference. *JMLR* 14, 2013.
- R. Li, S. T. John, A. Solin. Improving hyperparameter learning under approximate
  inference in Gaussian process models. *ICML* 2023.
- C. E. Rasmussen, C. K. I. Williams. *Gaussian Processes for Machine Learning*. MIT
  Press, 2006.
- R. M. Neal. Annealed importance sampling. *Statistics and Computing* 11, 2001.
- I. Murray, R. P. Adams, D. J. C. MacKay. Elliptical slice sampling. *AISTATS* 2010.
"""
