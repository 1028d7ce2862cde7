"""`lumina bench embed [--json]`: passages/s of sentence-transformers and each encoder form on the same texts
(interleaved rounds), their cosine agreement, and nDCG@10 on SciFact train and CISI per form. The harness is
`bench.embed_harness`; this module reads arguments and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_commands(commands, bench_commands) -> None:
    bench = bench_commands.add_parser(
        "embed",
        help="passage encoding speed of sentence-transformers and each numeric form, cosine agreement, nDCG@10",
    )
    bench.add_argument(
        "--limit", type=int, default=256, help="SciFact abstracts encoded per round (default 256)"
    )
    bench.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    bench.add_argument(
        "--collections",
        default="scifact,cisi",
        help="collections for nDCG@10 per form: scifact (train), cisi; 'none' skips the quality part "
        "(default scifact,cisi: one index per collection and form, built once, minutes each)",
    )
    bench.add_argument(
        "--no-bf16", action="store_true", help="leave torch bf16 autocast out of the speed rounds"
    )
    bench.add_argument(
        "--data", default=None, help="folder holding scifact/ and cisi/ (default ../shared/data)"
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.set_defaults(handler=run_bench_embed)


def run_bench_embed(args) -> int:
    from bench import embed_harness as embed_bench
    from lumina_assets.core import settings

    shared = Path(args.data).expanduser() if args.data else settings.shared_data_dir()
    corpus = shared / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        print(f"lumina bench embed: {corpus} not found (lumina fetch-collection scifact)", file=sys.stderr)
        return 2
    collections = [] if args.collections.strip() == "none" else args.collections.split(",")
    unknown = [c for c in collections if c not in embed_bench.COLLECTIONS]
    if unknown:
        print(f"lumina bench embed: unknown collections {unknown}", file=sys.stderr)
        return 2
    log = (lambda message: print(message, file=sys.stderr, flush=True)) if args.json else print
    candidates = [c for c in embed_bench.CANDIDATES if not (args.no_bf16 and c == "bf16")]
    texts = embed_bench.sample_texts(corpus, args.limit)
    result = embed_bench.measure_speed(texts, max(1, args.rounds), candidates, log=log)
    if collections:
        embed_bench.measure_quality(result, shared, collections, log=log)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"{summary['texts']} SciFact abstracts (mean {summary['mean_tokens']} tokens), {summary['rounds']} "
        f"interleaved rounds, load average {' '.join(map(str, summary['load_average']))}"
    )
    print(f"{'encoder':<24}{'passages/s':>12}{'vs baseline':>13}{'cosine mean':>13}{'cosine min':>12}")
    baseline = summary["baseline_per_s"] or 1.0
    for name, found in summary["encoders"].items():
        print(
            f"{name:<24}{found['per_s_median']:>12.1f}{found['per_s_median'] / baseline:>12.2f}x"
            f"{found['cosine_to_baseline_mean']:>13.5f}{found['cosine_to_baseline_min']:>12.5f}"
        )
    for collection, forms in summary["ndcg10"].items():
        line = ", ".join(f"{form} {value:.4f}" for form, value in forms.items())
        print(f"nDCG@10 {collection}: {line}")
    print(
        f"chosen form: {summary['form']} ({summary['per_s']:.1f} passages/s, {summary['ratio']}x "
        f"sentence-transformers; nDCG@10 delta vs fp32: SciFact {summary['ndcg_delta_scifact']}, "
        f"CISI {summary['ndcg_delta_cisi']}); this machine's default: {summary['machine_form']}"
    )
    return 0
