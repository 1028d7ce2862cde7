"""Response bodies of the real LLM APIs, for tests that put a mock transport under the SDKs."""

from __future__ import annotations

import httpx2


def openai_chat_response(
    text: str, *, model: str = "gpt-4o", prompt_tokens: int = 50, completion_tokens: int = 5
):
    """A 200 chat.completion with one assistant message `text`, as the OpenAI API returns it."""
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


def anthropic_message_response(
    text: str, *, model: str = "claude-sonnet-4-6", input_tokens: int = 30, output_tokens: int = 5
):
    """A 200 Messages API answer with one text block `text`, as the Anthropic API returns it."""
    return httpx2.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )
