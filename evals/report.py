"""The benchmark report: markdown tables and matplotlib PNGs (CR / CP per provider and mode, and the convergence
graph: metric vs recursion depth per provider and page size). The judge-agreement figure is printed beside every CR
table, the CP definition is stated, and an offline judge is labelled as such wherever its numbers appear."""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from evals.metrics import CP_DEFINITION
from lumina_assets.core import tables


def _fmt(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def agreement_line(agreement: dict[str, Any] | None) -> str:
    if not agreement:
        return "**Judge agreement:** not measured (no BEIR qrels available for validation)."
    return (
        f"**Judge agreement with human qrels** ({agreement.get('set', 'SciFact train')}, held-out pairs, "
        f"judge `{agreement['judge']}`): Cohen's κ = {agreement['kappa']:.3f}, precision {agreement['precision']:.3f}, "
        f"recall {agreement['recall']:.3f}, accuracy {agreement['accuracy']:.3f}, n = {agreement['n']} pairs "
        f"({agreement['positives']} relevant, {agreement.get('queries', '?')} queries, {agreement.get('failures', 0)} failures; "
        f"{agreement.get('pairs_note', 'held-out pairs')})."
    )


def judge_banner(judge_name: str, offline: bool) -> str:
    if offline:
        return (
            f"> **OFFLINE JUDGE.** Verdicts come from `{judge_name}`: embedding-cosine thresholds calibrated on SciFact "
            "train qrels, not from an LLM. They are a stand-in for the paper's GPT-4o judge; compare providers with "
            "each other here, not with published LLM-judged numbers."
        )
    return f"> Judge: `{judge_name}` at temperature 0, prompts verbatim from the Lumina paper."


def summary_table(scores: pl.DataFrame, agreement: dict[str, Any] | None, question_set: str = "all") -> str:
    """CR / CP per provider and mode (zero-shot = depth 0, recursive = deepest level) and page size."""
    frame = scores.filter(pl.col("question_set") == question_set)
    if frame.height == 0:
        return "_no scores_"
    max_depth = frame.group_by("provider", "page_size").agg(pl.col("depth").max().alias("max_depth"))
    frame = frame.join(max_depth, on=["provider", "page_size"])
    frame = frame.filter((pl.col("depth") == 0) | (pl.col("depth") == pl.col("max_depth")))
    lines = [
        agreement_line(agreement),
        "",
        "| provider | mode | p | depth | CR [95% CI] | CP [95% CI] | n | judge failures (CR/CP) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.sort("provider", "page_size", "depth").iter_rows(named=True):
        mode = "zero-shot" if row["depth"] == 0 else "recursive"
        lines.append(
            f"| {row['provider']} | {mode} | {row['page_size']} | {row['depth']} | "
            f"{_fmt(row['cr'], row['cr_low'], row['cr_high'])} | {_fmt(row['cp'], row['cp_low'], row['cp_high'])} | "
            f"{row['n']} | {row['cr_failures']}/{row['cp_failures']} |"
        )
    return "\n".join(lines)


def depth_table(scores: pl.DataFrame, agreement: dict[str, Any] | None, question_set: str = "all") -> str:
    frame = scores.filter(pl.col("question_set") == question_set).sort("provider", "page_size", "depth")
    lines = [
        agreement_line(agreement),
        "",
        "| provider | p | depth | CR [95% CI] | CP [95% CI] | contexts/question | nDCG@10 | AP@10 | R@10 | R@all | RR | n (qrels) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.iter_rows(named=True):
        lines.append(
            f"| {row['provider']} | {row['page_size']} | {row['depth']} | {_fmt(row['cr'], row['cr_low'], row['cr_high'])} | "
            f"{_fmt(row['cp'], row['cp_low'], row['cp_high'])} | {_num(row['mean_contexts'])} | {_num(row.get('nDCG@10'))} | "
            f"{_num(row.get('AP@10'))} | {_num(row.get('R@10'))} | {_num(row.get('R@all'))} | {_num(row.get('RR'))} | "
            f"{row['n_qrels']} |"
        )
    return "\n".join(lines)


def plot_cr_cp(scores: pl.DataFrame, path: Path, title_suffix: str = "") -> Path:
    """Grouped bars: CR and CP per provider × mode (largest page size), with the bootstrap CI as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = scores.filter(pl.col("question_set") == "all")
    page = frame["page_size"].max()
    frame = frame.filter(pl.col("page_size") == page)
    max_depth = frame["depth"].max()
    rows = frame.filter(pl.col("depth").is_in([0, max_depth])).sort("provider", "depth").to_dicts()
    labels = []
    for r in rows:
        mode = "zero-shot" if r["depth"] == 0 else f"recursive d={r['depth']}"
        labels.append(f"{r['provider']}\n{mode}")
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    width = 0.38
    for offset, metric, color in ((-width / 2, "cr", "#3b6ea8"), (width / 2, "cp", "#d08a2e")):
        values = [r[metric] if r[metric] is not None else 0 for r in rows]
        errors = [
            [max(0.0, (r[metric] or 0) - (r[f"{metric}_low"] or 0)) for r in rows],
            [max(0.0, (r[f"{metric}_high"] or 0) - (r[metric] or 0)) for r in rows],
        ]
        xs = [i + offset for i in range(len(rows))]
        ax.bar(xs, values, width, yerr=errors, capsize=3, label=metric.upper(), color=color)
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title(f"Context Relevance and Precision (p={page}){title_suffix}", fontsize=10)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_convergence(scores: pl.DataFrame, path: Path, title_suffix: str = "") -> Path:
    """CR and CP vs recursion depth, one line per provider and page size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = scores.filter(pl.col("question_set") == "all").sort("provider", "page_size", "depth")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for ax, metric in zip(axes, ("cr", "cp"), strict=True):
        for (provider, page), group in frame.group_by(["provider", "page_size"], maintain_order=True):
            style = "-" if page == frame["page_size"].max() else "--"
            ax.errorbar(
                group["depth"].to_list(),
                group[metric].to_list(),
                yerr=[
                    [max(0.0, m - lo) for m, lo in zip(group[metric], group[f"{metric}_low"], strict=True)],
                    [max(0.0, hi - m) for m, hi in zip(group[metric], group[f"{metric}_high"], strict=True)],
                ],
                marker="o",
                linestyle=style,
                capsize=2,
                label=f"{provider} p={page}",
            )
        ax.set_xlabel("recursion depth")
        ax.set_ylabel(metric.upper())
        top = max([v for v in frame[f"{metric}_high"].to_list() if v is not None and v == v] or [0.0])
        ax.set_ylim(0, 1 if top > 0.5 else max(0.05, top * 1.25))  # small CP values stay readable
        ax.set_xticks(sorted(set(frame["depth"].to_list())))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Convergence: metric vs recursion depth{title_suffix}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def image_markdown(path: Path, alt: str) -> str:
    """An inline base64 PNG, so the Dagster UI shows the plot in the asset's metadata."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"


def write_report(
    scores: pl.DataFrame,
    *,
    out_dir: Path,
    judge_name: str,
    judge_offline: bool,
    agreement: dict[str, Any] | None,
    skipped: dict[str, str],
    question_counts: dict[str, int],
    refinement: str,
    cost: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes benchmark.md and the PNGs into out_dir; returns paths and the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = " — OFFLINE judge" if judge_offline else ""
    bars = plot_cr_cp(scores, out_dir / "benchmark_cr_cp.png", suffix) if scores.height else None
    convergence = (
        plot_convergence(scores, out_dir / "benchmark_convergence.png", suffix) if scores.height else None
    )
    sets = sorted(set(scores["question_set"].to_list())) if scores.height else []
    parts = [
        "# Lumina benchmark",
        "",
        f"Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.",
        "",
        judge_banner(judge_name, judge_offline),
        "",
        f"**CP definition.** {CP_DEFINITION}",
        "",
        "**CR** = mean over questions of the fraction of a question's contexts judged `<highly_relevant>`; a question "
        "with no contexts scores 0 and is counted; contexts whose verdict failed are excluded and counted as failures. "
        "Intervals are 95% percentile bootstrap CIs over questions.",
        "",
        f"**Questions:** {', '.join(f'{k}: {v}' for k, v in question_counts.items()) or 'none'}. "
        f"**Recursive refinement:** `{refinement}`. The paper's `lumina-recursive` mode is reported for every "
        "provider: rows with depth > 0 (contexts of all levels merged, duplicates by passage text dropped).",
        "",
    ]
    if skipped:
        parts += ["**Providers skipped:**", ""] + [
            f"- `{name}`: {reason}" for name, reason in sorted(skipped.items())
        ]
        parts.append("")
    if cost:
        parts += ["**Cost:** " + ", ".join(f"{k} = {v}" for k, v in cost.items()), ""]
    parts += ["## CR and CP per provider and mode (all questions)", "", summary_table(scores, agreement), ""]
    if bars:
        parts += [f"![CR and CP per provider and mode]({bars.name})", ""]
    parts += ["## Every recursion level", "", depth_table(scores, agreement), ""]
    if convergence:
        parts += [f"![Convergence graph]({convergence.name})", ""]
    for name in sets:
        if name != "all":
            parts += [f"## Question set: {name}", "", depth_table(scores, agreement, name), ""]
    markdown = "\n".join(parts)
    report = out_dir / "benchmark.md"
    report.write_text(markdown, encoding="utf-8")
    return {"markdown": markdown, "report": report, "plots": [p for p in (bars, convergence) if p]}


def results_sample(frame: pl.DataFrame, question_frame: pl.DataFrame, rows: int = 5) -> str:
    """The first rows of a provider's results as a markdown table: question, top title and chunk, contexts."""
    texts = dict(zip(question_frame["question_id"].to_list(), question_frame["text"].to_list(), strict=True))
    sample = []
    for row in frame.head(rows).iter_rows(named=True):
        top = row["contexts"][0] if row["contexts"] else None
        sample.append(
            {
                "question": texts.get(row["question_id"], ""),
                "top title": top["title"] if top else "",
                "top chunk": (top["chunks"][0] if top and top["chunks"] else ""),
                "contexts": len(row["contexts"]),
            }
        )
    return (
        tables.markdown_sample(pl.DataFrame(sample), ["question", "top title", "top chunk", "contexts"])
        if sample
        else "_empty_"
    )
