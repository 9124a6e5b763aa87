"""Support vector machines (scikit-learn; cuML's under the GPU engine)."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.ml.families._base import Build, Family, GpuSupport, float_param
from mlpilot.platform.ml.families._words import E, W


class SupportVector(Family):
    name = "svm"
    label = "support vector machine"
    words = (
        rf"{W}support[ -]vector[ -](machines?|classifier|classification|regressor|regression)s?{E}",
        rf"{W}svms?{E}",
        rf"{W}svc{E}",
        rf"{W}svr{E}",
        "支持向量机",
        "支持向量",
    )
    word_order = 40
    params = (
        float_param("C", 1e-2, 1e3, log=True, limit=(1e-6, 1e6)),
        float_param("gamma", 1e-4, 1.0, log=True, limit=(1e-8, 1e3)),
        float_param("epsilon", 1e-3, 1.0, log=True, limit=(0.0, 100.0), task="regression"),
    )
    cost = 20.0
    scale_sensitive = True
    gpu = GpuSupport("cuml.accel", "cuml")
    #: from this cuML release cuml.accel refuses ``SVC(probability=True)`` and runs it on the
    #: CPU (``python/cuml/cuml/svm/svc.py``, ``_params_from_cpu``: "`probability=True` is
    #: not supported", 26.06 and 26.08; its comment points to scikit-learn's
    #: CalibratedClassifierCV, which is what the GPU defaults then use)
    gpu_probability_refused_since = (26, 6)
    slow_above_rows = 20000
    slow_reason = "its cost grows with the square of the rows"

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.svm import SVC, SVR

        if build.classification:
            base: dict[str, Any] = {
                "C": 1.0,
                "kernel": "rbf",
                "probability": True,
                "random_state": build.seed,
                "class_weight": "balanced" if build.imbalanced else None,
            }
            if self._calibrated_on_gpu(build):
                from sklearn.calibration import CalibratedClassifierCV

                # Platt scaling outside the SVC, as probability=True does inside it: the
                # SVC fits stay on the GPU and the model keeps its probabilities
                # probability left at its default (False; scikit-learn 1.9 warns on any value)
                plain = {k: v for k, v in base.items() if k != "probability"}
                svc = SVC(**{**plain, **params})
                return CalibratedClassifierCV(svc, method="sigmoid", cv=3, ensemble=False)
            return SVC(**{**base, **params})
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.preprocessing import StandardScaler

        # SVR's epsilon and C are in the target's units: on a target of a few hundred
        # (diabetes progression) the defaults fit almost nothing (r² 0.04 → 0.4 scaled)
        return TransformedTargetRegressor(
            regressor=SVR(**{"C": 1.0, "kernel": "rbf", **params}), transformer=StandardScaler()
        )

    def _calibrated_on_gpu(self, build: Build) -> bool:
        """A two-class SVC under the GPU defaults on a cuML that refuses probability=True
        (a multiclass SVC runs on the CPU on every release)."""
        release = build.cuml
        return (
            build.gpu
            and build.n_classes == 2
            and release is not None
            and release >= self.gpu_probability_refused_since
        )
