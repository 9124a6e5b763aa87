"""What one model family is: the ``Family`` base class and the parameter specification.

A family carries every fact mlpilot knows about it (as FLAML's estimator classes and
AutoGluon's models do): its names, the words users type for it, the estimator it builds
per task and engine, the parameters a plan may set and a search samples, its cheap first
configuration and cost under a time budget, its boosting rounds and learning rate, how it
takes categorical columns, whether it needs scaled inputs, where it runs on a GPU, the
roles it is the default for, and its limits. Nothing outside ``ml/families`` branches on
a family's name (``tests/unit/test_families.py``).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

CLASSIFICATION = "classification"
REGRESSION = "regression"
#: the parameter of the families that split on categories themselves, saying how
#: categorical columns reach them; a search chooses between the two by validation score
CATEGORICAL_PARAM = "categorical"
CATEGORICAL_CHOICES = ("encoded", "native")
#: boosters report their validation score to a pruning trial every this many rounds: each
#: report is a storage write, and a write per round would cost more than the round
BOOST_REPORT_EVERY = 25

#: the roles a family can be the default for (``Family.default_for``)
AUTO = "auto"  # train_model(model="auto") on the CPU: fast, strong, robust to missing values
AUTO_GPU = "auto-gpu"  # the same when the defaults prefer the GPU
BOOSTING = "boosting"  # "gradient boosting" with no library named
IMPORTANCE = "importance"  # fitted for feature importance when a plan trains no model
COMPARE = "compare-engines"  # what an engine comparison fits when no family is named
SETTLE = "settle"  # built once before a search to settle the cleaning and feature plans
ROLES = (AUTO, AUTO_GPU, BOOSTING, IMPORTANCE, COMPARE, SETTLE)


@dataclass(frozen=True)
class Param:
    """One hyperparameter of a family: its type, search range, and the values a plan may set.

    ``kind`` is ``int``, ``float`` or ``choice``; ``low``/``high`` (with ``log``) is the
    range the search samples; ``limit`` the wider range a user may ask for (default: the
    search range); ``task`` restricts it to one task.
    """

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    limit: tuple[float, float] | None = None
    task: str | None = None

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.kind == "choice":
            return None
        return self.limit or (float(self.low or 0), float(self.high or 0))

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the values a plan may set (the ``limit``, not the search range)."""
        if self.kind == "choice":
            return {"enum": list(self.choices)}
        low, high = self.bounds or (0.0, 0.0)
        if self.kind == "int":
            return {"type": "integer", "minimum": int(low), "maximum": int(high)}
        return {"type": "number", "minimum": low, "maximum": high}


def int_param(
    name: str,
    low: int,
    high: int,
    log: bool = False,
    limit: tuple[float, float] | None = None,
    task: str | None = None,
) -> Param:
    return Param(name, "int", low, high, log, limit=limit, task=task)


def float_param(
    name: str,
    low: float,
    high: float,
    log: bool = False,
    limit: tuple[float, float] | None = None,
    task: str | None = None,
) -> Param:
    return Param(name, "float", low, high, log, limit=limit, task=task)


def choice_param(name: str, *choices: Any, task: str | None = None) -> Param:
    return Param(name, "choice", choices=choices, task=task)


#: the categorical-encoding choice of the families with ``native_categorical``
CATEGORICAL = choice_param(CATEGORICAL_PARAM, *CATEGORICAL_CHOICES)


@dataclass(frozen=True)
class GpuSupport:
    """Where a family trains under the GPU engine: ``engine`` is ``cuml.accel`` (cuML's
    drop-in proxies of the scikit-learn estimator) or ``native`` (the library's own CUDA
    build, told by a parameter); ``library`` and ``since`` the package and first version
    that run it on the GPU (None: every supported version)."""

    engine: str
    library: str
    since: str | None = None


@functools.cache
def cuml_release() -> tuple[int, int] | None:
    """The installed cuML's release as ``(year, month)`` (26.08 → ``(26, 8)``), read from
    package metadata without importing it; None without cuML. Both legs of a comparison run
    in one environment, so both read the same release and build the same model."""
    from importlib import metadata

    for dist in ("cuml-cu12", "cuml-cu13", "cuml"):
        try:
            found = re.match(r"(\d+)\.(\d+)", metadata.version(dist))
        except metadata.PackageNotFoundError:
            continue
        if found:
            return int(found[1]), int(found[2])
    return None


@dataclass(frozen=True)
class Build:
    """What a family's estimator is built from, besides its parameters.

    ``device`` is where a native-GPU family trains (``cpu``/``gpu``); ``prefer="gpu"`` picks
    defaults cuML accelerates; ``native``: the inputs carry pandas categories
    (``transformers.CategoryColumns``) that the estimator must be told to read.
    """

    task: str
    seed: int = 42
    imbalanced: bool = False
    device: str = "cpu"
    n_classes: int = 2
    n_jobs: int = -1
    prefer: str = "cpu"
    native: bool = False
    #: how many leading columns are categories when ``native``
    native_columns: int = 0
    #: the cuML release the GPU defaults are chosen for (``cuml_release``; None: none here)
    cuml: tuple[int, int] | None = None

    @property
    def classification(self) -> bool:
        return self.task == CLASSIFICATION

    @property
    def gpu(self) -> bool:
        return self.prefer == "gpu"


class Family:
    """One model family. Subclasses set the class attributes and build the estimator."""

    #: the name plans, studies and logged params use ("rf")
    name: ClassVar[str]
    #: what people read ("random forest")
    label: ClassVar[str]
    #: how a tuning template describes it ("Tune a {described} with Optuna ..."); the label
    described: ClassVar[str | None] = None
    #: regular expressions of what users type for it, English and Chinese, on normalised
    #: text (``llm/offline/_lexicon.py``): longer phrases before shorter ones they contain
    words: ClassVar[tuple[str, ...]] = ()
    #: generic words that count only when no family is named ("boosted trees")
    generic_words: ClassVar[tuple[str, ...]] = ()
    #: where its words are tried among the families' (lower first: a family whose words
    #: contain another's, such as linear's bare "linear", is tried late)
    word_order: ClassVar[int] = 50
    tasks: ClassVar[tuple[str, ...]] = (CLASSIFICATION, REGRESSION)
    #: whether a plan may name it (``tools.builtin.ModelName``); else only searches try it
    plan: ClassVar[bool] = True
    #: what it takes, with search ranges and the bounds a plan's params must respect
    params: ClassVar[tuple[Param, ...]] = ()
    #: where it stands among the families ``model="auto"`` searches (None: not searched)
    auto_order: ClassVar[int | None] = None
    #: its small, fast first configuration under a time budget (None: no cheap start), and
    #: that start's place in the queue (lower first)
    low_cost: ClassVar[Mapping[str, Any] | None] = None
    priority: ClassVar[int] = 99
    #: a fit's cost relative to LightGBM's at the same data (FLAML's cost_relative2lgbm)
    cost: ClassVar[float] = 1.0
    #: the parameters that set how long it trains, and its learning rate, if any
    rounds: ClassVar[str | None] = None
    rate: ClassVar[str | None] = None
    native_categorical: ClassVar[bool] = False
    scale_sensitive: ClassVar[bool] = False
    tree: ClassVar[bool] = False
    gpu: ClassVar[GpuSupport | None] = None
    #: the roles (``ROLES``) this family is the default for
    default_for: ClassVar[frozenset[str]] = frozenset()
    #: training rows above which fitting it is noted as slow, and why
    slow_above_rows: ClassVar[int | None] = None
    slow_reason: ClassVar[str] = ""
    #: where it came from: ``mlpilot`` or the package of a plugin (set by the registry)
    provider: str = "mlpilot"

    # -- the estimator --------------------------------------------------------------------
    def make_estimator(self, build: Build, params: dict[str, Any]) -> Any:
        """A fresh estimator for ``build.task`` with mlpilot's defaults, overridden by ``params``."""
        raise NotImplementedError

    def categories_step(self, n: int) -> Any:
        """The pipeline step that hands the first ``n`` columns over as categories."""
        from mlpilot.platform.ml.transformers import CategoryColumns

        return CategoryColumns(n)

    def params_for(self, task: str) -> tuple[Param, ...]:
        """The hyperparameters it takes for ``task``."""
        return tuple(p for p in self.params if p.task in (None, task))

    # -- boosting with pruning ------------------------------------------------------------
    def booster_metric(self, metric: str, n_classes: int) -> str | None:
        """The booster's own evaluation metric that ranks trials like ``metric`` (None: the
        family reports no score while it trains, so a search prunes per fold instead)."""
        return None

    def fit_with_pruning(
        self, estimator: Any, fold: Any, trial: optuna.Trial, metric_name: str
    ) -> Any:
        """Fit a clone of ``estimator`` on the fold, reporting to ``trial`` as it boosts."""
        raise NotImplementedError(f"{self.name} reports no score while it trains")

    # -- devices --------------------------------------------------------------------------
    def fitted_device(self, estimator: Any) -> str | None:
        """``gpu``/``cpu`` as a fitted estimator of this family reports where it trained;
        None when this family's estimators say nothing (cuML's proxies are told apart by
        ``cuml.accel`` itself) or ``estimator`` is not fitted."""
        return None

    def owns(self, estimator: Any) -> bool:
        """Whether ``estimator`` (a pipeline's leaf) is one this family builds."""
        return False

    def describe(self) -> dict[str, Any]:
        """The facts ``mlpilot families list`` shows."""
        gpu = None
        if self.gpu is not None:
            since = f" ≥ {self.gpu.since}" if self.gpu.since else ""
            gpu = f"{self.gpu.engine} ({self.gpu.library}{since})"
        return {
            "name": self.name,
            "label": self.label,
            "tasks": list(self.tasks),
            "plan": self.plan,
            "auto": self.auto_order is not None,
            "native_categorical": self.native_categorical,
            "gpu": gpu,
            "defaults": sorted(self.default_for),
            "provider": self.provider,
        }
