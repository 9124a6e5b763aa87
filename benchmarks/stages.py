"""The write-up's stage table, reproducible: each row timed on the CPU engine and, where
usable, on the GPU engine, with the device each row really ran on.

Rows (default sizes fit 2 cores; ``--full`` runs the write-up's sizes):

1. load      — mlpilot's ``load_data`` step on a CSV of ``--rows`` rows (1M; full 10M)
2. clean     — mlpilot's ``clean_data`` step on the same rows
3. features  — feature engineering to 50 columns in pandas (date parts, per-group
               statistics, ratios, one-hot encodings) on the same rows
4. train rf  — random forest training (mlpilot's ``train_model``) on ``--forest-rows``
               (200k; full 1M), then the CPU alternatives a user would pick: hgb, lgbm, xgb
5. search rf — a ``--trials`` (100) trial search (``optimize_model``, 3-fold CV, no early
               stopping) on ``--search-rows`` (50k; full 200k), then hgb, lgbm and xgb

Each engine runs in its own process, started with the engine's exact command
(``python -m cudf.pandas -m cuml.accel`` for the GPU); rows come back with their device as
``ml/devices.py`` measured it. Without a usable GPU (the probe decides) the GPU column says
"unavailable" with the reason; nothing is estimated. Ratios are CPU seconds over GPU
seconds, only for rows that ran on the GPU. Results go to the ``benchmarks`` collection
(``--no-store`` to skip) for the dashboard's speedups page.

    .venv/bin/python benchmarks/stages.py [--full] [--rows N] [--forest-rows N]
        [--search-rows N] [--trials N] [--engines cpu,gpu] [--json FILE] [--no-store]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

CHILD_ENV = "MLPILOT_BENCH_STAGES"  # JSON task for the child process
FAMILIES = ("rf", "hgb", "lgbm", "xgb")
DEFAULTS = {"rows": 1_000_000, "forest_rows": 200_000, "search_rows": 50_000, "trials": 100}
FULL = {"rows": 10_000_000, "forest_rows": 1_000_000, "search_rows": 200_000, "trials": 100}


# -- the child: one engine, every row ------------------------------------------------------------
def feature_frame(df: Any) -> Any:
    """50 numeric features from the sales table, in pandas (accelerated by cudf.pandas)."""
    import numpy as np
    import pandas as pd

    out = pd.DataFrame(index=df.index)
    date = pd.to_datetime(df["date"])
    for part in ("year", "month", "day", "dayofweek", "dayofyear", "quarter"):
        out[f"date_{part}"] = getattr(date.dt, part)
    out["weekend"] = (date.dt.dayofweek >= 5).astype("int8")
    for key in ("store_id", "sku", "region", "product_category"):
        grouped = df.groupby(key)["price"]
        out[f"{key}_price_mean"] = grouped.transform("mean")
        out[f"{key}_price_std"] = grouped.transform("std").fillna(0.0)
        out[f"{key}_count"] = grouped.transform("count")
        out[f"{key}_price_ratio"] = df["price"] / out[f"{key}_price_mean"]
    out["temp_mean_by_region"] = df.groupby("region")["temperature"].transform("mean")
    numeric = df[["price", "temperature"]].astype("float64").fillna(0.0)
    for name in numeric:
        out[f"{name}_log"] = np.log1p(numeric[name].clip(lower=0))
        out[f"{name}_sq"] = numeric[name] ** 2
        out[f"{name}_rank"] = numeric[name].rank(pct=True)
    out["price_x_temp"] = numeric["price"] * numeric["temperature"]
    out["promo_x_price"] = df["promotion"].astype("float64") * numeric["price"]
    out["holiday_x_weekend"] = df["holiday"].astype("int8") * out["weekend"]
    dummies = pd.get_dummies(df[["region", "product_category"]], dtype="int8")
    out = pd.concat([out, dummies], axis=1)
    filler = 50 - out.shape[1]
    for i in range(max(filler, 0)):  # lags within a store, up to 50 columns in all
        out[f"price_lag{i + 1}"] = df.groupby("store_id")["price"].shift(i + 1).fillna(0.0)
    return out.iloc[:, :50]


def _run(path: str, engine: str, folder: Path) -> Any:
    from mlpilot.platform.ml.context import PipelineRun
    from mlpilot.tracking.run_logger import NullRunLogger

    folder.mkdir(parents=True, exist_ok=True)
    return PipelineRun(
        plan={}, seed=7, data_path=path, run_dir=folder, logger=NullRunLogger(), engine=engine
    )


def _row(name: str, run: Any, stage: str, **extra: Any) -> dict[str, Any]:
    record = run.result.devices.get(stage) or {}
    return {"row": name, "seconds": run.timings.get(stage), "device": record, **extra}


def child_rows(task: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row on this process's engine (what the parent started it with)."""
    from mlpilot.platform.ml import steps

    engine, work = task["engine"], Path(task["work"])
    rows: list[dict[str, Any]] = []
    run = _run(task["data"], engine, work / "prep")
    with run:
        steps.load_data(run, task["data"], target="sales")
        steps.clean_data(run)
        with run.stage("features"):
            X, _ = run.data.train()
            frame = feature_frame(X)
    n = task["rows"]
    rows.append(_row("load", run, "load", rows=n))
    rows.append(_row("clean", run, "clean", rows=n))
    rows.append(_row("features", run, "features", rows=len(frame), columns=frame.shape[1]))
    del frame, run
    for family in FAMILIES:
        run = _run(task["forest"], engine, work / f"train-{family}")
        with run:
            steps.load_data(run, task["forest"], target="sales")
            steps.train_model(run, model=family)
        rows.append(_row(f"train {family}", run, "train", rows=task["forest_rows"]))
    for family in FAMILIES:
        run = _run(task["search"], engine, work / f"search-{family}")
        with run:
            steps.load_data(run, task["search"], target="sales")
            steps.optimize_model(run, model=family, trials=task["trials"], early_stopping=False)
        rows.append(
            _row(f"search {family}", run, "tune", rows=task["search_rows"], trials=task["trials"])
        )
    return rows


# -- the parent: data, one process per engine, the table ---------------------------------------------
def write_data(folder: Path, sizes: dict[str, int]) -> dict[str, str]:
    from mlpilot.platform.datasets import make_sales

    paths = {}
    for key, seed in (("rows", 1), ("forest_rows", 2), ("search_rows", 3)):
        path = folder / f"sales-{sizes[key]}.csv"
        make_sales(sizes[key], seed=seed).to_csv(path, index=False)
        paths[key] = str(path)
    return paths


def run_engine(
    engine: str, paths: dict[str, str], sizes: dict[str, int], work: Path
) -> tuple[list[dict[str, Any]] | None, str, float]:
    """The rows of one engine from its own process, the reason when it has none, wall s."""
    from mlpilot.platform.config import get_settings
    from mlpilot.platform.execution import engine_command, leg_env
    from mlpilot.platform.execution.sandbox import Limits, run_child

    out = work / f"{engine}.json"
    task = {
        "engine": engine,
        "work": str(work / engine),
        "data": paths["rows"],
        "forest": paths["forest_rows"],
        "search": paths["search_rows"],
        **sizes,
        "out": str(out),
    }
    env = leg_env(get_settings(), engine, {CHILD_ENV: json.dumps(task)})
    env.pop("MLFLOW_RUN_ID", None)
    command = engine_command(engine, str(Path(__file__).resolve()), [])
    child = run_child(
        command, cwd=work, env=env, limits=Limits(timeout_s=6 * 3600), log_prefix=f"{engine}-"
    )
    if not out.exists():
        tail = (work / f"{engine}-stderr.txt").read_text(errors="replace").strip().splitlines()[-3:]
        return None, f"the {engine} process failed: {' '.join(tail)[-300:]}", child.duration_s
    return json.loads(out.read_text()), "", child.duration_s


def gpu_availability() -> tuple[bool, str]:
    from mlpilot.platform.execution import cuda_device_status, gpu_probe

    device = cuda_device_status()
    if not device.usable:
        return False, device.reason
    verdict = gpu_probe()
    return verdict.usable, verdict.reason


def table(
    cpu: list[dict[str, Any]], gpu: list[dict[str, Any]] | None, gpu_reason: str
) -> list[dict[str, Any]]:
    from mlpilot.platform.ml.devices import describe_device

    by_name = {r["row"]: r for r in gpu or []}
    lines = []
    for row in cpu:
        other = by_name.get(row["row"])
        gpu_device = describe_device(other["device"]) if other else None
        # every row measured on both engines gets its ratio and the GPU leg's GPU share
        ratio = round(row["seconds"] / other["seconds"], 2) if other and other["seconds"] else None
        share = ((other or {}).get("device") or {}).get("gpu_share")
        lines.append(
            {
                **{k: v for k, v in row.items() if k not in ("seconds", "device")},
                "cpu_s": row["seconds"],
                "cpu_device": describe_device(row["device"]),
                "gpu_s": other["seconds"] if other else None,
                "gpu_device": gpu_device or "unavailable",
                "speedup": ratio,
                "gpu_share": share,
            }
        )
    return lines


def print_table(
    lines: list[dict[str, Any]], hardware: dict[str, Any], wall: dict[str, float]
) -> None:
    print(
        f"machine: {hardware.get('cpu')} ({hardware.get('cpu_count')} cores, "
        f"{hardware.get('memory_gb')} GiB), GPU: {hardware.get('gpu') or 'none'}"
    )
    print("| row | size | CPU s | CPU device | GPU s | GPU device | CPU/GPU | GPU share |")
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        size = f"{line.get('rows', '')} rows"
        if line.get("columns"):
            size += f", {line['columns']} columns"
        if line.get("trials"):
            size += f", {line['trials']} trials"
        gpu_s = f"{line['gpu_s']:.2f}" if line["gpu_s"] is not None else "—"
        ratio = f"{line['speedup']:.1f}×" if line["speedup"] else "—"
        share = f"{line['gpu_share']:.0%}" if line.get("gpu_share") is not None else "—"
        print(
            f"| {line['row']} | {size} | {line['cpu_s']:.2f} | {line['cpu_device']} | "
            f"{gpu_s} | {line['gpu_device']} | {ratio} | {share} |"
        )
    print("whole process: " + ", ".join(f"{k} {v:.1f} s" for k, v in wall.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the write-up's sizes")
    for key, default in DEFAULTS.items():
        parser.add_argument(
            f"--{key.replace('_', '-')}", type=int, default=None, help=f"default {default}"
        )
    parser.add_argument("--engines", default="cpu,gpu")
    parser.add_argument("--json", default=None, help="also write the result here")
    parser.add_argument(
        "--no-store", action="store_true", help="do not save to the benchmarks collection"
    )
    args = parser.parse_args(argv)
    base = FULL if args.full else DEFAULTS
    sizes = {k: getattr(args, k) or v for k, v in base.items()}
    from mlpilot.platform.agent.compare import hardware_description

    with tempfile.TemporaryDirectory(prefix="mlpilot-bench-") as tmp:
        work = Path(tmp)
        paths = write_data(work, sizes)
        results: dict[str, Any] = {}
        wall: dict[str, float] = {}
        gpu_ok, gpu_reason = gpu_availability() if "gpu" in args.engines else (False, "not asked")
        for engine in args.engines.split(","):
            if engine == "gpu" and not gpu_ok:
                continue
            rows, why, wall[engine] = run_engine(engine, paths, sizes, work)
            results[engine] = rows
            if engine == "gpu" and rows is None:
                gpu_reason = why
            elif rows is None:
                print(why, file=sys.stderr)
                return 1
    hardware = hardware_description()
    lines = table(results["cpu"], results.get("gpu"), gpu_reason)
    print_table(lines, hardware, wall)
    if results.get("gpu") is None:
        print(f"GPU: unavailable ({gpu_reason}); no GPU figure is estimated")
    doc = {
        "kind": "stages",
        "sizes": sizes,
        "rows": lines,
        "wall_s": wall,
        "gpu": {"available": results.get("gpu") is not None, "reason": gpu_reason or "ran"},
        "hardware": hardware,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2))
    if not args.no_store:
        from mlpilot.platform.config import get_settings
        from mlpilot.tracking.metadata import connect

        connect(get_settings()).save_benchmark(uuid.uuid4().hex, doc)
    return 0


def child_main() -> int:
    task = json.loads(os.environ[CHILD_ENV])
    rows = child_rows(task)
    Path(task["out"]).write_text(json.dumps(rows, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(child_main() if os.environ.get(CHILD_ENV) else main())
