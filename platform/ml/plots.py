"""PNG plots logged with every run (matplotlib, headless)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def confusion_matrix_figure(y_true: Any, y_pred: Any, classes: Any) -> Any:
    from sklearn.metrics import confusion_matrix

    plt = _pyplot()
    labels = list(classes)[:30]
    matrix = confusion_matrix(y_true, y_pred, labels=labels)
    fig, ax = plt.subplots(figsize=(5 + 0.2 * len(labels), 4 + 0.2 * len(labels)))
    im = ax.imshow(matrix, cmap="Blues", vmin=0)
    ax.set_xticks(range(len(labels)), [str(c) for c in labels], rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), [str(c) for c in labels])
    for i in range(len(labels)):
        for j in range(len(labels)):
            # the cell's own colour decides: black on the dark cells was unreadable
            colour = text_colour(im.cmap(im.norm(matrix[i, j])))
            ax.text(j, i, int(matrix[i, j]), ha="center", va="center", fontsize=8, color=colour)
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual")
    ax.set_title("Confusion matrix (test split)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def relative_luminance(rgb: Any) -> float:
    """WCAG relative luminance of an sRGB colour given as 0..1 floats (alpha ignored)."""
    channels = []
    for c in list(rgb)[:3]:
        c = float(c)
        channels.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    red, green, blue = channels
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def text_colour(background: Any) -> str:
    """Black or white, whichever contrasts more with ``background`` (WCAG contrast ratio)."""
    luminance = relative_luminance(background)
    on_white = 1.05 / (luminance + 0.05)
    on_black = (luminance + 0.05) / 0.05
    return "white" if on_white > on_black else "black"


def roc_figure(y_true: Any, scores: Any, positive: Any) -> Any:
    from sklearn.metrics import roc_auc_score, roc_curve

    plt = _pyplot()
    truth = np.asarray(y_true) == positive
    fpr, tpr, _ = roc_curve(truth, scores)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot(fpr, tpr, label=f"AUC = {roc_auc_score(truth, scores):.3f}")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"ROC curve (positive class: {positive})")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def residuals_figure(y_true: Any, y_pred: Any) -> Any:
    plt = _pyplot()
    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(y_pred, y_true - y_pred, s=4, alpha=0.4)
    ax.axhline(0, color="grey", linestyle="--")
    ax.set_xlabel("predicted")
    ax.set_ylabel("residual (actual − predicted)")
    ax.set_title("Residuals (test split)")
    fig.tight_layout()
    return fig


def predicted_vs_actual_figure(y_true: Any, y_pred: Any) -> Any:
    plt = _pyplot()
    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(y_true, y_pred, s=4, alpha=0.4)
    low, high = float(min(y_true.min(), y_pred.min())), float(max(y_true.max(), y_pred.max()))
    ax.plot([low, high], [low, high], color="grey", linestyle="--")
    ax.set_xlabel("actual")
    ax.set_ylabel("predicted")
    ax.set_title("Predicted vs actual (test split)")
    fig.tight_layout()
    return fig


def importance_figure(items: list[dict[str, Any]], method: str) -> Any:
    plt = _pyplot()
    items = list(reversed(items))
    fig, ax = plt.subplots(figsize=(6, 0.35 * len(items) + 1.2))
    ax.barh([str(i["feature"]) for i in items], [i["importance"] for i in items])
    ax.set_xlabel(f"importance ({method})")
    ax.set_title("Feature importance")
    fig.tight_layout()
    return fig


def close(fig: Any) -> None:
    _pyplot().close(fig)
