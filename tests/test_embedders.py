"""The ready-made embedders (memci.embedders): the OpenAI-compatible client against a fake
embeddings server of the test's own on 127.0.0.1 (offline), sync and async, and the static model
whose weights ship in the ``wordllama`` package; a missing extra names itself."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import memci
import numpy as np
import pytest
from memci.embedders import AsyncOpenAIEmbedder, OpenAIEmbedder, StaticEmbedder


class _Embeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: a 3-dimension vector per input (its length, its vowels, 1),
    answered in reverse order (clients must sort by ``index``); every request body recorded."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), float(sum(c in "aeiou" for c in t)), 1.0]}
            for i, t in enumerate(body["input"])
        ][::-1]
        answer = json.dumps(
            {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Embeddings.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_the_openai_embedder_asks_the_endpoint_once_per_batch(server: str) -> None:
    embed = OpenAIEmbedder("fake-embed", base_url=server, api_key="test", dimensions=3)
    assert embed(["aaa", "bcd"]) == [[3.0, 3.0, 1.0], [3.0, 0.0, 1.0]]
    assert _Embeddings.requests[-1]["model"] == "fake-embed"
    assert _Embeddings.requests[-1]["dimensions"] == 3
    ctx = memci.ContextSystem("sys", active_pages=1, embedder=OpenAIEmbedder("m", base_url=server, api_key="k"))
    for n in range(3):
        ctx.add({"role": "user", "content": f"question {n}"})
    assert [h.page_index for h in ctx.search("question 1", 1)] == [2]
    assert [r["input"] for r in _Embeddings.requests[1:]][-1] == ["question 1"]


def test_the_async_openai_embedder_is_awaited_by_the_async_system(server: str) -> None:
    async def main() -> list[int]:
        ctx = memci.AsyncContextSystem(
            "sys", active_pages=1, embedder=AsyncOpenAIEmbedder("m", base_url=server, api_key="k")
        )
        for n in range(3):
            await ctx.add({"role": "user", "content": f"question {n}"})
        return [h.page_index for h in await ctx.search("question 0", 1)]

    assert asyncio.run(main()) == [1]
    assert len(_Embeddings.requests) == 3  # two pages archived one at a time, then the query


def test_the_static_wordllama_model_loads_offline_and_ranks_paraphrases(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wordllama", reason="the static extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embed = StaticEmbedder.wordllama()
    vectors = embed(["the database query is slow", "my sql lookup takes ages", "we went hiking in the alps"])
    assert vectors.shape == (3, 256)
    assert vectors.dtype == np.float32
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2]
    assert not embed([""]).any()


def test_a_static_model_pools_every_token_and_no_padding(tmp_path: Any) -> None:
    tokenizers = pytest.importorskip("tokenizers", reason="the static extra is not installed")
    safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="the static extra is not installed")
    vocab = {"[PAD]": 0, "a": 1, "b": 2, "c": 3}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[PAD]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.enable_padding(length=8, pad_id=0, pad_token="[PAD]")  # as a transformer's file may ask
    tokenizer.enable_truncation(max_length=2)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    matrix = np.array([[0, 0], [1, 0], [0, 1], [3, 3]], dtype=np.float32)
    safetensors_numpy.save_file({"embedding.weight": matrix}, str(tmp_path / "w.safetensors"))
    embed = StaticEmbedder(tmp_path / "tokenizer.json", tmp_path / "w.safetensors")
    assert np.allclose(embed(["a b c", "a"]), [[4 / 3, 4 / 3], [1.0, 0.0]])  # all three tokens, no [PAD]


def test_a_missing_static_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)
    with pytest.raises(memci.MissingExtraError, match="'static' extra"):
        StaticEmbedder("tokenizer.json", "weights.safetensors")
