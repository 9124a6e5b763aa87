"""The package layout of DESIGN §1: `platform` never shadows the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib
from helpers import REPO


def test_import_platform_from_repo_root_is_stdlib() -> None:
    code = "import platform, sys; print(platform.__file__); print(platform.python_version())"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    path, version = done.stdout.split()
    assert not Path(path).resolve().is_relative_to(REPO), f"platform resolved to {path}"
    assert version == ".".join(map(str, sys.version_info[:3]))


def test_platform_folder_has_no_init() -> None:
    assert not (REPO / "platform" / "__init__.py").exists()


def test_mlpilot_platform_imports_from_the_folder() -> None:
    import mlpilot.platform.config as config

    assert Path(config.__file__).resolve().is_relative_to(REPO / "platform")


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    mapping = {
        "platform": "mlpilot.platform",
        "tracking": "mlpilot.tracking",
        "adapters": "mlpilot.adapters",
        "dashboards": "mlpilot.dashboards",
    }
    for top, name in mapping.items():
        for init in (REPO / top).rglob("__init__.py"):
            package = ".".join([name, *init.parent.relative_to(REPO / top).parts])
            assert package in listed, f"{package} is missing from [tool.setuptools] packages"


def test_cli_help_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys\n"
        "from mlpilot.platform.cli.main import app\n"
        "heavy = [m for m in ('mlflow', 'sklearn', 'dash', 'pandas', 'optuna', 'openai') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_docker_files_reference_what_exists() -> None:
    import yaml

    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    for service in compose["services"].values():
        build = service.get("build")
        if build:
            assert (REPO / "docker" / build["context"] / build["dockerfile"]).is_file()
    for name in ("Dockerfile", "Dockerfile.gpu"):
        for line in (REPO / "docker" / name).read_text().splitlines():
            if line.startswith("COPY "):
                for source in line.split()[1:-1]:
                    assert (REPO / source).exists(), f"{name}: {source}"
