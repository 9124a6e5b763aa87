"""``mlpilot predict --proba``: each class's probability beside the prediction."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml.predict_job import add_probabilities


def _pyfunc(model: object) -> SimpleNamespace:
    """What mlflow.pyfunc.load_model returns for a scikit-learn model, as far as it matters."""
    return SimpleNamespace(_model_impl=SimpleNamespace(sklearn_model=model))


def test_each_class_gets_its_probability_column() -> None:
    X = pd.DataFrame({"a": np.r_[np.zeros(20), np.ones(20)], "b": np.arange(40.0)})
    y = np.array(["no"] * 20 + ["yes"] * 20)
    model = LogisticRegression().fit(X, y)
    frame = X.assign(prediction=model.predict(X))
    out = add_probabilities(frame, _pyfunc(model))
    assert list(out.columns) == ["a", "b", "prediction", "proba_no", "proba_yes"]
    np.testing.assert_allclose(out[["proba_no", "proba_yes"]].sum(axis=1), 1.0)
    assert (out.loc[out.prediction == "yes", "proba_yes"] > 0.5).all()


def test_a_model_without_probabilities_is_refused_in_one_line() -> None:
    X = pd.DataFrame({"a": [0.0, 1.0, 2.0]})
    model = LinearRegression().fit(X, [0.0, 1.0, 2.0])
    with pytest.raises(MlpilotError, match="--proba needs a scikit-learn classifier"):
        add_probabilities(X.assign(prediction=0.0), _pyfunc(model))
