"""Answers from language models: an OpenAI-compatible endpoint and a local transformers model.

No real model can be had here: the endpoint is a small HTTP server speaking the chat completions
protocol, and the local model a tiny random Llama built from a config. What is tested is the
wiring: the prompt, streaming, citation filtering, errors.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rag_pipeline.config import AnswerSettings, load_settings
from rag_pipeline.store.schema import QueryFilter
from serving.answer import AnswerError, OpenAICompatibleAnswerer, TransformersAnswerer, answer
from serving.retrieval import Candidate, Retrieval

PASSAGES = [
    Candidate("p1", {"text": "Owls hunt at night.", "file_path": "/d/guide.md"}),
    Candidate("p2", {"text": "Herons wade in shallow water.", "file_path": "/d/guide.md"}),
]
RETRIEVAL = Retrieval("when do owls hunt", QueryFilter(), PASSAGES, PASSAGES, None)


class _Endpoint(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []
    pieces: ClassVar[list[str]] = ["Owls hunt ", "at night [", "1] and nap by day [9]."]
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).received.append(
            {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                **json.loads(self.rfile.read(length)),
            }
        )
        if self.status != 200:
            self.send_response(self.status)
            self.end_headers()
            self.wfile.write(b'{"error": "model not found"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in self.pieces:
            chunk = {"choices": [{"delta": {"content": piece}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.received, _Endpoint.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_an_openai_compatible_endpoint_streams_a_cited_answer(endpoint: str) -> None:
    answerer = OpenAICompatibleAnswerer(
        AnswerSettings(backend="openai", base_url=endpoint, model="qwen2.5", api_key="k-123")
    )
    states = list(answer(answerer, "When do owls hunt?", [], RETRIEVAL))
    assert states[-1].text == "Owls hunt at night [1] and nap by day ."
    assert states[-1].cited == [1] and len(states) >= 3
    request = _Endpoint.received[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer k-123"
    assert request["model"] == "qwen2.5" and request["stream"] is True
    assert "[1] (guide.md)\nOwls hunt at night." in request["messages"][-1]["content"]


def test_an_endpoint_error_is_reported_with_its_reason(endpoint: str) -> None:
    _Endpoint.status = 404
    answerer = OpenAICompatibleAnswerer(
        AnswerSettings(backend="openai", base_url=endpoint, model="missing")
    )
    with pytest.raises(AnswerError, match=r"404.*model not found"):
        list(answer(answerer, "q", [], RETRIEVAL))


def test_an_unreachable_endpoint_is_reported() -> None:
    answerer = OpenAICompatibleAnswerer(
        AnswerSettings(
            backend="openai", base_url="http://127.0.0.1:9/v1", model="m", timeout_seconds=5
        )
    )
    with pytest.raises(AnswerError, match="cannot reach"):
        list(answer(answerer, "q", [], RETRIEVAL))


def test_the_openai_backend_says_what_it_lacks() -> None:
    with pytest.raises(AnswerError, match="base_url"):
        OpenAICompatibleAnswerer(AnswerSettings(backend="openai"))


def test_openai_environment_variables_configure_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.local/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    settings = load_settings(tmp_path)
    assert (settings.answer.base_url, settings.answer.api_key) == ("http://llm.local/v1", "secret")


def tiny_causal_lm(folder: Path) -> Path:
    """A random 2-layer Llama with a small byte-level BPE tokenizer and a chat template."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(
        [passage.text for passage in PASSAGES] * 20,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<pad>", "<s>", "</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_a_local_transformers_model_streams_an_answer(tmp_path: Path) -> None:
    folder = tiny_causal_lm(tmp_path / "tiny-llm")
    answerer = TransformersAnswerer(
        AnswerSettings(backend="transformers", model=str(folder), max_new_tokens=12, temperature=0),
        tmp_path,
    )
    states = list(answer(answerer, "When do owls hunt?", [], RETRIEVAL))
    final = states[-1]
    assert final.backend == "transformers:tiny-llm" and len(states) >= 2
    assert final.text  # random weights: some text, nothing meaningful
    assert all(1 <= number <= len(PASSAGES) for number in final.cited)


def test_a_missing_local_model_is_reported(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    with pytest.raises(AnswerError, match="cannot load the model"):
        TransformersAnswerer(
            AnswerSettings(backend="transformers", model=str(tmp_path / "no-such-model")), tmp_path
        )
