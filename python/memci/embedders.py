"""Ready-made embedders for hybrid search (``ContextSystem(embedder=...)``, ``PageSearch(embedder=...)``).

- :class:`OpenAIEmbedder` / :class:`AsyncOpenAIEmbedder`: any OpenAI-compatible embeddings
  endpoint (OpenAI, Azure, vLLM, Ollama, LiteLLM, llama.cpp's server...), through the ``openai``
  client (extra ``openai``).
- :class:`StaticEmbedder`: a static embedding model (one vector per token, averaged: no neural
  network at run time, numpy only), from a tokenizer file and a safetensors matrix of token
  vectors; :meth:`StaticEmbedder.wordllama` loads the 256-dimension model whose weights ship inside
  the ``wordllama`` package on PyPI (extra ``static``), offline.

Nothing downloads at import time or when an embedder is made from local files; a missing package
raises :class:`~memci.MissingExtraError` naming the extra.
"""

from __future__ import annotations

from importlib import util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memci._optional import needs_extra
from memci.errors import InvalidOperationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["AsyncOpenAIEmbedder", "OpenAIEmbedder", "StaticEmbedder"]


def _vectors(response: Any) -> list[list[float]]:
    """The embeddings of an OpenAI embeddings response, in the order of the inputs."""
    return [item.embedding for item in sorted(response.data, key=lambda item: item.index)]


class OpenAIEmbedder:
    """Texts in, vectors out, by an OpenAI-compatible ``/embeddings`` endpoint: one request per call
    (the context system batches the pages it archives together). ``client``: an ``openai.OpenAI``
    (or compatible) client; else one is made from ``base_url`` and ``api_key`` (the ``openai``
    package's defaults and environment variables otherwise). ``dimensions`` is passed on when given."""

    #: The ``openai`` client class made when no client is given.
    _client_class = "OpenAI"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
    ) -> None:
        if client is None:
            with needs_extra("openai", type(self).__name__):
                import openai
            client = getattr(openai, self._client_class)(base_url=base_url, api_key=api_key)
        self.client, self.model, self.dimensions = client, model, dimensions
        self.__name__ = f"OpenAIEmbedder({model})"

    def _options(self) -> dict[str, Any]:
        return {} if self.dimensions is None else {"dimensions": self.dimensions}

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return _vectors(self.client.embeddings.create(model=self.model, input=texts, **self._options()))


class AsyncOpenAIEmbedder(OpenAIEmbedder):
    """:class:`OpenAIEmbedder` over an ``openai.AsyncOpenAI`` client: ``async def __call__``, awaited
    by :class:`~memci.AsyncContextSystem` on its loop."""

    _client_class = "AsyncOpenAI"

    async def __call__(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        return _vectors(await self.client.embeddings.create(model=self.model, input=texts, **self._options()))


class StaticEmbedder:
    """A static embedding model: each text is tokenized (a ``tokenizers`` JSON file) and its
    vector is the mean of its tokens' rows of a safetensors matrix (``tensor``), special tokens
    left out, neither padded nor truncated whatever the tokenizer file asks. No network, no neural
    network: O(tokens * dim) numpy per text."""

    def __init__(self, tokenizer: str | Path, weights: str | Path, *, tensor: str = "embedding.weight") -> None:
        with needs_extra("static", "StaticEmbedder"):
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer))
            matrix = load_file(str(weights))[tensor]
        except (OSError, KeyError, Exception) as e:  # tokenizers and safetensors raise their own types
            raise InvalidOperationError(f"StaticEmbedder: cannot load {tokenizer} and {weights}: {e}") from None
        # A tokenizer file made for a transformer may pad and truncate (to 128 tokens, say): a mean
        # of token vectors wants neither the padding tokens nor a cut text.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.matrix: npt.NDArray[np.float32] = np.asarray(matrix, dtype=np.float32)
        self.__name__ = f"StaticEmbedder({Path(weights).name})"

    @classmethod
    def wordllama(cls) -> StaticEmbedder:
        """The 256-dimension WordLlama model (``l2_supercat``), whose tokenizer and weights ship in
        the ``wordllama`` package (extra ``static``); loaded from the package's files, offline."""
        with needs_extra("static", "StaticEmbedder.wordllama"):
            spec = util.find_spec("wordllama")
            if spec is None or spec.origin is None:
                raise ImportError("No module named 'wordllama'", name="wordllama")
        root = Path(spec.origin).parent
        return cls(
            root / "tokenizers" / "l2_supercat_tokenizer_config.json", root / "weights" / "l2_supercat_256.safetensors"
        )

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, encoding in enumerate(self.tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            ids = [i for i in encoding.ids if 0 <= i < len(self.matrix)]
            if ids:
                out[row] = self.matrix[ids].mean(axis=0)
        return out
