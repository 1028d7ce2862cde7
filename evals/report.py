"""The benchmark report of one run: what the run is (questions, providers, grid, judge, code version), the headline
comparison with paired tests per question set, every recursion level, and plots of every page size and depth.

Offline (no LLM judge) the headline uses only measures no provider's model can bias: qrels (BEIR) and natural qrels
(a synthetic question's source paper and passage). The only offline judge embeds with all-MiniLM-L6-v2, the model
Lumina retrieves with, so offline nothing is judged and CR / CP by judge are reported as not measured. With an LLM
judge, its agreement with qrels on each provider's own contexts is shown beside the scores."""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import report_sections as sections
from evals.metrics import CP_DEFINITION
from evals.registry import local_provider_names
from lumina_assets.core import tables

QRELS_HEADLINE = ("P@p (qrels, distinct papers)", "nDCG@10", "nDCG@p", "AP@p", "R@p", "R@100")
LENGTH_HEADLINE = ("mean_contexts", "sentences/context", "tokens/context")
# The columns benchmark_scores shows in its metadata, per question set.
SCORES_HEADLINE = (
    "question_set",
    "provider",
    "page_size",
    "depth",
    "n",
    "failed",
    *LENGTH_HEADLINE,
    *QRELS_HEADLINE,
    "CP (human)",
    "cr",
    "cp",
)

OFFLINE_JUDGE_NOT_USED = (
    "the offline embedding judge shares its model with Lumina (a provider under test), so no context is judged: "
    "providers are compared on qrels only and CR / CP by judge are not measured"
)


def question_sources(question_frame: pl.DataFrame) -> dict[str, str]:
    """Where each kind of question in the run comes from and how to read its scores: the synthetic generator
    named, the BEIR split named and whether it is held out of Lumina's tuning."""
    local = " and ".join(local_provider_names())
    sources = {
        "synthetic": "generated from passages sampled from Lumina's own index (the paper's method): answerable by "
        f"construction for {local}, which search that index, not for external providers; exploratory only",
        "beir": "BEIR queries with human qrels",
        "user": "real user queries (no qrels: judged only)",
    }
    kinds = set(question_frame["kind"].to_list())
    chosen = {kind: text for kind, text in sources.items() if kind in kinds}
    generators = sorted(set(question_frame.filter(pl.col("kind") == "synthetic")["generator"].to_list()))
    if generators:
        chosen["synthetic"] += "; generator " + ", ".join(f"`{g}`" for g in generators)
        if "offline:template" in generators:
            chosen["synthetic"] += (
                " (offline:template turns one sentence of the passage into 'What evidence is there that "
                "<sentence>?': a sentence-copy test, at ceiling by construction)"
            )
    beir = question_frame.filter(pl.col("kind") == "beir")
    if beir.height:
        held = "held_out" in beir.columns and bool(beir["held_out"].fill_null(False).all())
        chosen["beir"] += (
            ", held out of Lumina's tuning"
            if held
            else ", INCLUDING queries Lumina's settings were tuned on: not headlined, exploratory only"
        )
        chosen["beir"] += (
            " (" + ", ".join(g.removeprefix("beir:") for g in sorted(set(beir["generator"].to_list()))) + ")"
        )
    return chosen


def level_summary(recursive: pl.DataFrame) -> pl.DataFrame:
    """Per page size and depth: mean contexts and new chunks, refinement and provider failures, mean pool size."""
    return (
        recursive.group_by("page_size", "depth")
        .agg(
            pl.col("contexts").list.len().mean().alias("mean_contexts"),
            pl.col("new_chunks").mean().alias("mean_new_chunks"),
            pl.col("failure").is_not_null().sum().alias("refinement_failures"),
            pl.col("error").is_not_null().sum().alias("provider_errors"),
            pl.col("pool_size").mean().alias("mean_pool"),
        )
        .sort("page_size", "depth")
    )


def failed_judgments(verdicts: pl.DataFrame | None) -> pl.DataFrame | None:
    """The verdict rows whose relevance or precision judgment failed (None when nothing was judged)."""
    if verdicts is None or not verdicts.height:
        return None
    return verdicts.filter(
        pl.col("relevance_failure").is_not_null() | pl.col("precision_failure").is_not_null()
    )


def _fmt(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def agreement_line(agreement: dict[str, Any] | None) -> str:
    """What the judge's calibration-set agreement measures (CR verdicts on SciFact qrel pairs only)."""
    if not agreement:
        return "**Judge agreement:** not measured (no qrels available for validation)."
    return (
        f"**Judge CR agreement with human qrels** ({agreement.get('set', 'SciFact train')}, held-out pairs, judge "
        f"`{agreement['judge']}`): Cohen's κ = {agreement['kappa']:.3f}, n = {agreement['n']} pairs "
        f"({agreement['positives']} relevant, {agreement.get('queries', '?')} queries). This validates CR verdicts "
        "on SciFact pairs only; CP verdicts are not validated."
    )


def judge_banner(judge_name: str, offline: bool) -> str:
    if offline:
        return (
            "> **OFFLINE RUN.** No LLM judge is configured, and the only offline judge (embedding cosine under "
            "all-MiniLM-L6-v2) shares its model with Lumina, a provider under test, so nothing is judged: providers "
            "are compared on qrels only (BEIR qrels; a synthetic question's source paper and passage). CR and CP by "
            "judge: **not measured** offline."
        )
    return f"> Judge: `{judge_name}` at temperature 0, prompts verbatim from the Lumina paper."


def _set_frame(scores: pl.DataFrame, question_set: str) -> pl.DataFrame:
    return scores.filter(pl.col("question_set") == question_set).sort("provider", "page_size", "depth")


def headline_table(scores: pl.DataFrame, question_set: str, *, offline: bool) -> str:
    """One row per provider × page size × depth: n scored, failures, then qrels measures (offline) or the judged CR
    and CP with the qrels measures where the set has qrels (online)."""
    frame = _set_frame(scores, question_set)
    if frame.height == 0:
        return "_no scores_"
    has_qrels = bool(frame["n_qrels"].max())
    measures = list(QRELS_HEADLINE) if has_qrels else []
    if frame["n_human_cp"].max():
        measures.append("CP (human)")
    judged = [] if offline else ["CR", "CP"]
    extra = ["R@pool"] if has_qrels else []
    if question_set == "synthetic" and has_qrels:
        extra.append("passage@p")
    header = [
        "provider",
        "p",
        "depth",
        "n",
        "failed (rate)",
        "contexts/question",
        "sentences/context",
        "tokens/context",
        *judged,
        *(f"{m} [95% CI]" for m in measures),
        *extra,
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.iter_rows(named=True):
        cells = [
            row["provider"],
            str(row["page_size"]),
            str(row["depth"]),
            str(row["n"]),
            f"{row['failed']} ({row['failure_rate']:.0%})",
            _num(row["mean_contexts"]),
            _num(row["sentences/context"]),
            _num(row["tokens/context"]),
        ]
        if not offline:
            cells += [
                _fmt(row["cr"], row["cr_low"], row["cr_high"])
                + sections.failed_note(row.get("cr_failed_questions")),
                _fmt(row["cp"], row["cp_low"], row["cp_high"])
                + sections.failed_note(row.get("cp_failed_questions")),
            ]
        if row["qrels_excluded"]:
            cells += [
                "excluded" if m in QRELS_HEADLINE else _fmt(row[m], row[f"{m} low"], row[f"{m} high"])
                for m in measures
            ]
        else:
            cells += [_fmt(row[m], row[f"{m} low"], row[f"{m} high"]) for m in measures]
        cells += [_num(row[m]) for m in extra]
        lines.append("| " + " | ".join(cells) + " |")
    if not has_qrels and offline:
        lines.append("")
        lines.append("_No qrels for this set: offline, nothing here compares providers._")
    return "\n".join(lines)


def judge_agreement_table(scores: pl.DataFrame) -> str:
    """The judge's agreement with qrels on each provider's own contexts in this run (questions with qrels,
    calibration questions excluded): a judge that agrees less on one provider's contexts favours or hurts it."""
    frame = _set_frame(scores, "all").filter(pl.col("depth") == 0)
    lines = [
        "| provider | p | judge-vs-qrels κ on this provider's contexts | pairs | judge-vs-human CP sentence κ | "
        "sentences |",
        "|---|---|---|---|---|---|",
    ]
    for row in frame.iter_rows(named=True):
        lines.append(
            f"| {row['provider']} | {row['page_size']} | {_num(row['proxy_kappa'])} | {row['proxy_pairs']} | "
            f"{_num(row['judge_vs_human_kappa'])} | {row['judge_vs_human_sentences']} |"
        )
    return "\n".join(lines)


def depth_table(scores: pl.DataFrame, question_set: str = "all", *, offline: bool = False) -> str:
    frame = _set_frame(scores, question_set)
    cols = ["nDCG@10", "nDCG@p", "AP@p", "R@p", "R@pool", "RR", "P@p (qrels, distinct papers)", "CP (human)"]
    judged = [] if offline else ["CR", "CP"]
    header = ["provider", "p", "depth", "n", "failed", *judged, "contexts/question", *cols, "n (qrels)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.iter_rows(named=True):
        cells = [row["provider"], str(row["page_size"]), str(row["depth"]), str(row["n"]), str(row["failed"])]
        if not offline:
            cells += [
                _fmt(row["cr"], row["cr_low"], row["cr_high"]),
                _fmt(row["cp"], row["cp_low"], row["cp_high"]),
            ]
        cells += [_num(row["mean_contexts"]), *(_num(row[c]) for c in cols), str(row["n_qrels"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot_measures(scores: pl.DataFrame, *, offline: bool) -> list[str]:
    measures = [] if offline else ["cr", "cp"]
    if scores.height and scores["n_qrels"].max():
        measures += ["P@p (qrels, distinct papers)", "nDCG@10", "AP@p", "R@p"]
    return measures


def plot_scores(
    scores: pl.DataFrame, path: Path, *, offline: bool, title_suffix: str = "", question_set: str = "all"
) -> Path | None:
    """Bars for every provider at every page size and depth, one panel per measure, each on its own y-axis so a
    small CP stays readable; error bars are the bootstrap CIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = _set_frame(scores, question_set)
    measures = _plot_measures(frame, offline=offline)
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

    frame = _set_frame(scores, question_set)
    measures = _plot_measures(frame, offline=offline)
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


def primary_set(scores: pl.DataFrame) -> str:
    """The question set the plots and the level table show: the BEIR set when the run has one (the headline's),
    else the first set there is; never the pool of every set."""
    present = [s for s in ("beir", "user", "synthetic") if s in set(scores["question_set"].to_list())]
    return present[0] if present else "all"


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
    comparisons: pl.DataFrame | None = None,
    run: dict[str, Any] | None = None,
    excluded: dict[str, str] | None = None,
    question_sources: dict[str, str] | None = None,
    provider_stats: dict[str, dict[str, int]] | None = None,
    plan: dict[str, Any] | None = None,
    actual: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes benchmark.md and the PNGs into out_dir; returns paths and the markdown. The report opens with the
    paragraph a reader can quote (`report_sections.headline_paragraph`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    focus = primary_set(scores)
    prf = sections.PRF in refinement
    suffix = (" — OFFLINE, qrels only" if judge_offline else "") + (
        "; depth > 0 = pseudo-relevance feedback" if prf else ""
    )
    bars = plot_scores(
        scores,
        out_dir / "benchmark_scores.png",
        offline=judge_offline,
        title_suffix=suffix,
        question_set=focus,
    )
    convergence = plot_convergence(
        scores,
        out_dir / "benchmark_convergence.png",
        offline=judge_offline,
        title_suffix=suffix,
        question_set=focus,
    )
    run = run or {}
    sets = [s for s in ("beir", "user", "synthetic") if s in set(scores["question_set"].to_list())]
    parts = [
        f"# Lumina benchmark — run `{run.get('run_id', '?')}`",
        "",
        sections.headline_paragraph(comparisons, run, offline=judge_offline),
        "",
        f"Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.",
        "",
        judge_banner(judge_name, judge_offline),
        "",
        "**This run** (every row below comes from it): "
        f"providers {', '.join(run.get('providers', [])) or 'none'}; depths {run.get('depths', '?')}; "
        f"page sizes {run.get('page_sizes', '?')}; judge {'none (offline)' if judge_offline else f'`{judge_name}`'}; "
        f"questions `{run.get('questions', '?')}`; benchmark code version {run.get('code_version', '?')}. "
        "Earlier runs keep their own reports under `reports/runs/<run id>/`.",
        "",
    ]
    if excluded:
        parts += ["**Not in this run** (stored results of other runs, left out):", ""]
        parts += [f"- `{name}`: {reason}" for name, reason in sorted(excluded.items())] + [""]
    for name, stats in sorted((provider_stats or {}).items()):
        parts += [f"**{name} requests:** " + ", ".join(f"{k} = {v}" for k, v in stats.items()), ""]
    if skipped:
        parts += ["**Providers skipped:**", ""] + [
            f"- `{name}`: {reason}" for name, reason in sorted(skipped.items())
        ]
        parts.append("")
    parts += sections.cost_line(cost)
    parts += plan_vs_actual(plan, actual)
    parts += [
        f"**Questions:** {', '.join(f'{k}: {v}' for k, v in question_counts.items()) or 'none'}.",
        "",
    ]
    for name, source in (question_sources or {}).items():
        parts += [f"- **{name}**: {source}"]
    recursion = (
        "**Recursion offline is pseudo-relevance feedback** (`offline:pseudo-relevance-feedback`: key terms of the "
        "top results appended to the question), not the paper's recursive refinement, which needs an LLM to "
        "rewrite the query; depths above 0 below measure that stand-in."
        if prf
        else f"**Recursion** (`{refinement}`): the Recursion Prompt asks the LLM for a refined query."
    )
    parts += [
        "",
        recursion
        + " Depth d's result is the top p of every level's results fused by reciprocal rank (k = 60), "
        "one context per paper within and across levels, so every depth is a list of at most p papers; "
        "`R@pool` is the recall of all levels' merged contexts.",
        "",
        "**n** = questions scored; a provider call that failed is a failure (`failed`, rate per provider and depth), "
        "left out of the scores, never scored as an empty result. Intervals are 95% percentile bootstrap CIs over "
        "questions. **P@p (qrels, distinct papers)** = distinct relevant papers among the contexts / p (p, not the contexts returned); "
        "**nDCG@p**, **AP@p** = rank-graded over the p contexts (one relevant paper at rank 1 scores 1.0); "
        "**R@p** = recall of the relevant papers in the p contexts; **passage@p** = the synthetic question's "
        "source passage is among them; **CP (human)** = mean over contexts of (rationale sentences / sentences), "
        "the paper's CP with the collection's human rationale labels as the verdicts (critical = a sentence a "
        "SciFact annotator marked as evidence for the claim); **tokens** = word tokens (`\\w+` runs).",
        "",
        f"**Context form judged:** {context_forms.describe((run or {}).get('context_form', context_forms.EQUAL))}. "
        "Tokens per context (as judged and as returned) "
        "stand beside every CR / CP figure; CP (human, as returned) is the whitepaper's form.",
        "",
    ]
    if not judge_offline:
        parts += [f"**CP definition.** {CP_DEFINITION}", "", agreement_line(agreement), ""]
    parts += sections.disclosure_section(run)
    parts += sections.matching_table(run)
    parts += ["## Scores per question set", ""]
    for name in sets:
        parts += [f"### {name}", "", headline_table(scores, name, offline=judge_offline), ""]
        parts += sections.length_table(scores, name, run.get("token_budget"))
        if comparisons is not None:
            parts += ["Paired tests over questions:", "", *sections.comparison_tables(comparisons, name)]
    if bars:
        parts += [f"![every page size and depth, {focus} questions]({bars.name})", ""]
    if not judge_offline:
        parts += ["## Judge agreement on this run's contexts", "", judge_agreement_table(scores), ""]
        parts += sections.pooled_section(run or {})
    level_title = "pseudo-relevance feedback level" if prf else "recursion level"
    parts += [
        f"## Every {level_title} ({focus} questions)",
        "",
        depth_table(scores, focus, offline=judge_offline),
        "",
    ]
    if convergence:
        parts += [f"![Convergence graph]({convergence.name})", ""]
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


def plan_vs_actual(plan: dict[str, Any] | None, actual: dict[str, Any] | None) -> list[str]:
    """The plan `lumina benchmark run` made before the run beside what the run made: LLM calls (sent + answered
    from the run's own cache) and input tokens per role, requests per provider."""
    if not plan or not actual:
        return []
    lines = [
        "**Plan vs actual** (the plan `lumina benchmark run` printed before starting; calls include those the "
        "run's own cache answered):",
        "",
        "| what | planned | actual |",
        "|---|---:|---:|",
    ]
    for role, row in plan.get("llm", {}).items():
        done = actual["llm"].get(role, {})
        made = done.get("calls", 0) + done.get("cache_hits", 0)
        lines.append(f"| {role} calls | {row['calls']:,} | {made:,} |")
        lines.append(f"| {role} input tokens | {row['input_tokens']:,} | {done.get('input_tokens', 0):,} |")
    for provider, planned in plan.get("provider_requests", {}).items():
        lines.append(
            f"| {provider} requests | {planned:,} | {actual['provider_requests'].get(provider, 0):,} |"
        )
    usd = plan.get("usd_sync")
    lines.append(
        f"| USD (sync list price) | {'unknown' if usd is None else f'${usd:,.2f}'}"
        f"{'' if plan.get('usd_sync_complete', True) else ' + unknown'} | see the cost line |"
    )
    return [*lines, ""]
