"""The search's meta-learned prior: warm-start configurations for a data set.

- ``meta_features``: what a data set is like (size, categoricals, missing values, class
  balance or target skew, two landmarkers), from its training split; the offline builder
  and the search both call it.
- ``Prior``: the shipped build (``data/prior.json``, written by
  ``benchmarks/build_prior.py``): a greedy portfolio of configurations per family and
  task, and the same choice over the data sets nearest a new one.
"""

from __future__ import annotations

from mlpilot.platform.ml.prior._meta import NAMES, meta_features, vector
from mlpilot.platform.ml.prior._prior import Choice, Prior, regrets

__all__ = ["NAMES", "Choice", "Prior", "meta_features", "regrets", "vector"]
