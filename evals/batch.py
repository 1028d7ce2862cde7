"""The judge and the question generator through the batch APIs (OpenAI Batch API, Anthropic Message Batches).
A batch asks the prompts the synchronous step would send first, under their LLM-cache keys as `custom_id`, and
puts its answers into the LLM cache; records and prompts live under data/benchmark/batches/."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lumina_assets.core import prices, settings
from lumina_assets.core.tables import atomic_write_text

OPEN = "open"
ENDED = "ended"
# (requests, bytes of input) one batch may hold, as each API documents them
LIMITS = {"openai": (50_000, 200 * 1024 * 1024), "anthropic": (100_000, 256 * 1024 * 1024)}


@dataclass
class BatchRequest:
    custom_id: str  # the LLM cache key of this exact call
    prompt: str
    params: dict[str, Any]


def judge_requests(
    items, client, *, temperature: float = 0.0, graded=(), seen: set[str] | None = None
) -> list[BatchRequest]:
    """The first-attempt CR / CP prompts of `items` and the graded prompts of `graded` (pooled items) whose answers
    are not cached; `seen` holds keys an earlier shard took, skipped and extended."""
    from evals.judge import binary_prompts
    from evals.pooled import graded_prompt

    params = {"temperature": temperature, "max_tokens": client.max_tokens, "system": None}
    prompts = [prompt for item in items for prompt in binary_prompts(item)]
    prompts += [graded_prompt(item.question, item.context) for item in graded]
    return _uncached(client, prompts, params, set() if seen is None else seen)


def question_requests(passages, papers, client, *, n: int, seed: int) -> list[BatchRequest]:
    """The question generator's uncached first-attempt prompts for the passages `synthetic_questions` will sample."""
    from evals.questions import QUESTION_MAX_TOKENS, question_prompts

    params = {"temperature": None, "max_tokens": QUESTION_MAX_TOKENS, "system": None}
    return _uncached(client, question_prompts(passages, papers, n=n, seed=seed), params, set())


def _uncached(client, prompts: Iterable[str], params: dict[str, Any], seen: set[str]) -> list[BatchRequest]:
    """One request per distinct prompt whose answer is not in the LLM cache and whose key is not in `seen`."""
    requests = []
    for prompt in prompts:
        key = client.cache_key(prompt, params)
        if key not in seen and (client.cache is None or client.cache.get(key) is None):
            seen.add(key)
            requests.append(BatchRequest(key, prompt, params))
    return requests


def records_dir() -> Path:
    return settings.benchmark_dir() / "batches"


def write_record(record: dict[str, Any]) -> None:
    atomic_write_text(records_dir() / f"{record['id']}.json", json.dumps(record, indent=2))


def _requests_path(batch_id: str) -> Path:
    return records_dir() / f"{batch_id}.requests.jsonl"


def read_requests(record: dict[str, Any], ids: Iterable[str] | None = None) -> Iterator[BatchRequest]:
    """The requests of a recorded batch (those of `ids` only, when given), read line by line from its file."""
    wanted = None if ids is None else set(ids)
    with _requests_path(record["id"]).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if wanted is None or row["custom_id"] in wanted:
                yield BatchRequest(row["custom_id"], row["prompt"], row["params"])


def open_records() -> list[dict[str, Any]]:
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(records_dir().glob("*.json"))]
    return [r for r in records if r["state"] == OPEN]


def _chat_body(client, request: BatchRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": client.model,
        "messages": [{"role": "user", "content": request.prompt}],
        "max_tokens": request.params["max_tokens"],
    }
    if request.params.get("temperature") is not None:
        body["temperature"] = request.params["temperature"]
    return body


def _line(client, request: BatchRequest) -> bytes:
    """One request as a line of the OpenAI Batch API's input file (its size counts against either API's limit)."""
    body = {"custom_id": request.custom_id, "method": "POST", "url": "/v1/chat/completions"}
    body["body"] = _chat_body(client, request)
    return (json.dumps(body) + "\n").encode("utf-8")


class _Pending:
    """One batch being filled, its upload and prompts written to disk as they come (memory holds only ids)."""

    def __init__(self, client):
        import tempfile

        folder = records_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.client = client
        self.input = Path(tempfile.mkstemp(dir=folder, suffix=".input.partial")[1])
        self.prompts = Path(tempfile.mkstemp(dir=folder, suffix=".requests.partial")[1])
        self._input = self.input.open("wb")
        self._prompts = self.prompts.open("w", encoding="utf-8")
        self.ids: list[str] = []
        self.size = 0
        self.kept: list[BatchRequest] = []  # Anthropic's SDK takes the requests themselves

    def add(self, request: BatchRequest, line: bytes) -> None:
        self._input.write(line)
        self._prompts.write(json.dumps(asdict(request)) + "\n")
        self.ids.append(request.custom_id)
        self.size += len(line)
        if self.client.backend == "anthropic":
            self.kept.append(request)

    def close(self) -> None:
        self._input.close()
        self._prompts.close()

    def discard(self) -> None:
        self.close()
        self.input.unlink(missing_ok=True)
        self.prompts.unlink(missing_ok=True)


def submit_all(
    client,
    requests: Iterable[BatchRequest],
    *,
    partition: str,
    role: str = "judge",
    run_config: dict[str, Any] | None = None,
    max_requests: int = 0,
    max_bytes: int = 0,
) -> list[dict[str, Any]]:
    """Submit `requests` (any iterable) as as many batches as the limits ask (0: the API's documented limit), each
    submitted when full; requests wait on disk, so memory holds no batch's prompts."""
    if client.backend not in prices.BATCH_BACKENDS:
        raise ValueError(f"{client.backend} has no batch API (openai and anthropic do)")
    limit_requests, limit_bytes = LIMITS[client.backend]
    max_requests = min(max_requests or limit_requests, limit_requests)
    max_bytes = min(max_bytes or limit_bytes, limit_bytes)
    owner = {"partition": partition, "role": role, "run_config": run_config or {}}
    records: list[dict[str, Any]] = []
    pending = _Pending(client)
    try:
        for request in requests:
            line = _line(client, request)
            if pending.ids and (len(pending.ids) >= max_requests or pending.size + len(line) > max_bytes):
                records.append(_submit(client, pending, owner))
                pending = _Pending(client)
            pending.add(request, line)
        if pending.ids:
            records.append(_submit(client, pending, owner))
    finally:
        pending.discard()
    return records


def _submit(client, pending: _Pending, owner: dict[str, Any]) -> dict[str, Any]:
    """Upload and submit one filled batch; its record (`owner`: partition, role, run config) is written."""
    sdk = client._client()
    pending.close()
    if client.backend == "openai":
        with pending.input.open("rb") as handle:
            uploaded = sdk.files.create(file=("judge.jsonl", handle), purpose="batch")
        batch = sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        batch_id, status = batch.id, batch.status
    else:
        batch = sdk.messages.batches.create(
            requests=[{"custom_id": r.custom_id, "params": _chat_body(client, r)} for r in pending.kept]
        )
        batch_id, status = batch.id, batch.processing_status
    pending.prompts.replace(_requests_path(batch_id))
    pending.input.unlink(missing_ok=True)
    record = {
        "id": batch_id,
        "backend": client.backend,
        "model": client.model,
        **owner,
        "state": OPEN,
        "status": status,
        "submitted_at": time.time(),
        "requests": pending.ids,
        "answered": 0,
        "missing": [],
        "resubmitted_as": None,
    }
    write_record(record)
    return record


def _answers(client, batch_id: str) -> tuple[str, bool, Iterator[tuple[str, str, int, int]]]:
    """(status, ended?, succeeded requests as (custom_id, text, tokens in, tokens out) streamed, never held whole)."""
    sdk = client._client()
    if client.backend == "openai":
        batch = sdk.batches.retrieve(batch_id)
        ended = batch.status in ("completed", "expired", "failed", "cancelled")

        def openai_rows() -> Iterator[tuple[str, str, int, int]]:
            if not (ended and batch.output_file_id):
                return
            with sdk.files.with_streaming_response.content(batch.output_file_id) as response:
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    answer = row.get("response") or {}
                    if answer.get("status_code") == 200 and not row.get("error"):
                        body = answer["body"]
                        usage = body.get("usage") or {}
                        yield (
                            row["custom_id"],
                            body["choices"][0]["message"]["content"] or "",
                            int(usage.get("prompt_tokens") or 0),
                            int(usage.get("completion_tokens") or 0),
                        )

        return batch.status, ended, openai_rows()
    batch = sdk.messages.batches.retrieve(batch_id)
    ended = batch.processing_status == "ended"

    def anthropic_rows() -> Iterator[tuple[str, str, int, int]]:
        if not ended:
            return
        for row in sdk.messages.batches.results(batch_id):
            if row.result.type == "succeeded":
                message = row.result.message
                text = "".join(
                    getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
                )
                yield row.custom_id, text, int(message.usage.input_tokens), int(message.usage.output_tokens)

    return batch.processing_status, ended, anthropic_rows()


def poll(client, record: dict[str, Any]) -> dict[str, Any]:
    """Check one open batch; once ended, its answers go into the LLM cache at the batch price and the record closes."""
    status, ended, rows = _answers(client, record["id"])
    record["status"] = status
    if ended:
        asked = set(record["requests"])
        answered: set[str] = set()
        record["input_tokens"] = record["output_tokens"] = 0
        for custom_id, text, tokens_in, tokens_out in rows:
            if custom_id not in asked:
                continue
            answered.add(custom_id)
            record["input_tokens"] += tokens_in
            record["output_tokens"] += tokens_out
            if client.cache is not None:
                client.cache.put(
                    custom_id,
                    {
                        "text": text,
                        "input_tokens": tokens_in,
                        "output_tokens": tokens_out,
                        "cost_usd": prices.llm_cost(client.model, tokens_in, tokens_out, batch=True),
                        "backend": client.backend,
                        "model": client.model,
                        "batch": record["id"],
                    },
                )
        record["answered"] = len(answered)
        record["missing"] = [c for c in record["requests"] if c not in answered]
        record["state"] = ENDED
        record["ended_at"] = time.time()
    write_record(record)
    return record


def resubmit_missing(client, record: dict[str, Any]) -> dict[str, Any] | None:
    """A new batch of the requests an ended batch did not answer (None when it answered all)."""
    if not record["missing"]:
        return None
    (new,) = submit_all(
        client,
        read_requests(record, record["missing"]),
        partition=record["partition"],
        role=record["role"],
        run_config=record.get("run_config"),
    )
    record["resubmitted_as"] = new["id"]
    write_record(record)
    return new


def partition_done(partition: str, role: str = "judge") -> bool:
    """No open batch of this role is left for the partition."""
    return not any(r["partition"] == partition and r["role"] == role for r in open_records())
