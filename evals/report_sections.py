"""The parts of a benchmark report a reader may quote and that say what the run was: the headline paragraph, the
setup, matching, cost, the comparison tables (declared family, then exploratory) and the length-matched table."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from evals.comparison import Primary, primary_row
from evals.disclosure import DEFAULTS_INFORMED_BY
from evals.matching import METHODS, TITLE_THRESHOLD

PRF = "offline:pseudo-relevance-feedback"
# what the setup section says of each provider's search, in order
SETUP_FACTS = (
    "config_hash",
    "ranking_code_hash",
    "index_version",
    "index_model",
    "query_model",
    "engine",
    "index_error",
)


def num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def failed_note(failed: int | None) -> str:
    """ ", k questions failed" beside a judged figure whose failed verdicts left k questions unscored."""
    return f", {failed} question{'s' if failed != 1 else ''} failed" if failed else ""


def cannot_claim(run: dict[str, Any], *, offline: bool) -> list[str]:
    """What this run's numbers do not support, from its manifest."""
    out = []
    if offline:
        out.append("anything about Context Relevance or Context Precision judged by an LLM (no judge ran)")
    sources = run.get("question_sources", {})
    if "train-heldout" in sources.get("beir", ""):
        out.append(
            "an untouched held-out result: the held-out half is excluded from tuning, but the defaults were "
            "chosen with it in view (see Setup, 'Defaults informed by')"
        )
    if run.get("excluded") or run.get("skipped") or run.get("qrels_excluded"):
        out.append("anything about providers skipped, left out of the run or left out of the qrels measures")
    out.append(
        "relevance outside the collection: qrels judge only the collection's papers, so an external provider's "
        "result outside it counts as not relevant even when it answers the question"
    )
    if "offline:template" in sources.get("synthetic", ""):
        out.append(
            "anything from the synthetic questions: the offline template copies one sentence of the source "
            "passage, so they test sentence lookup, at ceiling for the local providers"
        )
    if PRF in run.get("refinement", ""):
        out.append(
            "anything about the paper's recursive refinement: offline, depths above 0 are pseudo-relevance "
            "feedback, a different method"
        )
    out.append("differences in the exploratory comparisons (uncorrected, many of them)")
    return out


def split_note(run: dict[str, Any]) -> str:
    """Which split the BEIR questions come from, as the headline says it."""
    source = run.get("question_sources", {}).get("beir", "")
    if "/test" in source or "/dev" in source:
        return (
            "the collection's own held-out split, which informed none of Lumina's defaults (a shipped test split is "
            "preferred over the train split's held-out half whenever the folder has one)"
        )
    if "/train-heldout" in source:
        return (
            "the held-out half of the train split (this copy of the collection ships no test split; with one, the "
            "headline would use it)"
        )
    return ""


def headline_paragraph(
    comparisons: pl.DataFrame | None, run: dict[str, Any], *, offline: bool, primary: Primary | None = None
) -> str:
    """The quotable paragraph: the primary comparison's effect, CI, corrected p and n (or why there is none), then
    what the run cannot claim."""
    primary = primary or Primary()
    row = primary_row(comparisons)
    limits = "; ".join(cannot_claim(run, offline=offline))
    if row is None:
        return (
            f"**Headline.** This run has no primary comparison (fixed in evals/defaults.py: {primary.describe()}): it needs "
            f"{primary.provider} and at least one baseline scored at p = {primary.page_size}, depth "
            f"{primary.depth}, on BEIR questions held out of Lumina's tuning. Every comparison below is "
            f"exploratory. This run cannot claim: {limits}."
        )
    set_name = run.get("question_sources", {}).get("beir", "held-out BEIR questions")
    significant = row["p_holm"] < primary.alpha
    better = row["a"].split(" d=")[0] if row["diff"] > 0 else row["b"].split(" d=")[0]
    outcome = (
        f"{better} is higher at the family-wise {primary.alpha:.2f} level"
        if significant
        else f"the difference is not significant at the family-wise {primary.alpha:.2f} level"
    )
    return (
        f"**Headline.** Primary comparison, fixed in evals/defaults.py ({primary.describe()}): on n = {row['n']} "
        f"questions ({set_name.split(' (')[-1].rstrip(')') if '(' in set_name else set_name}), "
        f"{row['a'].split(' d=')[0]} {primary.label} = {row['mean_a']:.3f} vs {row['b'].split(' d=')[0]} "
        f"{row['mean_b']:.3f} (the best of the baselines), difference {row['diff']:+.3f} "
        f"[95% CI {row['diff_low']:+.3f}, {row['diff_high']:+.3f}], effect d_z = {num(row['effect_size'], 2)}; "
        f"paired sign-flip permutation p = {row['p_value']:.4f}"
        f"{'' if 'exact' in row['test'] else ' (Monte Carlo sign flips, so a value at their resolution)'}, "
        f"Holm-corrected over the {row['family_size']} "
        f"comparisons of {row['a'].split(' d=')[0]} with each baseline: p = {row['p_holm']:.4f}, so {outcome}. "
        + (f"Questions: {split_note(run)}. " if split_note(run) else "")
        + f"This run cannot claim: {limits}."
    )


def disclosure_section(run: dict[str, Any]) -> list[str]:
    """The setup: which LLM each role used (with warnings), and what each provider searched with."""
    parts = ["## Setup", "", "**LLM per role:**", ""]
    parts += [f"- {role}: `{label}`" for role, label in run.get("llm_roles", {}).items()]
    parts.append("")
    for warning in run.get("warnings", []):
        parts += [f"> **Warning:** {warning}.", ""]
    parts += [f"**Defaults informed by:** {DEFAULTS_INFORMED_BY}.", ""]
    for name, setup in sorted(run.get("provider_setup", {}).items()):
        config = setup.get("search_config")
        facts = [f"{k} `{setup[k]}`" for k in SETUP_FACTS if k in setup]
        baseline = setup.get("baseline_config")
        if baseline:
            facts += [f"{k} `{v}`" for k, v in baseline.items()]
        parts += [f"**{name}** searched with " + (", ".join(facts) or "no recorded setup") + "."]
        if config:
            parts += [
                "",
                "<details><summary>SearchConfig</summary>",
                "",
                "```json",
                json.dumps(config, indent=1, sort_keys=True, default=str),
                "```",
                "",
                "</details>",
            ]
        parts.append("")
    return parts


def matching_table(run: dict[str, Any]) -> list[str]:
    """Per provider: results matched to a collection paper (by identifier) or not, and who is left out of qrels."""
    rows = run.get("matching") or []
    if not rows:
        return []
    shown = [m for m in METHODS if any(r.get(f"by {m}") for r in rows)]
    header = ["provider", "results", "matched", "unmatched", *(f"by {m}" for m in shown)]
    parts = [
        "## Matching results to the collection",
        "",
        "A result counts for the qrels measures when it is a paper of the collection, found by catalogue id, DOI, "
        f"arXiv id, Semantic Scholar corpus id (collections whose ids are S2 corpus ids, e.g. SciFact) or "
        f"normalized title (exact, then rapidfuzz ratio >= {TITLE_THRESHOLD:.0f}). Results are distinct "
        "(question, result) pairs over every page size and depth.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in rows:
        cells = [r["provider"], str(r["results"]), str(r["matched"]), str(r["unmatched"])]
        parts.append("| " + " | ".join(cells + [str(r.get(f"by {m}", 0)) for m in shown]) + " |")
    parts.append("")
    for name, reason in sorted((run.get("qrels_excluded") or {}).items()):
        parts.append(f"- **{name} left out of the qrels measures:** {reason}.")
    return parts + [""]


def cost_line(cost: dict[str, Any] | None) -> list[str]:
    """This run's cost: LLM calls per role and requests per API, unknown prices shown as unknown."""
    if not cost:
        return ["**Cost of this run:** nothing recorded.", ""]
    items = []
    for key, row in sorted(cost.get("llm", {}).items()):
        usd = "unknown price" if row["usd"] is None else f"${row['usd']:.4f}"
        items.append(
            f"LLM {key}: {row['calls']} calls sent, {row['cache_hits']} cached, tokens "
            f"{row['tokens_in']}/{row['tokens_out']}, {usd}"
        )
    for provider, row in sorted(cost.get("requests", {}).items()):
        usd = "unknown" if row["usd"] is None else f"${row['usd']:.4f}"
        items.append(
            f"{provider}: {row['requests']} requests sent, {row['cache_hits']} cached, {usd} ({row['price']})"
        )
    total = f"${cost.get('total_usd', 0):.4f}" + ("" if cost.get("total_complete", True) else " + unknown")
    return [
        "**Cost of this run:** " + ("; ".join(items) or "no LLM call or API request") + f". Total {total}.",
        "",
    ]


def comparison_tables(comparisons: pl.DataFrame, question_set: str) -> list[str]:
    """The declared family (primary first, Holm-corrected) and then the exploratory comparisons."""
    frame = comparisons.filter(pl.col("question_set") == question_set)
    if frame.height == 0:
        return [
            "_no paired comparison (fewer than two providers or depths scored on the same questions)_",
            "",
        ]
    header = "| role | p | measure | A | B | n | A | B | A − B [95% CI] | d_z | p | Holm p | result |"
    out = []
    for title, rows in (
        (
            "Declared family (Holm-corrected):",
            frame.filter(pl.col("role") != "exploratory").sort("role", descending=True),
        ),
        ("Exploratory (uncorrected p, not claims):", frame.filter(pl.col("role") == "exploratory")),
    ):
        if rows.height == 0:
            continue
        out += [title, "", header, "|" + "---|" * 13]
        for r in rows.iter_rows(named=True):
            out.append(
                f"| {r['role']} | {r['page_size']} | {r['measure']} | {r['a']} | {r['b']} | {r['n']} | "
                f"{r['mean_a']:.3f} | {r['mean_b']:.3f} | {r['diff']:+.3f} [{r['diff_low']:+.3f}, "
                f"{r['diff_high']:+.3f}] | {num(r['effect_size'], 2)} | {r['p_value']:.4f} | "
                f"{num(r['p_holm'], 4)} | {r['verdict']} |"
            )
        out.append("")
    return out


def length_table(scores: pl.DataFrame, question_set: str, budget: int | None) -> list[str]:
    """The length-matched sensitivity rows: human CP on the contexts as returned and cut to one token budget."""
    frame = scores.filter((pl.col("question_set") == question_set) & (pl.col("depth") == 0)).sort(
        "provider", "page_size"
    )
    if frame.height == 0 or not frame["n_human_cp"].max():
        return []
    parts = [
        f"**Length-matched sensitivity** (depth 0): CP (human) on the contexts as judged, as each provider returned "
        f"them (the whitepaper's form), and cut to {budget} word tokens (the smallest provider's median context "
        "length as judged) by the same rule as the judged form: the provider's highest-ranked passage first, whole "
        "sentences (a judge's CR / CP are not re-judged on these cuts; qrels measures do not depend on length).",
        "",
        "| provider | p | tokens/context | CP (human) | tokens/context as returned | CP (human, as returned) | "
        "CP (human, length-matched) | n |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in frame.iter_rows(named=True):
        parts.append(
            f"| {r['provider']} | {r['page_size']} | {num(r['tokens/context'], 1)} | {num(r['CP (human)'])} | "
            f"{num(r['tokens/context as returned'], 1)} | {num(r['CP (human, as returned)'])} | "
            f"{num(r['CP (human, length-matched)'])} | {r['n_human_cp']} |"
        )
    return parts + [""]


def pooled_section(run: dict[str, Any]) -> list[str]:
    """Pooled, graded judging: per provider pooled CR / CP, graded and qrels nDCG@p, then Kendall's tau."""
    pooled = run.get("pooled")
    if not pooled:
        return []
    p = pooled["page_size"]
    parts = [
        f"## Pooled, graded judging (p = {p}, depth {pooled['depth']}; graded judgments exploratory)",
        "",
        f"Every distinct (question, paper) in any provider's top {p} was judged once by `{pooled['judge']}`, "
        f"whoever returned it: {pooled['pool_items']} pool items over {pooled['questions']} questions, "
        f"{num(pooled['tokens_per_item'], 1)} word tokens per judged context, {pooled['relevance_failures']} "
        f"failed relevance verdicts, {pooled['grade_failures']} failed grades. Binary prompts verbatim from the "
        "paper; the 0-3 grade follows UMBRELA (evals/prompts/README.md). A question with a failed verdict is counted "
        "as failed, never scored over fewer papers.",
        "",
        f"| provider | tokens/context | pooled CR | pooled CP | n | failed | graded nDCG@{p} | n | qrels nDCG@{p} | n |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in sorted(pooled["providers"].items()):
        parts.append(
            f"| {name} | {num(s.get('tokens_per_context'), 1)} | {num(s['pooled_cr'])} | {num(s['pooled_cp'])} | "
            f"{s['n_judged']} | {s['failed']} | "
            f"{num(s['graded_ndcg'])} | {s['n_graded']} | {num(s['qrels_ndcg'])} | {s['n_qrels']} |"
        )
    parts += ["", "Kendall's tau between the provider rankings:", "", "| by | and by | providers | tau | p |"]
    parts.append("|---|---|---|---|---|")
    for r in pooled["tau"]:
        parts.append(f"| {r['a']} | {r['b']} | {r['providers']} | {num(r['tau'], 2)} | {num(r['p'], 3)} |")
    return parts + [""]
