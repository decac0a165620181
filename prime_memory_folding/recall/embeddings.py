"""Text -> vector backends: a built-in static model and optional others.

Every backend is an :class:`Embedder`: it has a ``name`` that identifies its vector
space, a ``dim``, and ``embed(texts)`` that returns a float32 matrix of shape
``(len(texts), dim)`` whose rows have unit length. A text the model cannot represent
embeds to a zero row, which has no direction: an empty or blank text with every backend,
and with the built-in model also a text made only of tokens it does not know, such as
emoji.

Pick a backend with a spec string, given to :func:`load_embedder` or set in the
``PRIME_MEMORY_EMBEDDER`` environment variable:

==========================================  ===========================================
spec                                        backend
==========================================  ===========================================
``builtin`` (or unset, or empty)            the bundled static model, 256 dimensions,
                                            offline, numpy + model2vec only
``model2vec:<folder>``                      a model2vec model saved in a local folder
``model2vec:<org>/<name>``                  a model2vec model from the local Hugging
                                            Face cache; never downloads
``model2vec:hf:<org>/<name>``               the same, downloaded if it is not cached
``sentence-transformers:<folder-or-name>``  a sentence-transformers model from a folder
                                            or the local cache; needs the
                                            ``sentence-transformers`` extra
``sentence-transformers:hf:<name>``         the same, downloaded if it is not cached
``openai:<base_url>#<model>``               an OpenAI-compatible ``/embeddings``
                                            endpoint (OpenAI, Ollama, LM Studio, vLLM)
==========================================  ===========================================

Only the ``hf:`` forms ever reach the network for model weights; nothing downloads
unless a spec asks for it. For ``openai:`` the base URL is the one OpenAI clients take,
ending in ``/v1``, e.g. ``openai:http://localhost:11434/v1#nomic-embed-text``. An API
key, when the endpoint needs one, is read from ``PRIME_MEMORY_EMBEDDER_API_KEY`` so
that it never appears in a spec or in a store.

numpy, model2vec and the optional backends are imported when a backend is built, not
when this module is imported.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import EmbeddingError, InvalidInput

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = [
    "API_KEY_ENV",
    "BUILTIN_MODEL",
    "EMBEDDER_ENV",
    "Embedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "builtin_model_path",
    "load_embedder",
]

EMBEDDER_ENV = "PRIME_MEMORY_EMBEDDER"
API_KEY_ENV = "PRIME_MEMORY_EMBEDDER_API_KEY"
BUILTIN_MODEL = "minilm-distilled-256"
HUB_PREFIX = "hf:"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of one fixed dimension."""

    @property
    def name(self) -> str:
        """A stable identifier of the vector space, such as ``builtin:minilm-distilled-256``."""
        ...

    @property
    def dim(self) -> int:
        """The number of dimensions of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` into a ``(len(texts), dim)`` float32 matrix with unit rows."""
        ...


def builtin_model_path() -> Path:
    """Return the folder of the model that ships inside the package."""
    return Path(__file__).resolve().parent.parent / "models" / BUILTIN_MODEL


class StaticEmbedder:
    """A model2vec static model: a token-vector table averaged per text, on numpy.

    Args:
        model: a folder saved by model2vec, or a Hugging Face hub id. ``None`` loads
            the bundled model.
        allow_download: fetch a hub id that is not in the local cache. Without it a
            hub id is only looked up in the cache, and nothing is downloaded.

    Raises:
        EmbeddingError: the model cannot be found or loaded.
    """

    def __init__(
        self, model: str | os.PathLike[str] | None = None, *, allow_download: bool = False
    ):
        try:
            from model2vec import StaticModel
        except ImportError as exc:
            raise EmbeddingError(
                "the built-in embedder needs model2vec, a dependency of prime-memory-folding: "
                f"pip install 'model2vec>=0.10,<1'; or set {EMBEDDER_ENV} to another backend"
            ) from exc

        if model is None:
            folder: str = str(builtin_model_path())
            self.name = f"builtin:{BUILTIN_MODEL}"
            if not Path(folder, "model.safetensors").is_file():
                raise EmbeddingError(
                    f"the bundled embedding model is missing from {folder}; reinstall "
                    f"prime-memory-folding, or set {EMBEDDER_ENV} to another model"
                )
        else:
            folder, label = _model2vec_source(model, allow_download)
            self.name = f"model2vec:{label}"
        try:
            self._model = StaticModel.from_pretrained(folder, force_download=False)
        except Exception as exc:  # model2vec raises many kinds; all mean "cannot load"
            raise EmbeddingError(
                f"cannot load the model2vec model {folder!r} ({exc}); point {EMBEDDER_ENV} "
                "at a folder written by StaticModel.save_pretrained"
            ) from exc
        self.dim: int = int(self._model.dim)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; see :class:`Embedder`."""

        def encode(batch: list[str]) -> Any:
            # Worker processes pay off only for huge batches and surprise a server.
            return self._model.encode(batch, use_multiprocessing=False)

        return _embed_with(encode, texts, self.dim, self.name, lambda: self.dim)

    def embed_weighted(self, text: str, weights: Mapping[str, float]) -> Matrix:
        """``text``'s unit vector with each token's row times its word's weight.

        ``weights`` maps words (``\\w+`` runs of ``text``, in lower case) to
        weights; a token outside every word, or of a word without a weight,
        weighs nothing. With every token weighing the same, the vector is
        :meth:`embed`'s. Where no token weighs anything, or the text is longer
        than the model reads, it is :meth:`embed`'s too.
        """
        import numpy as np

        from ..core.lexicon import WORD

        model = self._model
        encoding = model.tokenizer.encode(text, add_special_tokens=False)
        kept = [
            (token, span)
            for token, span in zip(encoding.ids, encoding.offsets)
            if token != model.unk_token_id
        ]
        limit = getattr(model, "max_length", None)
        word_at: dict[int, str] = {}
        for match in WORD.finditer(text):
            word_at.update(dict.fromkeys(range(match.start(), match.end()), match.group().lower()))
        scale = np.array([weights.get(word_at.get(start, ""), 0.0) for _, (start, _) in kept])
        if not kept or (limit is not None and len(kept) > limit) or not scale.any():
            return self._one(text)
        rows = np.asarray(model.encode_as_sequence(text), dtype=np.float64)
        if rows.shape != (len(kept), self.dim):  # another tokenisation: no weights
            return self._one(text)
        mean = (rows * scale[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        vector: Matrix = (mean / norm if norm > 0 else mean).astype(np.float32)
        return vector

    def _one(self, text: str) -> Matrix:
        vector: Matrix = self.embed([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self.name!r}, dim={self.dim})"


class SentenceTransformerEmbedder:
    """A sentence-transformers model, run with torch on the CPU unless told otherwise.

    Needs the optional ``sentence-transformers`` extra.

    Args:
        model: a local folder, or a model name looked up in the local Hugging Face cache.
        allow_download: fetch a named model that is not in the local cache.
        device: the torch device, ``"cpu"`` by default.

    Raises:
        EmbeddingError: the extra is not installed, or the model cannot be found or loaded.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        allow_download: bool = False,
        device: str = "cpu",
    ):
        given = os.fspath(model)
        folder = Path(given).expanduser()
        local = folder.is_dir()
        if not local and _looks_like_path(given):
            raise EmbeddingError(_missing_folder("sentence-transformers", given))
        try:
            st = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise EmbeddingError(
                "the sentence-transformers backend needs the optional extra: "
                "pip install 'prime-memory-folding[sentence-transformers]'; "
                f"or set {EMBEDDER_ENV} to another backend, such as 'builtin'"
            ) from exc
        source = str(folder.resolve()) if local else given
        try:
            self._model = st.SentenceTransformer(
                source, device=device, local_files_only=local or not allow_download
            )
        except Exception as exc:  # torch, transformers and the hub raise many kinds
            fix = (
                "a folder saved by sentence-transformers"
                if local
                else f"an existing model folder, or to 'sentence-transformers:{HUB_PREFIX}{given}' "
                "to allow a download"
            )
            raise EmbeddingError(
                f"cannot load the sentence-transformers model {given!r} ({exc}); "
                f"set {EMBEDDER_ENV} to {fix}"
            ) from exc
        self.name = f"sentence-transformers:{source}"
        size = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dim = size()
        if not isinstance(dim, int) or dim <= 0:
            raise EmbeddingError(
                f"the sentence-transformers model {given!r} does not report its dimension; "
                f"set {EMBEDDER_ENV} to a model with a fixed output size"
            )
        self.dim: int = dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; see :class:`Embedder`."""

        def encode(batch: list[str]) -> Any:
            return self._model.encode(batch, convert_to_numpy=True, show_progress_bar=False)

        return _embed_with(encode, texts, self.dim, self.name, lambda: self.dim)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim})"


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint, over the standard library.

    Works with OpenAI, Ollama, LM Studio, vLLM and others that speak the same API.

    Args:
        base_url: the API root as OpenAI clients take it, e.g. ``http://localhost:11434/v1``.
        model: the embedding model name the endpoint serves.
        api_key: sent as a bearer token; ``None`` reads ``PRIME_MEMORY_EMBEDDER_API_KEY``,
            and no key is sent if that is unset.
        timeout: seconds to wait for each request.
        batch_size: texts per request.
        dim: the expected dimension; ``None`` learns it from the first answer.

    Raises:
        InvalidInput: the base URL is not http(s), or a number is out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
        dim: int | None = None,
    ):
        base = base_url.strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise InvalidInput(
                f"embedding endpoint {base_url!r} is not an http(s) URL; set {EMBEDDER_ENV} "
                "to 'openai:<base_url>#<model>', e.g. openai:http://localhost:11434/v1#nomic-embed-text"
            )
        if not model.strip():
            raise InvalidInput(
                f"no embedding model named for {base}; set {EMBEDDER_ENV} to "
                f"'openai:{base}#<model>'"
            )
        if batch_size < 1 or not timeout > 0 or (dim is not None and dim < 1):
            raise InvalidInput("batch_size, timeout and dim must be positive")
        self.base_url = base
        self.model = model.strip()
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.timeout = timeout
        self.batch_size = batch_size
        self.name = f"openai:{base}#{self.model}"
        self._dim = dim

    @property
    def dim(self) -> int:
        """The dimension; asks the endpoint once if it was not given.

        Raises:
            EmbeddingError: the endpoint cannot be reached or answers badly.
        """
        if self._dim is None:
            self._dim = len(self._request(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; see :class:`Embedder`.

        Raises:
            EmbeddingError: the endpoint cannot be reached, refuses, or answers badly.
        """

        def encode(batch: list[str]) -> Any:
            rows: list[list[float]] = []
            for start in range(0, len(batch), self.batch_size):
                rows.extend(self._request(batch[start : start + self.batch_size]))
            return rows

        matrix = _embed_with(encode, texts, self._dim, self.name, lambda: self.dim)
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        return matrix

    def _request(self, batch: list[str]) -> list[list[float]]:
        import http.client
        import urllib.error
        import urllib.request

        url = f"{self.base_url}/embeddings"
        body = json.dumps({"model": self.model, "input": batch, "encoding_format": "float"})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace").strip()
            hint = {
                401: f"set {API_KEY_ENV} to a valid key",
                403: f"set {API_KEY_ENV} to a key allowed to use {self.model!r}",
                404: f"check that the base URL in {EMBEDDER_ENV} ends in /v1 and that "
                f"the endpoint serves the model {self.model!r}",
            }.get(exc.code, f"check the model name and base URL in {EMBEDDER_ENV}")
            raise EmbeddingError(f"{url} answered HTTP {exc.code}: {detail}; {hint}") from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EmbeddingError(
                f"cannot reach the embedding endpoint {url} ({reason}); start that server, "
                f"or fix the base URL in {EMBEDDER_ENV}"
            ) from exc
        except ValueError as exc:
            raise EmbeddingError(
                f"{url} did not answer with JSON; check that the base URL in {EMBEDDER_ENV} "
                "points at an OpenAI-compatible API"
            ) from exc
        return _parse_embeddings(payload, len(batch), url)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r})"


def load_embedder(spec: str | None = None) -> Embedder:
    """Build the embedder a spec string names; see the module docstring for the syntax.

    Args:
        spec: the backend to use; ``None`` reads ``PRIME_MEMORY_EMBEDDER`` and falls back
            to the bundled model.

    Raises:
        InvalidInput: the spec is malformed or names an unknown backend.
        EmbeddingError: the backend cannot be loaded.
    """
    if spec is None:
        spec = os.environ.get(EMBEDDER_ENV, "")
    spec = spec.strip()
    if spec in ("", "builtin", f"builtin:{BUILTIN_MODEL}"):
        return StaticEmbedder()
    kind, sep, target = spec.partition(":")
    target = target.strip()
    if not sep or not target:
        raise InvalidInput(_bad_spec(spec))
    allow_download = target.startswith(HUB_PREFIX)
    if allow_download:
        target = target[len(HUB_PREFIX) :].strip()
    if kind == "model2vec":
        return StaticEmbedder(target, allow_download=allow_download)
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(target, allow_download=allow_download)
    if kind == "openai" and not allow_download:
        base_url, hash_sign, model = target.partition("#")
        if not hash_sign:
            raise InvalidInput(
                f"{EMBEDDER_ENV}={spec!r} names no model; write 'openai:<base_url>#<model>'"
            )
        return OpenAIEmbedder(base_url, model)
    raise InvalidInput(_bad_spec(spec))


# -- helpers ------------------------------------------------------------------------


def _embed_with(
    encode: Callable[[list[str]], Any],
    texts: Sequence[str],
    dim: int | None,
    name: str,
    blank_width: Callable[[], int],
) -> Matrix:
    """Run ``encode`` on the texts that have content and return unit rows, zeros elsewhere.

    ``dim`` is the width to check the answer against, or ``None`` to accept any width;
    ``blank_width`` gives the width when no text has content.
    """
    import numpy as np

    if isinstance(texts, str):
        raise InvalidInput("embed() takes a sequence of texts, not one string; wrap it in a list")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise InvalidInput(f"embed() takes strings, got {type(text).__name__}")
    keep = [i for i, text in enumerate(texts) if text.strip()]
    if not keep:
        return np.zeros((len(texts), blank_width()), dtype=np.float32)
    try:
        vectors = np.asarray(encode([texts[i] for i in keep]), dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"{name} returned vectors of unequal length; set {EMBEDDER_ENV} to a model "
            "with a fixed output size"
        ) from exc
    if vectors.ndim != 2 or vectors.shape[0] != len(keep):
        raise EmbeddingError(
            f"{name} returned an array of shape {vectors.shape} for {len(keep)} texts; "
            f"set {EMBEDDER_ENV} to a working embedding model"
        )
    if dim is not None and vectors.shape[1] != dim:
        raise EmbeddingError(
            f"{name} returned {vectors.shape[1]}-dimensional vectors, expected {dim}; "
            f"the model behind {EMBEDDER_ENV} changed, so use a new store or the old model"
        )
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"{name} returned NaN or infinite values; check the model")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    out[keep] = vectors
    return out


def _parse_embeddings(payload: object, count: int, url: str) -> list[list[float]]:
    """Pull ``count`` vectors in input order out of an ``/embeddings`` answer."""
    problem = f"{url} answered without {count} embeddings in 'data'"
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise EmbeddingError(f"{problem}; check that {EMBEDDER_ENV} names an embedding model")
    rows: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        vector = item.get("embedding") if isinstance(item, dict) else None
        index = item.get("index", position) if isinstance(item, dict) else position
        if (
            not isinstance(vector, list)
            or not vector
            or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector)
            or not isinstance(index, int)
            or not 0 <= index < count
            or rows[index] is not None
        ):
            raise EmbeddingError(f"{problem}, as lists of numbers; check the endpoint")
        rows[index] = [float(x) for x in vector]
    return [row for row in rows if row is not None]


def _looks_like_path(text: str) -> bool:
    return os.path.isabs(text) or text.startswith((".", "~")) or "\\" in text


def _model2vec_source(model: str | os.PathLike[str], allow_download: bool) -> tuple[str, str]:
    """Resolve a model2vec folder, or a hub id through the local cache, to (source, label).

    The label is the resolved folder, or the hub id. With ``allow_download`` a hub id
    that is not cached is returned as is, for model2vec to fetch; without it, an
    uncached id is an error.
    """
    given = os.fspath(model)
    folder = Path(given).expanduser()
    if folder.is_dir():
        resolved = str(folder.resolve())
        return resolved, resolved
    if _looks_like_path(given):
        raise EmbeddingError(_missing_folder("model2vec", given))
    from huggingface_hub import snapshot_download

    try:
        return str(snapshot_download(given, local_files_only=True)), given
    except Exception as exc:  # hub errors vary by version; all mean "not in the cache"
        if allow_download:
            return given, given
        raise EmbeddingError(
            f"no model2vec model folder {given!r}, and no model of that name in the local "
            f"Hugging Face cache; set {EMBEDDER_ENV} to an existing folder, or to "
            f"'model2vec:{HUB_PREFIX}{given}' to download it"
        ) from exc


def _missing_folder(backend: str, given: str) -> str:
    return (
        f"{backend} model folder {given!r} does not exist; set {EMBEDDER_ENV} to an existing folder"
    )


def _bad_spec(spec: str) -> str:
    return (
        f"{EMBEDDER_ENV}={spec!r} is not an embedder spec; use 'builtin', "
        "'model2vec:<folder>', 'sentence-transformers:<folder-or-name>' or "
        "'openai:<base_url>#<model>'"
    )
