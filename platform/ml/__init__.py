"""The runtime library that generated pipelines import.

It may use ``mlpilot.tracking`` and ``mlpilot.adapters``, never the agent, the planners
or the CLI: a generated ``pipeline.py`` runs with this package alone. Submodules import
pandas and scikit-learn; this package's ``__init__`` stays light so that planning,
which only needs :mod:`mlpilot.platform.ml.profile`, starts fast.
"""
