"""The benchmark report's plots (matplotlib, Agg): bars for every provider, page size and depth, and each measure
against recursion depth; and the inline form the Dagster UI shows."""

from __future__ import annotations

import base64
from pathlib import Path

import polars as pl


def set_rows(scores: pl.DataFrame, question_set: str) -> pl.DataFrame:
    """The scores of one question set, in provider, page size and depth order."""
    return scores.filter(pl.col("question_set") == question_set).sort("provider", "page_size", "depth")


def plot_measures(scores: pl.DataFrame, *, offline: bool) -> list[str]:
    """The measures plotted: CR and CP when judged, the qrels measures when the set has qrels."""
    measures = [] if offline else ["cr", "cp"]
    if scores.height and scores["n_qrels"].max():
        measures += ["P@p (qrels, distinct papers)", "nDCG@10", "AP@p", "R@p"]
    return measures


def plot_scores(
    scores: pl.DataFrame, path: Path, *, offline: bool, title_suffix: str = "", question_set: str = "all"
) -> Path | None:
    """Bars for every provider, page size and depth, one panel (own y-axis) per measure, bootstrap CIs as errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = set_rows(scores, question_set)
    measures = plot_measures(frame, offline=offline)
    if frame.height == 0 or not measures:
        return None
    groups = sorted({(r["page_size"], r["depth"]) for r in frame.iter_rows(named=True)})
    providers = sorted(set(frame["provider"].to_list()))
    fig, axes = plt.subplots(
        len(measures), 1, figsize=(max(7, 0.9 * len(groups) * len(providers)), 2.8 * len(measures))
    )
    axes = [axes] if len(measures) == 1 else list(axes)
    width = 0.8 / max(1, len(providers))
    for ax, measure in zip(axes, measures, strict=True):
        low, high = (
            (f"{measure}_low", f"{measure}_high")
            if measure in ("cr", "cp")
            else (f"{measure} low", f"{measure} high")
        )
        top = 0.0
        for i, provider in enumerate(providers):
            values, errors_low, errors_high = [], [], []
            for page, depth in groups:
                match = frame.filter(
                    (pl.col("provider") == provider)
                    & (pl.col("page_size") == page)
                    & (pl.col("depth") == depth)
                )
                row = match.row(0, named=True) if match.height else {}
                value = row.get(measure)
                value = 0.0 if value is None or value != value else value
                values.append(value)
                errors_low.append(max(0.0, value - (row.get(low) or value)))
                errors_high.append(max(0.0, (row.get(high) or value) - value))
                top = max(top, (row.get(high) or value) if row else 0.0)
            xs = [g + (i - (len(providers) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(xs, values, width, yerr=[errors_low, errors_high], capsize=2, label=provider)
        ax.set_xticks(range(len(groups)), [f"p={p}\nd={d}" for p, d in groups], fontsize=8)
        ax.set_ylim(0, max(0.02, top * 1.15))
        ax.set_ylabel(measure.upper() if measure in ("cr", "cp") else measure)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, ncol=len(providers))
    axes[0].set_title(f"Every page size p and depth d ({question_set} questions){title_suffix}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_convergence(
    scores: pl.DataFrame, path: Path, *, offline: bool, title_suffix: str = "", question_set: str = "all"
) -> Path | None:
    """Measure vs recursion depth, one line per provider and page size, one panel per measure (own y-axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = set_rows(scores, question_set)
    measures = plot_measures(frame, offline=offline)
    if frame.height == 0 or not measures:
        return None
    fig, axes = plt.subplots(1, len(measures), figsize=(4.2 * len(measures), 3.8), sharex=True)
    axes = [axes] if len(measures) == 1 else list(axes)
    for ax, measure in zip(axes, measures, strict=True):
        top = 0.0
        for (provider, page), group in frame.group_by(["provider", "page_size"], maintain_order=True):
            values = [v if v is not None else float("nan") for v in group[measure].to_list()]
            ax.plot(group["depth"].to_list(), values, marker="o", label=f"{provider} p={page}")
            top = max([top, *(v for v in values if v == v)])
        ax.set_xlabel("recursion depth")
        ax.set_ylabel(measure.upper() if measure in ("cr", "cp") else measure)
        ax.set_ylim(0, max(0.02, top * 1.15))
        ax.set_xticks(sorted(set(frame["depth"].to_list())))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(
        f"Top-p list (RRF across levels) vs depth, {question_set} questions{title_suffix}", fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def image_markdown(path: Path, alt: str) -> str:
    """An inline base64 PNG, so the Dagster UI shows the plot in the asset's metadata."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"
