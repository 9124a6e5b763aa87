"""The family registry: every family's facts on its class, everything else derived from it.

An AST walk (as ``test_layers.py``) fails when a module outside ``ml/families`` branches
on a family's name; the ``hpo-<family>`` templates, the tools' ``ModelName``, the offline
planner's words, the search's queues and the README's family table are checked against
the registry.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from helpers import REPO

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import families
from mlpilot.platform.ml.families import Family, FamilyRegistry, int_param
from mlpilot.platform.plan.templates import tuning_template

FOLDERS = ("platform", "tracking", "adapters", "dashboards")
FAMILIES_DIR = REPO / "platform" / "ml" / "families"
WORKFLOWS = REPO / "platform" / "plan" / "workflows"
NAMES = frozenset(families.names())


# -- nothing outside ml/families branches on a family's name --------------------------------
def _names_in(node: ast.AST | None) -> list[str]:
    """Family names a literal spells: "rf", or a tuple/list/set of such strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for item in node.elts for name in _names_in(item)]
    return []


def family_branches(source: str) -> list[str]:
    """Where ``source`` compares against, keys a table by, or passes a family literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        spelled: list[str] = []
        if isinstance(node, ast.Compare):
            for part in (node.left, *node.comparators):
                spelled += _names_in(part)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                spelled += _names_in(key)
        elif isinstance(node, ast.MatchValue) or (
            isinstance(node, ast.keyword) and node.arg in ("model", "family")
        ):
            spelled += _names_in(node.value)
        found += [f"line {node.lineno}: {name!r}" for name in spelled]  # type: ignore[attr-defined]
    return found


def test_the_check_sees_each_kind_of_branch() -> None:
    source = (
        'if family == "svm": pass\n'
        'ok = family in ("xgb", "lgbm")\n'
        'table = {"rf": 1}\n'
        'train(run, model="rf")\n'
        "match family:\n"
        '    case "knn": pass\n'
        'other = kind == "cpu"\n'
    )
    assert len(family_branches(source)) == 6


def test_no_module_outside_the_families_branches_on_a_family_name() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if FAMILIES_DIR in path.parents:
                continue
            for where in family_branches(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(REPO)} {where}")
    assert offenders == []


# -- the registry --------------------------------------------------------------------------
def test_every_family_is_complete_and_consistent() -> None:
    for family in families.registry():
        assert family.name and family.label and family.tasks, family
        names = [p.name for p in family.params]
        assert len(names) == len(set(p.name + str(p.task) for p in family.params)), family
        if family.plan:
            assert family.words, f"{family.name}: the offline planner needs its words"
        for fixed in (family.rounds, family.rate):
            assert fixed is None or fixed in names, (family.name, fixed)
        for name, value in (family.low_cost or {}).items():
            param = next(p for p in family.params if p.name == name)
            low, high = param.bounds or (0, 0)
            assert low <= value <= high, (family.name, name)
        for param in family.params:
            if param.kind != "choice":
                low, high = param.bounds or (0, 0)
                assert low <= float(param.low or 0) <= float(param.high or 0) <= high


def test_each_role_has_exactly_one_family() -> None:
    for role in families.ROLES:
        owners = [f.name for f in families.registry() if role in f.default_for]
        assert len(owners) == 1, (role, owners)
    assert families.default(families.AUTO).name == "hgb"
    assert families.default(families.AUTO_GPU).name == "xgb"


def test_the_derived_lists_follow_the_registry() -> None:
    from mlpilot.platform.llm.offline import _lexicon as lex
    from mlpilot.platform.ml.hpo.spaces import auto_families
    from mlpilot.platform.tools import MODELS

    assert (*families.plan_names(), "auto") == MODELS
    assert MODELS[:7] == ("rf", "xgb", "lgbm", "hgb", "svm", "linear", "knn")  # DESIGN §3
    assert "catboost" in MODELS and "et" not in MODELS
    worded = [name for name, _ in lex.model_res()[0]]
    assert set(worded) == {*families.plan_names(), "auto"}
    # the order decides overlaps: the bare "linear" is tried after "linear svm"'s family
    assert worded.index("svm") < worded.index("linear")
    searched = auto_families()
    assert searched[:6] == ("hgb", "rf", "xgb", "lgbm", "linear", "et")  # unchanged order
    assert "catboost" in searched
    assert set(auto_families("gpu")) == {f for f in searched if families.get(f).gpu}
    queue = [f.name for f in families.registry().low_cost_queue(searched)]
    assert queue == ["lgbm", "hgb", "xgb", "linear", "rf", "et", "catboost"]


def test_an_unknown_family_fails_in_one_line_naming_the_known_ones() -> None:
    with pytest.raises(MlpilotError, match="unknown model family 'nope'; valid: rf, xgb"):
        families.get("nope")


class _Clashing(Family):
    name = "rf"
    label = "another forest"


class _Fresh(Family):
    name = "fresh"
    label = "fresh trees"
    params = (int_param("depth", 1, 4),)


def test_a_clashing_name_is_refused_naming_both_providers() -> None:
    registry = FamilyRegistry(cls() for cls in families.BUILTIN)
    with pytest.raises(
        MlpilotError, match="'rf' from acme-trees clashes with the one from mlpilot"
    ):
        registry.add(_Clashing(), provider="acme-trees")
    registry.add(_Fresh(), provider="acme-trees")
    assert registry.get("fresh").provider == "acme-trees"
    assert registry.get("rf").provider == "mlpilot"


# -- templates and README derived from the registry ------------------------------------------
def test_each_plan_family_has_its_hpo_template_and_no_other_exists() -> None:
    on_disk = {p.stem.removeprefix("hpo-") for p in WORKFLOWS.glob("hpo-*.json")}
    assert on_disk == set(families.plan_names())
    for name in families.plan_names():
        path = WORKFLOWS / f"hpo-{name}.json"
        assert json.loads(path.read_text(encoding="utf-8")) == tuning_template(families.get(name))


def test_the_readme_family_table_is_the_registry() -> None:
    from mlpilot.platform.cli.families import markdown_table

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- families:start -->\n(.*?)<!-- families:end -->", readme, re.S)
    assert match, "README.md lacks the family table markers"
    assert match.group(1).strip() == markdown_table(families.registry()).strip()


def test_the_readme_table_of_a_family_names_what_matters() -> None:
    from mlpilot.platform.cli.families import markdown_table

    table = markdown_table(families.registry())
    row = next(line for line in table.splitlines() if line.startswith("| `catboost`"))
    assert "CatBoost" in row and "native (catboost ≥ 1.2)" in row


# -- CatBoost's device, read from a fitted model --------------------------------------------
FIXTURES = Path(__file__).parent / "data"


class _RecordedCatBoost:
    """A fitted CatBoost model as far as ``fitted_device`` reads it: ``get_all_params()``
    as recorded from a model fitted with ``task_type="GPU"`` (``catboost_gpu_params.json``)."""

    __module__ = "catboost.core"

    def __init__(self, params: dict) -> None:
        self.params = params

    def is_fitted(self) -> bool:
        return True

    def get_all_params(self) -> dict:
        return self.params


def test_catboost_reports_the_device_it_trained_on() -> None:
    from mlpilot.platform.ml.devices import booster_device

    recorded = json.loads((FIXTURES / "catboost_gpu_params.json").read_text(encoding="utf-8"))
    gpu_model = _RecordedCatBoost(recorded)
    assert families.registry().owner_of(gpu_model) is families.get("catboost")
    assert booster_device(gpu_model) == "gpu"
    assert booster_device(_RecordedCatBoost({**recorded, "task_type": "CPU"})) == "cpu"


def test_a_fitted_catboost_on_this_machine_reports_the_cpu() -> None:
    import numpy as np

    from mlpilot.platform.ml.devices import booster_device
    from mlpilot.platform.ml.modeling import make_estimator

    X = np.arange(40, dtype=float).reshape(20, 2)
    model = make_estimator("catboost", "regression", params={"iterations": 5}, n_jobs=1)
    assert booster_device(model) is None  # not fitted: no evidence
    model.fit(X, X[:, 0])
    assert booster_device(model) == "cpu"
    gpu = make_estimator("catboost", "regression", device="gpu")
    assert gpu.get_params()["task_type"] == "GPU"


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_catboost_stops_early_and_reports_to_its_trial(task: str) -> None:
    import numpy as np
    import optuna

    from mlpilot.platform.ml.hpo import boosting
    from mlpilot.platform.ml.hpo.objective import Fold
    from mlpilot.platform.ml.modeling import make_estimator

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=400)
    if task == "classification":  # three classes: CatBoost then predicts a column
        y = np.select([y < -0.5, y < 0.5], ["low", "mid"], "high")
    fold = Fold(X[:300], y[:300], X[300:], y[300:])
    metric = boosting.booster_metric(
        "catboost", "log_loss" if task == "classification" else "rmse", 3
    )
    estimator = make_estimator(
        "catboost", task, params={"iterations": 2000, "learning_rate": 0.3}, n_jobs=1
    )
    study = optuna.create_study()
    trial = study.ask()
    fitted = boosting.fit_with_pruning(estimator, fold, trial, "catboost", metric)
    booster = getattr(fitted, "estimator_", fitted)
    assert booster.tree_count_ < 2000  # CatBoost's own early stopping on the validation rows
    assert trial.storage.get_trial(trial._trial_id).intermediate_values  # reported as it boosts
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # CatBoost predicts a column: no conversion warning
        predicted = fitted.predict(X[300:305])
    assert predicted.shape == (5,)
    if task == "classification":
        assert set(predicted) <= {"low", "mid", "high"}


@pytest.mark.parametrize(
    "prompt",
    ["train a catboost model to predict Survived", "用CatBoost预测Survived", "try cat boost on it"],
)
def test_the_planner_reads_catboosts_words(tmp_path: Path, prompt: str) -> None:
    """What the real-data case through the planner's words checked, without a run."""
    from planner_harness import write_csv

    from mlpilot.platform.agent.planning import plan_request
    from mlpilot.platform.config import Settings

    columns = {"Age": "num", "Sex": "cat", "Fare": "num", "Survived": "bin"}
    data = str(write_csv(tmp_path / "titanic.csv", columns))
    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_LLM": "offline"})
    result, _ = plan_request(settings, prompt, data_path=data, target="Survived")
    steps = {s.tool: s.args for s in result.plan.steps}
    assert steps["train_model"]["model"] == "catboost"


@pytest.mark.parametrize(
    ("release", "depth"),
    [((25, 8), 16), ((26, 2), 16), ((26, 4), None), ((26, 8), None), (None, None)],
)
def test_a_gpu_forest_fits_the_depth_cuml_fits_on_that_release(
    release: tuple[int, int] | None, depth: int | None
) -> None:
    """cuML ≤ 26.02 turns scikit-learn's unlimited depth into 16: the GPU defaults say 16
    there, so the CPU leg of a comparison fits the same forest; a plan's depth is kept."""
    from mlpilot.platform.ml.families import Build, get

    rf = get("rf")
    for task in ("classification", "regression"):
        gpu = rf.make_estimator(Build(task=task, prefer="gpu", cuml=release), {})
        assert gpu.max_depth == depth
        asked = rf.make_estimator(Build(task=task, prefer="gpu", cuml=release), {"max_depth": 8})
        assert asked.max_depth == 8
    assert rf.make_estimator(Build(task="regression", cuml=(26, 2)), {}).max_depth is None


def test_the_cuml_release_is_read_from_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from mlpilot.platform.ml.families import _base

    def version(dist: str) -> str:
        if dist == "cuml-cu12":
            return "26.02.01"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(metadata, "version", version)
    _base.cuml_release.cache_clear()
    try:
        assert _base.cuml_release() == (26, 2)
    finally:
        _base.cuml_release.cache_clear()


def test_a_gpu_svc_keeps_its_probabilities_where_cuml_refuses_probability_true() -> None:
    """cuML 26.06/26.08 run ``SVC(probability=True)`` on the CPU: the GPU defaults there
    calibrate a plain SVC instead (its fits stay on the GPU), so the model still has
    probabilities; elsewhere, and for a multiclass target, the SVC is unchanged."""
    import warnings

    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_breast_cancer
    from sklearn.svm import SVC

    from mlpilot.platform.ml.families import Build, get

    svm = get("svm")
    calibrated = svm.make_estimator(
        Build(task="classification", prefer="gpu", cuml=(26, 8)), {"C": 2.0}
    )
    assert isinstance(calibrated, CalibratedClassifierCV)
    assert calibrated.estimator.C == 2.0 and calibrated.estimator.probability is not True
    X, y = load_breast_cancer(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated parameter is passed
        calibrated.fit(X[:200], y[:200])
    assert calibrated.predict_proba(X[:3]).shape == (3, 2)
    for build in (
        Build(task="classification", prefer="gpu", cuml=(26, 4)),
        Build(task="classification", prefer="gpu", cuml=(26, 8), n_classes=3),
        Build(task="classification", cuml=(26, 8)),
    ):
        plain = svm.make_estimator(build, {})
        assert isinstance(plain, SVC) and plain.probability is True
