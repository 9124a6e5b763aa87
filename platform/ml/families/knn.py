"""k-nearest neighbours (scikit-learn; cuML's under the GPU engine)."""

from __future__ import annotations

from typing import Any

from mlpilot.platform.ml.families._base import Build, Family, GpuSupport, choice_param, int_param
from mlpilot.platform.ml.families._words import E, W


class KNeighbours(Family):
    name = "knn"
    label = "k-nearest neighbours"
    words = (
        rf"{W}k[ -]?nearest[ -]?neighbors?{E}",
        rf"{W}nearest[ -]neighbors?{E}",
        rf"{W}k[ -]?nn{E}",
        "k近邻",
        "最近邻",
        "k 近邻",
    )
    word_order = 50
    params = (
        int_param("n_neighbors", 1, 50, log=True, limit=(1, 1000)),
        choice_param("weights", "uniform", "distance"),
        choice_param("p", 1, 2),
    )
    cost = 0.5
    scale_sensitive = True
    gpu = GpuSupport("cuml.accel", "cuml")

    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        # before cuML 25.12 cuml.accel runs distance-weighted neighbours on the CPU
        base = {
            "n_neighbors": 15,
            "weights": "uniform" if build.gpu else "distance",
            "n_jobs": build.n_jobs,
        }
        cls = KNeighborsClassifier if build.classification else KNeighborsRegressor
        return cls(**{**base, **params})
