"""A package folder named in Data-Juicer's custom_operator_paths runs its ops in spawn workers,
which import the folder afresh under the same module name the main process gave it."""
from __future__ import annotations

import pytest

from djx import Pipeline

WORD_OPS = '''
from djx import Filter, register_op


@register_op("tplf_word_count_filter")
class WordCountFilter(Filter):
    stats_keys = ("num_words",)

    def __init__(self, min_words: int = 2, **common):
        super().__init__(**common)
        self.min_words = min_words

    def compute_sample(self, sample, batch):
        batch.stats(sample)["num_words"] = len(batch.text(sample).split())

    def keep(self, stats):
        return stats["num_words"] >= self.min_words
'''


@pytest.mark.slow
@pytest.mark.spawn
def test_a_package_folder_plugin_runs_in_spawn_workers(tmp_path, write_jsonl, write_recipe, read_jsonl):
    package = tmp_path / "plugins" / "word_pkg"
    package.mkdir(parents=True)
    (package / "word_ops.py").write_text(WORD_OPS)
    (package / "__init__.py").write_text("from .word_ops import WordCountFilter  # noqa: F401\n")
    write_jsonl(tmp_path / "job" / "d.jsonl", [{"id": i, "text": " ".join(["w"] * i)} for i in range(1, 6)])
    recipe = write_recipe(tmp_path / "job" / "r.yaml", dataset_path="d.jsonl", export_path="out/k.jsonl",
                          custom_operator_paths=["../plugins/word_pkg"], np=2, start_method="spawn",
                          batch_size=1, process=[{"tplf_word_count_filter": {"min_words": 3}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda line: None)
    assert summary["workers"] == 2 and summary["check"]["ok"]
    assert [s["id"] for s in read_jsonl(tmp_path / "job" / "out" / "k.jsonl")] == [3, 4, 5]
