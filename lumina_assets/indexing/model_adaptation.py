"""Corpus-adapted embeddings (opt-in): the encoder fine-tuned on the pairs its own corpus gives for free.

The pairs are the tuning set's kinds of pseudo-query (indexing/pseudo_queries.py), each with the text it should
find: an inverse cloze sentence and its passage without that sentence, a paraphrasing title and its abstract, a
citing sentence and the cited paper. Training is in-batch contrastive (sentence-transformers'
MultipleNegativesRankingLoss: every other pair's text in the batch is a negative), one epoch at a small learning
rate, stopped when its time budget is spent, because a fine-tune that runs long forgets the question-to-abstract
matching the base model was trained for.

The adapted model is a new model: a sentence-transformers folder under the data dir's models/adapted/, named by
its base and its pairs, with `lumina_adaptation.json` saying what made it. Its weights give it a fingerprint of its
own, so an index built with it is refused to the base model and the other way round (indexing/model_identity.py);
a search process whose query model is the adapted model's base follows the index to the adapted model
(`follow_index`), so queries are encoded by the model that encoded the passages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

RECORD_FILE = "lumina_adaptation.json"
ADAPTED_FOLDER = "adapted"
MIN_PAIRS = 200  # fewer pairs than this teach the model the corpus's quirks, not its language


@dataclass(frozen=True)
class AdaptationConfig:
    """How the encoder is adapted. A step of 32 pairs takes ~1.5 s on 2 AVX-512 BF16 cores (6.6 s in fp32 at 256
    word pieces), so SciFact's 10,700 pairs take ~9 minutes; a larger corpus is stopped by the budget, and the
    record says how many pairs it saw."""

    budget_seconds: float = 600.0
    epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_share: float = 0.1
    max_pairs: int = 20_000
    sentences_per_paper: int = 2
    seed: int = 0
    device: str = "auto"  # auto: a CUDA device when there is one
    # word pieces a text is cut to while training (the model reads 256 at search time): the base model was trained
    # at 128, and 128 halves a step's time
    max_seq_length: int = 128
    bf16: bool = True  # bf16 autocast on CPUs that compute in it (AVX-512 BF16 / AMX): ~2x faster there


@dataclass(frozen=True)
class TrainingPair:
    query: str
    positive: str
    paper_id: str
    kind: str


@dataclass
class Adaptation:
    """What an adaptation made and what it cost (also written to the model folder as `lumina_adaptation.json`)."""

    path: str
    base_model: str
    base_fingerprint: str
    pairs: dict[str, int] = field(default_factory=dict)
    pairs_seen: int = 0
    steps: int = 0
    seconds: float = 0.0
    stopped_by_budget: bool = False
    device: str = "cpu"
    config: dict = field(default_factory=dict)


class AdaptationError(RuntimeError):
    """The corpus cannot adapt the encoder (too few pairs), said plainly rather than training on noise."""


def training_pairs(
    passages: Sequence[tuple[str, str, str, str]],
    papers: Sequence[tuple[str, str, str]],
    *,
    citations=(),
    embed_text: Callable[[str, str], str],
    config: AdaptationConfig | None = None,
) -> list[TrainingPair]:
    """Pairs from the corpus alone. `passages`: (passage id, paper id, title, text); `papers`: (paper id, title,
    abstract); `citations`: citation pseudo-queries (pseudo_queries.citation_queries_from_parsed); `embed_text(title,
    text)` formats a positive exactly as the index embeds a passage."""
    from lumina_assets.indexing import pseudo_queries

    config = config or AdaptationConfig()
    rng = random.Random(config.seed)
    by_id = {pid: (paper, title, text) for pid, paper, title, text in passages}
    first_passage: dict[str, tuple[str, str]] = {}
    for _, paper, title, text in passages:
        first_passage.setdefault(paper, (title, text))
    pairs: list[TrainingPair] = []
    for query in citations:
        if query.paper_id in first_passage:
            title, text = first_passage[query.paper_id]
            pairs.append(TrainingPair(query.text, embed_text(title, text), query.paper_id, query.kind))
    texts = [pseudo_queries.PassageText(pid, paper, text) for pid, (paper, _, text) in by_id.items()]
    cloze = pseudo_queries.inverse_cloze(texts, rng, config.max_pairs, per_paper=config.sentences_per_paper)
    for query in cloze:
        _, title, text = by_id[query.passage_id]
        rest = " ".join(text.replace(query.withheld, " ").split())
        pairs.append(TrainingPair(query.text, embed_text(title, rest), query.paper_id, query.kind))
    for query in pseudo_queries.title_queries(papers, rng, config.max_pairs // 5):
        positive = first_passage.get(query.paper_id, ("", ""))[1]
        if positive and query.text not in positive:  # the title withheld from its positive
            pairs.append(TrainingPair(query.text, positive, query.paper_id, query.kind))
    rng.shuffle(pairs)
    return pairs[: config.max_pairs]


def pairs_from_tables(
    passages, papers, *, embed_title: bool = True, citations=(), config: AdaptationConfig | None = None
) -> list[TrainingPair]:
    """`training_pairs` from the index's upstream polars tables (passages: passage_id, paper_id, text; papers:
    paper_id, title, abstract), positives formatted as `index_corpus` embeds passages."""
    from lumina_assets.indexing.lancedb_tables import passage_embed_text

    titles = dict(zip(papers["paper_id"].to_list(), papers["title"].to_list(), strict=True))
    passage_tuples = [
        (pid, paper, titles.get(paper) or "", text or "")
        for pid, paper, text in zip(
            passages["passage_id"].to_list(),
            passages["paper_id"].to_list(),
            passages["text"].to_list(),
            strict=True,
        )
    ]
    abstracts = papers["abstract"].to_list() if "abstract" in papers.columns else [""] * papers.height
    paper_tuples = [
        (pid, title or "", abstract or "")
        for pid, title, abstract in zip(
            papers["paper_id"].to_list(), papers["title"].to_list(), abstracts, strict=True
        )
    ]
    return training_pairs(
        passage_tuples,
        paper_tuples,
        citations=citations,
        embed_text=lambda title, text: passage_embed_text(title, text, embed_title=embed_title),
        config=config,
    )


def _batches(pairs: Sequence[TrainingPair], size: int, rng: random.Random) -> list[list[TrainingPair]]:
    """Shuffled batches in which no paper appears twice: two pairs of one paper in a batch would each be the
    other's negative."""
    pending = list(pairs)
    rng.shuffle(pending)
    batches: list[list[TrainingPair]] = []
    while pending:
        batch, papers, left = [], set(), []
        for pair in pending:
            if len(batch) < size and pair.paper_id not in papers:
                batch.append(pair)
                papers.add(pair.paper_id)
            else:
                left.append(pair)
        if len(batch) < 2:  # one paper's pairs are all that is left: nothing to contrast them with
            break
        batches.append(batch)
        pending = left
    return batches


def adapted_folder(base_fingerprint: str, pairs: Sequence[TrainingPair], config: AdaptationConfig) -> Path:
    """data/models/adapted/<base>-<hash of the pairs and config>: the same corpus and config give the same folder,
    so a rerun reuses the model instead of training again."""
    from lumina_assets.core import settings

    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    for pair in pairs:
        digest.update(f"{pair.query}\0{pair.positive}\0".encode())
    return (
        settings.models_dir() / ADAPTED_FOLDER / f"{base_fingerprint[:8] or 'base'}-{digest.hexdigest()[:12]}"
    )


BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def _device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def _bf16(device: str, wanted: bool) -> bool:
    """Whether to train under bf16 autocast: on a CPU only where it computes in bf16 natively (emulated bf16 is
    slower than fp32); never on a GPU, where it was slower for this small model (an H100 took 28.8 s for SciFact's
    epoch under bf16 autocast at 128 word pieces, 19.2 s in fp32 at 256)."""
    if not wanted or device.startswith("cuda"):
        return False
    from lumina_assets.indexing.encoder_forms import cpu_flags

    return bool(cpu_flags() & BF16_CPU_FLAGS)


def adapt(
    base_model: str,
    pairs: Sequence[TrainingPair],
    config: AdaptationConfig | None = None,
    *,
    log_fn: Callable[[str], None] | None = None,
) -> Adaptation:
    """Fine-tune `base_model` on `pairs` and save it; an adaptation already saved for the same base, pairs and
    config is returned as it is (its record read back)."""
    from lumina_assets.indexing.model_identity import weights_fingerprint

    config = config or AdaptationConfig()
    say = log_fn or log.info
    if len(pairs) < MIN_PAIRS:
        raise AdaptationError(
            f"the corpus gives {len(pairs)} training pairs, fewer than {MIN_PAIRS}: the encoder is not adapted"
        )
    base_fingerprint = weights_fingerprint(base_model)
    folder = adapted_folder(base_fingerprint, pairs, config)
    existing = record_of(str(folder))
    if existing is not None:
        say(f"reusing the adapted encoder {folder.name}")
        return existing
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.util import batch_to_device

    device = _device(config.device)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    planned = [batch for _ in range(config.epochs) for batch in _batches(pairs, config.batch_size, rng)]
    if not planned:
        raise AdaptationError(
            f"the corpus's {len(pairs)} training pairs come from a single paper: nothing to contrast them with"
        )
    model = SentenceTransformer(base_model, device=device)
    search_length = model.max_seq_length
    model.max_seq_length = min(search_length, config.max_seq_length)
    bf16 = _bf16(device, config.bf16)
    loss_fn = MultipleNegativesRankingLoss(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    warmup = max(1, int(len(planned) * config.warmup_share))
    decay = max(1, len(planned) - warmup)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (len(planned) - step) / decay))
    )
    record = Adaptation(
        str(folder),
        base_model,
        base_fingerprint,
        _kinds(pairs),
        device=f"{device}{', bf16' if bf16 else ''}",
        config=asdict(config),
    )
    say(
        f"adapting the encoder to the corpus: {len(pairs)} pairs in {len(planned)} steps on {record.device}, "
        f"at most {config.budget_seconds:.0f} s"
    )
    started = time.perf_counter()
    model.train()
    for number, batch in enumerate(planned, start=1):
        queries = batch_to_device(model.preprocess([p.query for p in batch]), model.device)
        positives = batch_to_device(model.preprocess([p.positive for p in batch]), model.device)
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn([queries, positives], None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        record.steps, record.pairs_seen = number, record.pairs_seen + len(batch)
        if number % 50 == 0:
            say(f"adapting the encoder: step {number}/{len(planned)}, loss {loss.item():.3f}")
        if time.perf_counter() - started > config.budget_seconds and number < len(planned):
            record.stopped_by_budget = True
            say(
                f"adaptation budget of {config.budget_seconds:.0f} s spent after {number}/{len(planned)} steps"
            )
            break
    model.eval()
    model.max_seq_length = search_length  # the saved model reads as much as its base at search time
    record.seconds = round(time.perf_counter() - started, 2)
    _save(model, folder, record)
    say(f"adapted encoder saved: {record.pairs_seen} pairs, {record.steps} steps, {record.seconds:.0f} s")
    return record


def _kinds(pairs: Sequence[TrainingPair]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for pair in pairs:
        kinds[pair.kind] = kinds.get(pair.kind, 0) + 1
    return kinds


def _save(model, folder: Path, record: Adaptation) -> None:
    """Written beside the final folder and renamed into place, so a half-written model is never picked up."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save(str(partial))
    (partial / RECORD_FILE).write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def record_of(model_path: str) -> Adaptation | None:
    """The adaptation record of a model folder, None for a model no adaptation made."""
    try:
        return Adaptation(**json.loads((Path(model_path) / RECORD_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def kept_model(passages_table, base) -> str | None:
    """The adapted model an index was built with, where its base is `base`'s weights: what `passage_index` and the
    embedding fan-out keep embedding with while adaptation is on (None: no index, or not adapted from this base)."""
    if passages_table is None:
        return None
    from lumina_assets.indexing.model_identity import of_schema

    return follow_index(of_schema(passages_table.schema).name, base)


def follow_index(index_model: str, query_embedder) -> str | None:
    """The adapted model a search should encode queries with: the index's model when it is an adapted model whose
    base is the query embedder's model (same weights) and its folder is here; None otherwise (the model check then
    decides). The embedder's fingerprint is read only for an adapted index."""
    record = record_of(index_model) if index_model else None
    if record is None:
        return None
    fingerprint = getattr(query_embedder, "fingerprint", "")
    return index_model if fingerprint and record.base_fingerprint == fingerprint else None
