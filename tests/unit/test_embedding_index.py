"""The semantic duplicate index: a sample whose most similar earlier sample is at or above the
threshold duplicates it, and the first of such a chain is kept; whatever the order samples come in,
however many blocks the comparison takes, in memory or spilled to the state folder."""
from __future__ import annotations

import random

import numpy as np
import pytest

import djx.core.dedup.embeddings as embeddings
from djx.core.dedup.embeddings import EmbeddingIndex
from djx.core.dedup.key_rows import IndexSpace


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def dataset(n_groups: int = 12, per_group: int = 6, dim: int = 32, seed: int = 0) -> list[np.ndarray | None]:
    """Groups of near copies (cosine ~0.99 with their centre) of random directions, shuffled, with a
    few samples without an embedding."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(n_groups, dim)))
    vectors = [unit(c + 0.08 * rng.normal(size=dim) / np.sqrt(dim)) for c in centres for _ in range(per_group)]
    vectors += [None] * 5
    random.Random(seed).shuffle(vectors)
    return vectors


def reference(vectors: list, threshold: float) -> list[int]:
    """The rule, written plainly (one cluster): each sample's best earlier sample, then its chain's start."""
    f16 = [None if v is None else np.asarray(v, np.float16).astype(np.float32) for v in vectors]
    kept = list(range(len(vectors)))
    for i, v in enumerate(f16):
        if v is None:
            continue
        sims = [(float(v @ w), j) for j, w in enumerate(f16[:i]) if w is not None]
        best = max(sims, key=lambda s: (s[0], -s[1]), default=None)
        if best is not None and best[0] >= threshold:
            kept[i] = kept[best[1]]
    return kept


def answers(vectors: list, threshold: float = 0.95, order=None, **kw) -> list[int]:
    index = EmbeddingIndex(lambda s: s["v"], threshold, **kw)
    for pos in order or range(len(vectors)):
        index.add(pos, {"v": vectors[pos]})
    out = [index.kept_for(pos, {"v": v}) for pos, v in enumerate(vectors)]
    index.close()
    return out


def test_near_copies_name_the_first_of_their_group_and_distinct_ones_are_kept():
    vectors = dataset()
    got = answers(vectors, n_clusters=1)
    assert got == reference(vectors, 0.95)
    groups = {}
    for pos, kept in enumerate(got):
        groups.setdefault(kept, []).append(pos)
    assert len([g for g in groups.values() if len(g) > 1]) == 12  # each group of copies, once
    assert all(kept == min(members) for kept, members in groups.items())
    assert all(got[pos] == pos for pos, v in enumerate(vectors) if v is None)  # no embedding: never a duplicate


def test_the_answer_is_the_same_whatever_the_order_of_adding_and_the_blocks(monkeypatch):
    vectors = dataset(seed=1)
    expected = answers(vectors, n_clusters=1)
    monkeypatch.setattr(embeddings, "BLOCK", 5)  # many row and column blocks
    shuffled = random.Random(7).sample(range(len(vectors)), len(vectors))
    assert answers(vectors, order=shuffled, n_clusters=1) == expected


@pytest.mark.parametrize("budget", [1, 25, 10**6])
def test_spilled_embeddings_give_the_same_answers_and_the_file_goes_with_close(tmp_path, budget):
    vectors = dataset(seed=2)
    expected = answers(vectors, n_clusters=3)
    index = EmbeddingIndex(lambda s: s["v"], 0.95, 3, IndexSpace(str(tmp_path), budget))
    for pos, v in enumerate(vectors):
        index.add(pos, {"v": v})
    assert bool(list(tmp_path.iterdir())) == (budget < 10**6)  # past the budget: a file in the state folder
    assert [index.kept_for(pos, {"v": v}) for pos, v in enumerate(vectors)] == expected
    index.close()
    assert not list(tmp_path.iterdir())


def test_well_separated_groups_survive_clustering_and_clustering_is_deterministic():
    vectors = dataset(n_groups=8, per_group=5, seed=3)
    exact = answers(vectors, n_clusters=1)
    assert answers(vectors, n_clusters=4) == answers(vectors, n_clusters=4)
    # k-means keeps each tight group within one cluster here, so no pair is missed
    assert answers(vectors, n_clusters=4) == exact


def test_removed_at_counts_what_each_threshold_would_remove():
    vectors = dataset(seed=4)
    index = EmbeddingIndex(lambda s: s["v"], 0.95, 1)
    for pos, v in enumerate(vectors):
        index.add(pos, {"v": v})
    counts = index.removed_at([0.5, 0.95, 0.999])
    index.close()
    for t, n in counts.items():
        assert n == sum(k != pos for pos, k in enumerate(reference(vectors, t)))
    assert counts[0.5] >= counts[0.95] >= counts[0.999]
    assert counts[0.95] == 12 * 5  # all but the first of each group


def test_a_chain_is_kept_through_its_first_sample():
    """a ~ b and b ~ c above the threshold, a and c below it: c names a, the first of the chain."""
    a = np.array([1.0, 0.0])
    b = unit(np.array([1.0, 0.3]))
    c = unit(np.array([1.0, 0.62]))
    assert a @ b > 0.95 and b @ c > 0.95 and a @ c < 0.95
    assert answers([a, b, c], 0.95, n_clusters=1) == [0, 0, 0]


def test_the_embedding_stat_round_trips_through_json_and_anything_else_is_refused():
    import json

    from djx import DjxError
    from djx.ops.common.embeddings import decode_embedding, encode_embedding, sample_embedding
    a, b = unit(np.array([1.0, 0.0, 0.0])), unit(np.array([0.0, 1.0, 0.0]))
    both = sample_embedding([a, b])  # several images: the direction of their mean
    assert np.allclose(both, unit(np.array([1.0, 1.0, 0.0])))
    text = json.loads(json.dumps(encode_embedding(both)))
    assert np.abs(decode_embedding(text) - both).max() < 1e-3
    assert decode_embedding("") is None  # a sample without images
    for bad in ("not base64!", encode_embedding(np.array([np.nan, 1.0]))):
        with pytest.raises(DjxError, match="recompute_stats"):
            decode_embedding(bad)
