"""The registry of model families: the built-in ones, and plugin families when named.

A plugin package declares its families in the ``mlpilot.families`` entry-point group, one
entry point per family, named as the family (``acme = "acme_trees:AcmeTrees"``). An
installed package's code does not run in mlpilot's process just because it is installed:
its entry points are loaded only when the user names the package (``--plugins`` or the
``family_plugins`` setting). A family whose name is taken is refused, naming both
providers. The pipeline's child process, whose plan the parent validated with the named
plugins loaded, loads the entry point of a family its plan names (``registry().get``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from mlpilot.platform.errors import MlpilotError
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.families._base import AUTO, AUTO_GPU, ROLES, Family

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mlpilot.families"
BUILTIN_PROVIDER = "mlpilot"


class FamilyRegistry:
    """Families by name, in registration order."""

    def __init__(self, families: Iterable[Family] = ()) -> None:
        self._families: dict[str, Family] = {}
        self.loaded: set[str] = set()  # the plugin packages already loaded
        for family in families:
            self.add(family)

    def add(self, family: Family, provider: str = BUILTIN_PROVIDER) -> None:
        existing = self._families.get(family.name)
        if existing is not None:
            raise MlpilotError(
                f"model family {family.name!r} from {provider} clashes with the one "
                f"from {existing.provider}",
                hint=f"rename the family in {provider}, or do not load that package",
            )
        unknown = family.default_for - set(ROLES)
        if unknown:
            raise MlpilotError(
                f"model family {family.name!r} from {provider} claims unknown roles "
                f"{sorted(unknown)}",
                hint=f"roles are {', '.join(ROLES)}",
            )
        family.provider = provider
        self._families[family.name] = family

    def __contains__(self, name: object) -> bool:
        return name in self._families

    def __iter__(self) -> Iterator[Family]:
        return iter(self._families.values())

    def get(self, name: str) -> Family:
        family = self._families.get(name)
        if family is None and os.environ.get(protocol.ENV_RUN_DIR):
            family = _load_for_child(self, name)
        if family is None:
            raise MlpilotError(
                f"unknown model family {name!r}; valid: {', '.join(self._families)}",
                hint="mlpilot families list shows them (a plugin's need --plugins PACKAGE)",
            )
        return family

    def names(self) -> tuple[str, ...]:
        return tuple(self._families)

    def plan_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self if f.plan)

    def auto_names(self, prefer: str = "cpu") -> tuple[str, ...]:
        searched = sorted(
            (f for f in self if f.auto_order is not None), key=lambda f: f.auto_order or 0
        )
        if prefer == "gpu":
            searched = [f for f in searched if f.gpu is not None]
        return tuple(f.name for f in searched)

    def default(self, role: str) -> Family:
        # built-ins first: a plugin cannot take a role over by registering later
        for family in self:
            if role in family.default_for:
                return family
        raise MlpilotError(f"no model family is the default for {role!r}")

    def owner_of(self, estimator: Any) -> Family | None:
        """The family with its own GPU build (``GpuSupport.engine == "native"``) that
        built ``estimator``, a pipeline's leaf; None for any other estimator."""
        for family in self:
            if family.gpu is not None and family.gpu.engine == "native" and family.owns(estimator):
                return family
        return None

    def low_cost_queue(self, families: Iterable[str]) -> list[Family]:
        """Those of ``families`` with a cheap first configuration, in queue order."""
        chosen = [self.get(n) for n in families]
        return sorted((f for f in chosen if f.low_cost is not None), key=lambda f: f.priority)


def _builtin() -> FamilyRegistry:
    from mlpilot.platform.ml.families._builtin import BUILTIN

    return FamilyRegistry(cls() for cls in BUILTIN)


@cache
def registry() -> FamilyRegistry:
    """The process's registry: the built-in families, then plugins as they are loaded."""
    found = _builtin()
    for role in (AUTO, AUTO_GPU):
        found.default(role)  # every role a built-in answers for must have a family
    return found


def load_plugins(packages: Iterable[str], *, strict: bool = True) -> list[Family]:
    """Register the families of the named plugin packages (entry-point group
    ``mlpilot.families``, matched by distribution name or by the entry point's top-level
    module); the families added. A named package that provides none is an error when
    ``strict`` (``--plugins`` also names tool modules, which provide none)."""
    from importlib.metadata import entry_points

    target = registry()
    wanted = [p for p in packages if p and p not in target.loaded]
    if not wanted:
        return []
    points = list(entry_points(group=ENTRY_POINT_GROUP))
    added: list[Family] = []
    for package in wanted:
        mine = [ep for ep in points if package in _providers(ep)]
        if not mine and not strict:
            continue
        if not mine:
            raise MlpilotError(
                f"no model family plugin {package!r} is installed "
                f"(entry-point group {ENTRY_POINT_GROUP})",
                hint="pip install the package, or check its name (mlpilot families list)",
            )
        found = [f for ep in mine for f in _families_of(ep.load(), package)]
        for family in found:
            target.add(family, provider=package)
        target.loaded.add(package)
        added += found
        logger.info("loaded model families from %s: %s", package, [f.name for f in found])
    return added


def _load_for_child(target: FamilyRegistry, name: str) -> Family | None:
    """In a pipeline process: the plugin family its validated plan names, by entry-point
    name (the parent refused the plan unless the user named the plugin)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        provider = _providers(ep)
        package = next(iter(sorted(provider)))
        for family in _families_of(ep.load(), package):
            if family.name not in target:
                target.add(family, provider=package)
        return target._families.get(name)
    return None


def _providers(ep: Any) -> set[str]:
    names = {ep.value.split(":")[0].split(".")[0]}
    dist = getattr(ep, "dist", None)
    if dist is not None:
        names.add(dist.name)
        names.add(dist.name.replace("-", "_"))
    return names


def _families_of(obj: Any, package: str) -> list[Family]:
    """An entry point's object as families: a Family class or instance, or a list of them."""
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    out: list[Family] = []
    for item in items:
        family = item() if isinstance(item, type) and issubclass(item, Family) else item
        if not isinstance(family, Family):
            raise MlpilotError(
                f"plugin {package} offers {item!r} as a model family, which is not a Family",
                hint="an entry point of mlpilot.families names a Family subclass",
            )
        out.append(family)
    return out
