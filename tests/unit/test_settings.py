from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import SettingsError


def test_embedded_defaults_live_under_home(tmp_path: Path) -> None:
    s = Settings.from_env({"MLPILOT_HOME": str(tmp_path)})
    assert s.tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert s.artifact_root == (tmp_path / "artifacts").as_uri()
    assert s.mongo_uri is None and s.mongo_db == "mlpilot"
    assert s.optuna_storage == str(tmp_path / "optuna" / "journal.log")
    assert (s.engine, s.llm, s.experiment) == ("auto", "auto", "mlpilot")


def test_environment_overrides(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "MLPILOT_HOME": str(tmp_path),
            "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
            "MLPILOT_MONGO_URI": "mongodb://db:27017",
            "MLPILOT_MONGO_DB": "exp",
            "MLPILOT_ENGINE": "CPU",
            "MLPILOT_LLM": "offline",
            "NVIDIA_API_KEY": "nvapi-x",
            "MLPILOT_LLM_THINKING_BUDGET": "512",
        }
    )
    assert s.tracking_uri == "http://127.0.0.1:5000" and s.artifact_root is None
    assert (s.mongo_uri, s.mongo_db, s.engine, s.llm) == (
        "mongodb://db:27017",
        "exp",
        "cpu",
        "offline",
    )
    assert s.llm_api_key == "nvapi-x" and s.llm_thinking_budget == 512
    assert "nvapi-x" not in repr(s)


def test_invalid_values_name_the_variable_and_the_choices(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"MLPILOT_HOME": str(tmp_path), "MLPILOT_ENGINE": "tpu"})
    assert "MLPILOT_ENGINE" in info.value.one_line() and "compare" in info.value.one_line()


def test_toml_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mlpilot.toml").write_text(
        'MLPILOT_ENGINE = "cpu"\nMLPILOT_EXPERIMENT = "from-toml"\n'
    )
    monkeypatch.chdir(tmp_path)
    s = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "h"), "MLPILOT_EXPERIMENT": "from-env"})
    assert s.engine == "cpu" and s.experiment == "from-env"


def _settings_file(tmp_path: Path, text: str) -> tuple[Path, Path]:
    """A home holding an ``mlpilot.toml`` only its owner may write."""
    home = tmp_path / "home"
    home.mkdir()
    toml = home / "mlpilot.toml"
    toml.write_text(text)
    toml.chmod(0o644)
    return home, toml


def test_a_settings_file_others_can_write_is_not_read(tmp_path: Path) -> None:
    home, toml = _settings_file(tmp_path, 'MLPILOT_ENGINE = "cpu"\n')
    assert Settings.from_env({"MLPILOT_HOME": str(home)}).engine == "cpu"
    toml.chmod(0o666)
    with pytest.raises(SettingsError, match="is not read"):
        Settings.from_env({"MLPILOT_HOME": str(home)})


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another account")
def test_a_settings_file_of_another_account_is_not_read(tmp_path: Path) -> None:
    home, toml = _settings_file(tmp_path, 'MLPILOT_CHILD_USER = "none"\n')
    os.chown(toml, 65534, 65534)  # nobody: as a pipeline's account would leave it
    with pytest.raises(SettingsError, match="owned by another account"):
        Settings.from_env({"MLPILOT_HOME": str(home)})
