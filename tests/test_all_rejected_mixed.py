"""A run that rejects (nearly) every sample fails whatever the mix of rejection codes: half of them
missing their image and half their text key exits 1, not 0 with an empty export."""
from __future__ import annotations


def test_a_run_rejecting_everything_for_two_reasons_fails(tmp_path, write_jsonl, write_recipe, djx_cli):
    records = [{"id": i, "text": "<__dj__image> an image that is not there", "images": [f"missing/{i}.png"]}
               if i % 2 else {"id": i, "caption": "the text is under another key"} for i in range(100)]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}, {"image_shape_filter": {"min_width": 10}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1, res.err
    assert "100 of 100 samples (100.0%) were rejected (bad_input 50, bad_image 50)" in res.err
    assert "missing text key 'text'" in res.err and (tmp_path / "out" / "o.rejected.jsonl").exists()
    # the user's own bound replaces the rule, as for one code
    assert djx_cli("process", recipe, "--quiet", "--restart", "--set", "max_rejected_fraction=1.0").rc == 0
