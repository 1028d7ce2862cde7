"""The benchmark report of one run: what the run is, the headline comparison with paired tests per question set,
every recursion level, and plots. Offline (no LLM judge) the headline uses qrels and natural qrels only."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import report_sections as sections
from evals.metrics import CP_DEFINITION
from evals.registry import local_provider_names
from evals.report_plots import plot_convergence, plot_scores, set_rows
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
    "no context is judged (an offline judge would have to share no model with a provider under test, and Lumina "
    "ships none): providers are compared on qrels only and CR / CP by judge are not measured"
)


def question_sources(question_frame: pl.DataFrame) -> dict[str, str]:
    """Where each kind of question in the run comes from: the generator, the BEIR split and whether it is held out."""
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


def _ci(row: dict[str, Any], name: str, sep: str = " ") -> str:
    """`name`'s mean and 95% CI in a score row (CR and CP name their bounds with "_")."""
    mean = row[name]
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.3f} [{row[f'{name}{sep}low']:.3f}, {row[f'{name}{sep}high']:.3f}]"


def agreement_line(agreement: dict[str, Any] | None) -> str:
    """What the LLM judge's validation-set agreement measures (CR verdicts on SciFact qrel pairs only)."""
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
            "> **OFFLINE RUN.** No LLM judge is configured, so nothing is judged: offline runs are compared on "
            "qrels only (BEIR qrels; a synthetic question's source paper and passage). An offline judge would have "
            "to share no model with a provider under test; Lumina ships none. CR and CP by judge: **not measured** "
            "offline."
        )
    return f"> Judge: `{judge_name}` at temperature 0, prompts verbatim from the Lumina paper."


def headline_table(scores: pl.DataFrame, question_set: str, *, offline: bool) -> str:
    """One row per provider × page size × depth: n, failures, lengths, CR / CP when judged, and the qrels measures."""
    frame = set_rows(scores, question_set)
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
            *(str(row[c]) for c in ("page_size", "depth", "n")),
            f"{row['failed']} ({row['failure_rate']:.0%})",
            *(sections.num(row[c]) for c in ("mean_contexts", "sentences/context", "tokens/context")),
        ]
        if not offline:
            cells += [
                _ci(row, m, "_") + sections.failed_note(row.get(f"{m}_failed_questions"))
                for m in ("cr", "cp")
            ]
        excluded = row["qrels_excluded"]
        cells += ["excluded" if excluded and m in QRELS_HEADLINE else _ci(row, m) for m in measures]
        cells += [sections.num(row[m]) for m in extra]
        lines.append("| " + " | ".join(cells) + " |")
    if not has_qrels and offline:
        lines += ["", "_No qrels for this set: offline, nothing here compares providers._"]
    return "\n".join(lines)


def judge_agreement_table(scores: pl.DataFrame) -> str:
    """The judge's agreement with qrels and human labels on each provider's own contexts in this run."""
    frame = set_rows(scores, "all").filter(pl.col("depth") == 0)
    lines = [
        "| provider | p | judge-vs-qrels κ on this provider's contexts | pairs | judge-vs-human CP sentence κ | "
        "sentences |",
        "|---|---|---|---|---|---|",
    ]
    for row in frame.iter_rows(named=True):
        lines.append(
            f"| {row['provider']} | {row['page_size']} | {sections.num(row['proxy_kappa'])} | {row['proxy_pairs']} | "
            f"{sections.num(row['judge_vs_human_kappa'])} | {row['judge_vs_human_sentences']} |"
        )
    return "\n".join(lines)


def depth_table(scores: pl.DataFrame, question_set: str = "all", *, offline: bool = False) -> str:
    frame = set_rows(scores, question_set)
    cols = ["nDCG@10", "nDCG@p", "AP@p", "R@p", "R@pool", "RR", "P@p (qrels, distinct papers)", "CP (human)"]
    judged = [] if offline else ["CR", "CP"]
    header = ["provider", "p", "depth", "n", "failed", *judged, "contexts/question", *cols, "n (qrels)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.iter_rows(named=True):
        cells = [row["provider"], str(row["page_size"]), str(row["depth"]), str(row["n"]), str(row["failed"])]
        if not offline:
            cells += [_ci(row, "cr", "_"), _ci(row, "cp", "_")]
        cells += [
            sections.num(row["mean_contexts"]),
            *(sections.num(row[c]) for c in cols),
            str(row["n_qrels"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def question_sets(scores: pl.DataFrame) -> list[str]:
    """The run's question sets in report order; the first is the one the plots and the level table show."""
    return [s for s in ("beir", "user", "synthetic") if s in set(scores["question_set"].to_list())]


def _run_header(run: dict[str, Any], comparisons: pl.DataFrame | None) -> list[str]:
    """Title, the quotable headline paragraph, the judge banner and what this run is."""
    judge_name, judge_offline = run["judge"], run["judge_offline"]
    return [
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


def _providers_section(run: dict[str, Any]) -> list[str]:
    """Stored results left out of this run, each provider's request counters, and the providers skipped."""
    parts: list[str] = []
    excluded, skipped = run.get("excluded"), run.get("skipped")
    if excluded:
        parts += ["**Not in this run** (stored results of other runs, left out):", ""]
        parts += [f"- `{name}`: {reason}" for name, reason in sorted(excluded.items())] + [""]
    for name, stats in sorted(run.get("provider_stats", {}).items()):
        parts += [f"**{name} requests:** " + ", ".join(f"{k} = {v}" for k, v in stats.items()), ""]
    if skipped:
        parts += ["**Providers skipped:**", ""] + [
            f"- `{name}`: {reason}" for name, reason in sorted(skipped.items())
        ]
        parts.append("")
    return parts


def _method_notes(run: dict[str, Any]) -> list[str]:
    """How recursion ran, what each measure means, and the context form judged."""
    refinement = run.get("refinement", "none")
    recursion = (
        "**Recursion offline is pseudo-relevance feedback** (`offline:pseudo-relevance-feedback`: key terms of the "
        "top results appended to the question), not the paper's recursive refinement, which needs an LLM to "
        "rewrite the query; depths above 0 below measure that stand-in."
        if sections.PRF in refinement
        else f"**Recursion** (`{refinement}`): the Recursion Prompt asks the LLM for a refined query."
    )
    return [
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
        f"**Context form judged:** {context_forms.describe(run.get('context_form', context_forms.EQUAL))}. "
        "Tokens per context (as judged and as returned) "
        "stand beside every CR / CP figure; CP (human, as returned) is the whitepaper's form.",
        "",
    ]


def _score_sections(
    scores: pl.DataFrame,
    run: dict[str, Any],
    comparisons: pl.DataFrame | None,
    *,
    focus: str,
    bars: Path | None,
) -> list[str]:
    """The scores per question set with their paired tests, the plot, and the judge's agreement per provider."""
    judge_offline = run["judge_offline"]
    parts = ["## Scores per question set", ""]
    for name in question_sets(scores):
        parts += [f"### {name}", "", headline_table(scores, name, offline=judge_offline), ""]
        parts += sections.length_table(scores, name, run.get("token_budget"))
        if comparisons is not None:
            parts += ["Paired tests over questions:", "", *sections.comparison_tables(comparisons, name)]
    if bars:
        parts += [f"![every page size and depth, {focus} questions]({bars.name})", ""]
    if not judge_offline:
        parts += ["## Judge agreement on this run's contexts", "", judge_agreement_table(scores), ""]
        parts += sections.pooled_section(run)
    return parts


def write_report(
    scores: pl.DataFrame,
    *,
    out_dir: Path,
    run: dict[str, Any],
    agreement: dict[str, Any] | None,
    cost: dict[str, Any] | None,
    comparisons: pl.DataFrame | None = None,
    plan: dict[str, Any] | None = None,
    actual: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes the report of the run `run` (its manifest) as benchmark.md and PNGs into out_dir; returns the paths
    and the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    judge_offline = run["judge_offline"]
    focus = next(iter(question_sets(scores)), "all")
    prf = sections.PRF in run.get("refinement", "none")
    suffix = (" — OFFLINE, qrels only" if judge_offline else "") + (
        "; depth > 0 = pseudo-relevance feedback" if prf else ""
    )
    plot_options = {"offline": judge_offline, "title_suffix": suffix, "question_set": focus}
    bars = plot_scores(scores, out_dir / "benchmark_scores.png", **plot_options)
    convergence = plot_convergence(scores, out_dir / "benchmark_convergence.png", **plot_options)
    parts = _run_header(run, comparisons) + _providers_section(run) + sections.cost_line(cost)
    parts += plan_vs_actual(plan, actual)
    counts = ", ".join(f"{k}: {v}" for k, v in run.get("question_counts", {}).items())
    parts += [f"**Questions:** {counts or 'none'}.", ""]
    parts += [f"- **{name}**: {source}" for name, source in run.get("question_sources", {}).items()]
    parts += _method_notes(run)
    if not judge_offline:
        parts += [f"**CP definition.** {CP_DEFINITION}", "", agreement_line(agreement), ""]
    parts += sections.disclosure_section(run)
    parts += sections.matching_table(run)
    parts += _score_sections(scores, run, comparisons, focus=focus, bars=bars)
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
    return tables.markdown_sample(pl.DataFrame(sample), ["question", "top title", "top chunk", "contexts"])


def plan_vs_actual(plan: dict[str, Any] | None, actual: dict[str, Any] | None) -> list[str]:
    """The plan `lumina benchmark run` made beside what the run made: calls and tokens per role, requests."""
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
