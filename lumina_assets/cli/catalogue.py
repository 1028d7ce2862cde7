"""`lumina remove` / `prune` / `restore` / `sources`: the only ways a paper leaves (or comes back to) the catalogue,
each a run of the `curate_catalogue` job, so the index follows in the same run."""

from __future__ import annotations

import json

from lumina_assets.cli.messages import fail
from lumina_assets.core import tables
from lumina_assets.corpus import catalogue


def _seeds_filters() -> tuple[list[str] | None, bool]:
    """The language / abstract filters `papers` applies, so a plan matches the run."""
    from lumina_assets.corpus.crawl import Seeds
    from lumina_assets.defs.corpus import read_stored_seeds

    try:
        seeds = read_stored_seeds()
    except FileNotFoundError:
        seeds = Seeds()
    return seeds.languages, seeds.require_abstract


def _print_plan(verb: str, plan: catalogue.RemovalPlan) -> None:
    for paper in plan.papers[:50]:
        print(f"  {verb} {paper['paper_id']}  {(paper['title'] or '')[:70]}  [{paper['origins']}]")
    if len(plan.papers) > 50:
        print(f"  ... {len(plan.papers) - 50} more")
    for unknown in plan.unknown_ids:
        print(f"  not in the catalogue: {unknown}")


def _curate(run_config: dict, label: str) -> int:
    from lumina_assets.cli.runner import instance, run_job
    from lumina_assets.definitions import defs

    report = run_job(
        defs,
        "curate_catalogue",
        instance=instance(),
        run_config={"ops": {"papers": {"config": run_config}}},
        tags={"lumina/trigger": label},
        terminal=True,
    )
    meta = report.metadata.get("papers", {})
    status = "ok" if report.success else "FAILED"
    print(
        f"{status}: {label} ({report.seconds:.1f}s): papers={meta.get('papers')}, removed={meta.get('removed')}"
    )
    index = report.metadata.get("passage_index", {})
    if index:
        print(
            f"  index: passages_deleted={index.get('passages_deleted')}, papers_deleted={index.get('papers_deleted')}"
        )
    if report.error:
        print(f"  error: {report.error}")
    return 0 if report.success else 1


def run_remove(args) -> int:
    current = tables.read(tables.PAPERS)
    records = catalogue.read_records()
    languages, require_abstract = _seeds_filters()
    built = catalogue.build(
        records, removed=catalogue.removed_ids(), languages=languages, require_abstract=require_abstract
    )
    plan = catalogue.plan_remove(args.paper_ids, current, built.origins)
    _print_plan("remove" if not args.dry_run else "would remove", plan)
    if not plan.papers:
        return fail(
            "Nothing to remove: none of these ids is in the catalogue (`lumina sources` lists what it holds).",
            1,
        )
    if args.dry_run:
        return 0
    return _curate({"remove_ids": [p["paper_id"] for p in plan.papers], "reason": args.reason}, "remove")


def run_prune(args) -> int:
    records = catalogue.read_records()
    counts = catalogue.origin_counts(records)
    origin = catalogue.resolve_origin(args.source, list(counts))
    if origin not in counts:
        known = ", ".join(counts) or "none yet (`make demo` builds the catalogue)"
        return fail(f"No records from {args.source!r}: the catalogue's sources are {known}.", 1)
    languages, require_abstract = _seeds_filters()
    plan, _ = catalogue.plan_prune(
        origin,
        records,
        removed=catalogue.removed_ids(),
        languages=languages,
        require_abstract=require_abstract,
    )
    verb = "would remove" if args.dry_run else "remove"
    print(f"{origin}: {plan.records_dropped} records, {len(plan.papers)} papers known from no other source")
    _print_plan(verb, plan)
    if args.dry_run:
        return 0
    return _curate({"prune_origins": [origin], "reason": args.reason}, "prune")


def run_restore(args) -> int:
    if not args.paper_ids and not args.source:
        return fail(
            "Name the papers to restore, or --source SOURCE (`lumina sources` counts removed papers)."
        )
    lifted = catalogue.restore(args.paper_ids, origin=args.source or None)
    if not lifted:
        return fail(
            "Nothing to restore: none of these was removed (`lumina sources` counts removed papers).", 1
        )
    print(f"restored {len(lifted)}: {json.dumps(lifted[:20])}")
    return _curate({}, "restore")


def run_sources(args) -> int:
    counts = catalogue.origin_counts(catalogue.read_records())
    removed = catalogue.read_removed()
    for name, n in counts.items():
        print(f"  {name}: {n} records")
    print(f"  removed papers: {removed.height}")
    return 0


def add_commands(commands, bench_commands) -> None:
    remove = commands.add_parser("remove", help="take papers out of the catalogue and the index (logged)")
    remove.add_argument("paper_ids", nargs="+")
    remove.add_argument("--dry-run", action="store_true", help="print what would be removed")
    remove.add_argument("--reason", default="", help="recorded in removed_papers")
    remove.set_defaults(handler=run_remove)
    prune = commands.add_parser(
        "prune", help="drop every record of one source; papers no other source knows leave"
    )
    prune.add_argument(
        "--source",
        required=True,
        help="openalex | arxiv | inbox | corpus:<path> | zotero:<path> | a corpus folder or library export",
    )
    prune.add_argument("--dry-run", action="store_true", help="print what would be removed")
    prune.add_argument("--reason", default="", help="recorded in removed_papers")
    prune.set_defaults(handler=run_prune)
    restore = commands.add_parser("restore", help="let removed papers back in (the next ingest or this run)")
    restore.add_argument("paper_ids", nargs="*")
    restore.add_argument("--source", default="", help="restore every paper removed from this source")
    restore.set_defaults(handler=run_restore)
    sources = commands.add_parser("sources", help="the sources in the catalogue and their record counts")
    sources.set_defaults(handler=run_sources)
