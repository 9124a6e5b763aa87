"""The words every part of mlpilot shares: run states, tag names, metrics.

Names of states, MLflow tags, Optuna attributes and metrics are spelled here and nowhere
else; the orchestrator, the runtime, the registry, the CLI, the dashboard and the tools
derive from these tables (DESIGN §1, "one vocabulary module").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "CLASSIFICATION_METRICS",
    "LOWER_IS_BETTER",
    "METRICS",
    "REGRESSION_METRICS",
    "Metric",
    "RunState",
    "default_metric",
    "direction",
    "is_better",
]


# -- run states (DESIGN §2) ---------------------------------------------------------------------
class RunState(str, Enum):
    """A run's state in MongoDB and the CLI; the terminal ones know their MLflow status."""

    RECEIVED = "RECEIVED"
    PLANNING = "PLANNING"
    VALIDATING = "VALIDATING"
    GENERATING = "GENERATING"
    RUNNING = "RUNNING"
    RECORDING = "RECORDING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        return self in _MLFLOW_STATUS

    @property
    def mlflow_status(self) -> str:
        """``FINISHED``, ``FAILED`` or ``KILLED`` for a terminal state, else ``RUNNING``."""
        return _MLFLOW_STATUS.get(self, "RUNNING")

    @classmethod
    def from_mlflow(cls, status: str) -> RunState | None:
        """The terminal state an MLflow run status ends as (None while it runs)."""
        return next((s for s, m in _MLFLOW_STATUS.items() if m == status), None)


_MLFLOW_STATUS = {
    RunState.SUCCEEDED: "FINISHED",
    RunState.FAILED: "FAILED",
    RunState.CANCELLED: "KILLED",
}
STATES = tuple(s.value for s in RunState)
TERMINAL_STATES = tuple(s.value for s in RunState if s.terminal)
ACTIVE_STATES = tuple(s.value for s in RunState if not s.terminal)
#: an MLflow run status → the mlpilot state it ends as
MLFLOW_TO_STATE = {status: state.value for state, status in _MLFLOW_STATUS.items()}
#: what an ``optuna`` trial state is as a nested MLflow run
TRIAL_STATE_TO_MLFLOW = {"COMPLETE": "FINISHED", "PRUNED": "FINISHED", "FAIL": "FAILED"}

# -- MLflow tags (DESIGN §4) ---------------------------------------------------------------------
TAG_KIND = "mlpilot.kind"
TAG_SESSION = "mlpilot.session_id"
TAG_PROMPT = "mlpilot.prompt"
TAG_PLANNER = "mlpilot.planner"
TAG_ENGINE = "mlpilot.engine"
TAG_ENGINE_REQUESTED = "mlpilot.engine.requested"
TAG_ENGINE_USED = "mlpilot.engine.used"
TAG_ENGINE_REASON = "mlpilot.engine.reason"
#: an auto run's GPU leg failed and the run reran on the CPU: the GPU leg's error
TAG_ENGINE_FALLBACK_ERROR = "mlpilot.engine.fallback_error"
TAG_TEMPLATE = "mlpilot.template"
TAG_FINGERPRINT = "mlpilot.dataset_fingerprint"
TAG_VERSION = "mlpilot.version"
TAG_SOURCE = "mlpilot.source"
TAG_STATE = "mlpilot.state"
TAG_TARGET = "mlpilot.target"
TAG_TASK = "mlpilot.task"
TAG_METRIC = "mlpilot.metric"
TAG_ERROR = "mlpilot.error"
TAG_ERROR_STAGE = "mlpilot.error.stage"
#: the positive class of a binary task (the rule: ``metrics.positive_label``)
TAG_POSITIVE_CLASS = "mlpilot.positive_class"
TAG_COMPARE_GPU = "mlpilot.compare.gpu"
#: a run started from a saved plan (``mlpilot run --plan FILE``): the file and its digest
TAG_PLAN_FILE = "mlpilot.plan.file"
TAG_PLAN_SHA256 = "mlpilot.plan.sha256"
#: {file: SHA-256} of a logged model's artifacts, checked before every load (DESIGN §8)
TAG_MODEL_DIGESTS = "mlpilot.model.sha256"
# what the pipeline process ran under (DESIGN §8)
TAG_CONTAINMENT_USER = "mlpilot.containment.user"
TAG_CONTAINMENT_NETWORK = "mlpilot.containment.network"
#: where one stage really ran: ``mlpilot.device.<stage>`` = gpu, cpu or "mixed (… on the CPU)"
TAG_DEVICE_PREFIX = "mlpilot.device."
#: why a stage's speedup was not reported: ``mlpilot.speedup.<stage>`` = the reason
TAG_SPEEDUP_PREFIX = "mlpilot.speedup."
#: the engine a trial was scored on (nested trial runs; Optuna user attribute too)
TAG_TRIAL_ENGINE = "mlpilot.trial_engine"
#: a nested trial run whose configuration the meta-learned prior chose (nearest, portfolio)
TAG_TRIAL_WARM_START = "mlpilot.trial_warm_start"
# registry lineage on model versions
TAG_SOURCE_RUN = "mlpilot.source_run"
TAG_METRIC_VALUE = "mlpilot.metric_value"
#: where a run's cv_ metrics come from (a search: the chosen configuration's out-of-fold
#: scores on the search's folds, selected among many, hence optimistic)
TAG_CV_SOURCE = "mlpilot.cv_source"
CV_SOURCE_SEARCH = "search: the chosen model's out-of-fold scores (selected, optimistic)"
# the Optuna study of a run
TAG_OPTUNA_STUDY = "mlpilot.optuna.study"
TAG_OPTUNA_STORAGE = "mlpilot.optuna.storage"
TAG_OPTUNA_BEST_PARAMS = "mlpilot.optuna.best_params"
#: where a search's first trials came from: nearest, portfolio, unavailable or off
TAG_OPTUNA_WARM_START = "mlpilot.optuna.warm_start"
# nested trial runs
TAG_STUDY = "mlpilot.study"
TAG_TRIAL_NUMBER = "mlpilot.trial_number"
TAG_TRIAL_STATE = "mlpilot.trial_state"
TAG_WORKER = "mlpilot.worker"
# values of TAG_KIND
KIND_AGENT_RUN = "agent_run"
KIND_PIPELINE = "pipeline"
KIND_TRIAL = "trial"
KIND_ENGINE_LEG = "engine_leg"
AGENT_RUNS_FILTER = f"tags.`{TAG_KIND}` = '{KIND_AGENT_RUN}'"
#: tags a registered version copies from its source run (lineage)
LINEAGE_RUN_TAGS = (
    TAG_PROMPT,
    TAG_FINGERPRINT,
    TAG_SESSION,
    TAG_TARGET,
    TAG_TASK,
    TAG_METRIC,
    TAG_TEMPLATE,
)

# -- Optuna attributes ---------------------------------------------------------------------------
#: the study's recipe (``hpo.spec.StudySpec``)
ATTR_SPEC = "mlpilot"
#: which process ran a trial (host, pid, start time), for the reaper
ATTR_WORKER = "mlpilot.worker"
ATTR_FAIL_REASON = "mlpilot.fail_reason"
ATTR_EARLY_STOPPED = "mlpilot.early_stopped"
#: the engine a trial was scored on (one study keeps one engine)
ATTR_ENGINE = "mlpilot.engine"
#: where an enqueued warm-start trial's configuration came from (nearest or portfolio)
ATTR_WARM_START = "mlpilot.warm_start"
#: where a trial scored in another process (``mlpilot worker``, a Dask worker) trained:
#: its model's device record, merged into the parent's ``tune`` stage
ATTR_DEVICE = "mlpilot.device"
#: a trial's mean seconds to fit one fold (what refitting its configuration will cost)
ATTR_FIT_S = "mlpilot.fit_s"
#: the rows of each training fold a trial fitted on (fewer than all on a cheap-first sample)
ATTR_TRAIN_ROWS = "mlpilot.train_rows"
#: a time-budgeted search's sample of each training fold and how it grew (study attribute;
#: ``ml/hpo/sampling.py``)
ATTR_SAMPLE = "mlpilot.sample"
#: a trial's score on each fold, in the metric's natural direction (its out-of-fold scores)
ATTR_FOLD_VALUES = "mlpilot.fold_values"
#: a worker's trial's out-of-fold output, encoded (``hpo.oof_store``), for the ensemble
ATTR_OOF = "mlpilot.oof"
#: the fingerprint of the folds that output was scored on (``hpo.oof_store.fingerprint``)
ATTR_OOF_FOLDS = "mlpilot.oof_folds"
#: why a time-budgeted search moved on at a plateau instead of stopping (study attribute)
ATTR_MOVES = "mlpilot.moves"


def device_tag(stage: str) -> str:
    return f"{TAG_DEVICE_PREFIX}{stage}"


def speedup_tag(stage: str) -> str:
    return f"{TAG_SPEEDUP_PREFIX}{stage}"


# -- metrics (DESIGN §3) -------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    name: str
    task: str  # classification | regression
    direction: str  # maximize | minimize
    binary_only: bool = False


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", "classification", "maximize"),
        Metric("balanced_accuracy", "classification", "maximize"),
        Metric("f1", "classification", "maximize"),
        Metric("precision", "classification", "maximize"),
        Metric("recall", "classification", "maximize"),
        Metric("roc_auc", "classification", "maximize"),
        Metric("pr_auc", "classification", "maximize", binary_only=True),
        Metric("log_loss", "classification", "minimize"),
        Metric("rmse", "regression", "minimize"),
        Metric("mae", "regression", "minimize"),
        Metric("r2", "regression", "maximize"),
    )
}
CLASSIFICATION_METRICS = tuple(n for n, m in METRICS.items() if m.task == "classification")
REGRESSION_METRICS = tuple(n for n, m in METRICS.items() if m.task == "regression")
LOWER_IS_BETTER = frozenset(n for n, m in METRICS.items() if m.direction == "minimize")


def direction(metric: str) -> str:
    """Optuna's direction for a metric (``test_rmse`` and ``cv_rmse`` count as ``rmse``)."""
    return "minimize" if _base(metric) in LOWER_IS_BETTER else "maximize"


def is_better(metric: str, value: float, than: float) -> bool:
    return value < than if direction(metric) == "minimize" else value > than


def default_metric(task: str, n_classes: int = 2) -> str:
    if task == "regression":
        return "rmse"
    return "roc_auc" if n_classes == 2 else "accuracy"


def _base(metric: str) -> str:
    for prefix in ("test_", "cv_", "hpo_"):
        if metric.startswith(prefix) and metric[len(prefix) :] in METRICS:
            return metric[len(prefix) :]
    return metric
