"""The model families mlpilot trains: one ``Family`` object each, in one registry.

Everything else that depends on a family is derived from here: the tools' ``ModelName``,
plan validation, the offline planner's words, the search spaces and time-budget queues,
the ``hpo-<family>`` templates, ``mlpilot families list`` and the README's table. Adding a
family is one module beside these and one line in ``BUILTIN`` (or, from another package,
an entry point in the ``mlpilot.families`` group, loaded only when the user names that
package: ``--plugins`` or the ``family_plugins`` setting).
"""

from __future__ import annotations

from mlpilot.platform.ml.families._base import (
    AUTO,
    AUTO_GPU,
    BOOST_REPORT_EVERY,
    BOOSTING,
    CATEGORICAL_CHOICES,
    CATEGORICAL_PARAM,
    COMPARE,
    IMPORTANCE,
    ROLES,
    SETTLE,
    Build,
    Family,
    GpuSupport,
    Param,
    choice_param,
    cuml_release,
    float_param,
    int_param,
)
from mlpilot.platform.ml.families._builtin import BUILTIN
from mlpilot.platform.ml.families._registry import (
    ENTRY_POINT_GROUP,
    FamilyRegistry,
    load_plugins,
    registry,
)

__all__ = [
    "AUTO",
    "AUTO_GPU",
    "BOOSTING",
    "BOOST_REPORT_EVERY",
    "BUILTIN",
    "CATEGORICAL_CHOICES",
    "CATEGORICAL_PARAM",
    "COMPARE",
    "ENSEMBLE_FAMILY",
    "ENTRY_POINT_GROUP",
    "IMPORTANCE",
    "ROLES",
    "SETTLE",
    "Build",
    "Family",
    "FamilyRegistry",
    "GpuSupport",
    "Param",
    "auto_names",
    "choice_param",
    "cuml_release",
    "default",
    "float_param",
    "get",
    "int_param",
    "load_plugins",
    "names",
    "plan_names",
    "registry",
]

#: what a search's weighted ensemble of its best trials is logged as (``ml/ensemble.py``);
#: not a family: nothing builds one by name
ENSEMBLE_FAMILY = "ensemble"


def get(name: str) -> Family:
    """The family called ``name`` (``MlpilotError`` naming the known ones otherwise)."""
    return registry().get(name)


def names() -> tuple[str, ...]:
    return registry().names()


def plan_names() -> tuple[str, ...]:
    """The families a plan may name."""
    return registry().plan_names()


def auto_names(prefer: str = "cpu") -> tuple[str, ...]:
    """What ``model="auto"`` searches across (those with a GPU path when ``prefer="gpu"``)."""
    return registry().auto_names(prefer)


def default(role: str) -> Family:
    """The family that is the default for ``role`` (``ROLES``)."""
    return registry().default(role)
