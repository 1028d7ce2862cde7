"""The judge and the question generator through the providers' batch APIs (OpenAI Batch API with its files endpoint, Anthropic Message
Batches): half the list price, answers within 24 h.

A batch asks exactly the prompts the synchronous judge would send first (attempt 0 of each pair's Context
Relevance and Context Precision prompt), each under its LLM-cache key as `custom_id`. When a batch ends, every
answer it holds is written into the LLM cache under that key, so the judging step that follows finds them all
there and sends nothing (a malformed answer is retried synchronously, as ever). A request the batch did not answer
(errored, expired, canceled) is listed as missing and submitted again, alone. Records of submitted batches live
under data/benchmark/batches/, one JSON file per batch, written atomically.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumina_assets.core import prices, settings
from lumina_assets.core.tables import atomic_replace

OPEN = "open"
ENDED = "ended"
BATCH_BACKENDS = ("openai", "anthropic")


@dataclass
class BatchRequest:
    custom_id: str  # the LLM cache key of this exact call
    prompt: str
    params: dict[str, Any]


def judge_requests(items, client, *, temperature: float = 0.0) -> list[BatchRequest]:
    """The first-attempt prompts of every (question, context) pair whose answers are not in the LLM cache yet."""
    from evals.judge import context_sentences, precision_prompt, relevance_prompt

    params = {"temperature": temperature, "max_tokens": client.max_tokens, "system": None}
    requests: dict[str, BatchRequest] = {}
    for item in items:
        prompts = [relevance_prompt(item.question, item.context)]
        sentences = context_sentences(item.context)
        if sentences:
            prompts.append(precision_prompt(item.question, item.context, sentences))
        for prompt in prompts:
            key = client.cache_key(prompt, params)
            if key not in requests and (client.cache is None or client.cache.get(key) is None):
                requests[key] = BatchRequest(key, prompt, params)
    return list(requests.values())


def question_requests(passages, papers, client, *, n: int, seed: int) -> list[BatchRequest]:
    """The question generator's first-attempt prompts for the passages `synthetic_questions` will sample, those
    whose answers are not cached yet."""
    from evals.questions import QUESTION_MAX_TOKENS, question_prompts

    params = {"temperature": None, "max_tokens": QUESTION_MAX_TOKENS, "system": None}
    requests: dict[str, BatchRequest] = {}
    for prompt in question_prompts(passages, papers, n=n, seed=seed):
        key = client.cache_key(prompt, params)
        if key not in requests and (client.cache is None or client.cache.get(key) is None):
            requests[key] = BatchRequest(key, prompt, params)
    return list(requests.values())


def records_dir() -> Path:
    return settings.benchmark_dir() / "batches"


def write_record(record: dict[str, Any]) -> None:
    text = json.dumps(record, indent=2)
    atomic_replace(
        records_dir() / f"{record['id']}.json", lambda temp: temp.write_text(text, encoding="utf-8")
    )


def open_records() -> list[dict[str, Any]]:
    folder = records_dir()
    records = (
        [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        if folder.exists()
        else []
    )
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


def submit(
    client,
    requests: list[BatchRequest],
    *,
    partition: str,
    role: str = "judge",
    run_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Submit `requests` as one batch through the client's backend and record it (state open). `role` is judge
    or questions; `run_config` is what the step that reads the answers runs with."""
    if client.backend not in BATCH_BACKENDS:
        raise ValueError(f"{client.backend} has no batch API (openai and anthropic do)")
    sdk = client._client()
    if client.backend == "openai":
        lines = "".join(
            json.dumps(
                {
                    "custom_id": r.custom_id,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": _chat_body(client, r),
                }
            )
            + "\n"
            for r in requests
        )
        uploaded = sdk.files.create(file=("judge.jsonl", io.BytesIO(lines.encode("utf-8"))), purpose="batch")
        batch = sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        batch_id, status = batch.id, batch.status
    else:
        batch = sdk.messages.batches.create(
            requests=[
                {
                    "custom_id": r.custom_id,
                    "params": {
                        "model": client.model,
                        "max_tokens": r.params["max_tokens"],
                        "messages": [{"role": "user", "content": r.prompt}],
                        **(
                            {"temperature": r.params["temperature"]}
                            if r.params.get("temperature") is not None
                            else {}
                        ),
                    },
                }
                for r in requests
            ]
        )
        batch_id, status = batch.id, batch.processing_status
    record = {
        "id": batch_id,
        "backend": client.backend,
        "model": client.model,
        "partition": partition,
        "role": role,
        "state": OPEN,
        "status": status,
        "submitted_at": time.time(),
        "requests": {r.custom_id: {"prompt": r.prompt, "params": r.params} for r in requests},
        "answered": 0,
        "missing": [],
        "resubmitted_as": None,
        "run_config": run_config or {},
    }
    write_record(record)
    return record


def _answers(client, batch_id: str) -> tuple[str, dict[str, tuple[str, int, int]], bool]:
    """(status, custom_id -> (text, input tokens, output tokens) of the succeeded requests, ended?)."""
    sdk = client._client()
    answers: dict[str, tuple[str, int, int]] = {}
    if client.backend == "openai":
        batch = sdk.batches.retrieve(batch_id)
        ended = batch.status in ("completed", "expired", "failed", "cancelled")
        if ended and batch.output_file_id:
            for line in sdk.files.content(batch.output_file_id).text.splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                response = row.get("response") or {}
                if response.get("status_code") == 200 and not row.get("error"):
                    body = response["body"]
                    usage = body.get("usage") or {}
                    answers[row["custom_id"]] = (
                        body["choices"][0]["message"]["content"] or "",
                        int(usage.get("prompt_tokens") or 0),
                        int(usage.get("completion_tokens") or 0),
                    )
        return batch.status, answers, ended
    batch = sdk.messages.batches.retrieve(batch_id)
    ended = batch.processing_status == "ended"
    if ended:
        for row in sdk.messages.batches.results(batch_id):
            if row.result.type == "succeeded":
                message = row.result.message
                text = "".join(
                    getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
                )
                answers[row.custom_id] = (
                    text,
                    int(message.usage.input_tokens),
                    int(message.usage.output_tokens),
                )
    return batch.processing_status, answers, ended


def poll(client, record: dict[str, Any]) -> dict[str, Any]:
    """Check one open batch; when it has ended, put its answers into the LLM cache (at the batch price), list
    the requests it did not answer and close the record. Returns the updated record."""
    status, answers, ended = _answers(client, record["id"])
    record["status"] = status
    if ended:
        for custom_id, (text, tokens_in, tokens_out) in answers.items():
            if custom_id in record["requests"] and client.cache is not None:
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
        record["answered"] = len([c for c in answers if c in record["requests"]])
        record["missing"] = [c for c in record["requests"] if c not in answers]
        record["state"] = ENDED
        record["ended_at"] = time.time()
    write_record(record)
    return record


def resubmit_missing(client, record: dict[str, Any]) -> dict[str, Any] | None:
    """A new batch of the requests an ended batch did not answer (None when it answered all)."""
    if not record["missing"]:
        return None
    requests = [
        BatchRequest(c, record["requests"][c]["prompt"], record["requests"][c]["params"])
        for c in record["missing"]
    ]
    new = submit(
        client,
        requests,
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
