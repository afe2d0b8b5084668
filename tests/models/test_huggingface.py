"""A locally stored Hugging Face classifier as a staged model (models/huggingface.py): tiny randomly initialised
BERT, RoBERTa and DistilBERT checkpoints saved to a temporary folder with a word-level tokenizer; their own outputs
through the stages, their attention and value vectors, one-line refusals, and one analysis end to end."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from attn_study.cli import analyze_main
from attn_study.errors import UserError
from tests.helpers import entry_point, token_batch
from tests.hf_checkpoints import save_checkpoint

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_the_stages_give_the_checkpoints_own_output_and_its_attention(tmp_path, kind):
    from attn_study.analysis.aggregation import tracer
    from attn_study.models.huggingface import PretrainedClassifier, load_pretrained

    hf, _ = load_pretrained(save_checkpoint(tmp_path, kind))
    model = PretrainedClassifier(hf).eval()
    batch = token_batch([[5, 6, 7, 8], [9, 10], [11, 12, 13]], boundary=True)  # 2, 3: [CLS], [SEP]
    with torch.no_grad():
        own = hf(input_ids=batch["ids"], attention_mask=batch["mask"].long(), output_attentions=True)
        logits, alpha = model(batch)
        trace = tracer(model)(batch)
    torch.testing.assert_close(logits, own.logits, atol=1e-6, rtol=0)
    assert (alpha[:, 0] == 1).all() and alpha[:, 1:].sum() == 0
    real = batch["mask"][:, None, :, None] & batch["mask"][:, None, None, :]
    for layer in range(2):
        torch.testing.assert_close(trace.attention[:, layer] * real, own.attentions[layer] * real)
    assert model.attention_shape == (2, 2, True) and trace.transformed.shape == (3, 2, 2, 6, 8)


def test_the_value_vectors_through_the_output_projection_give_the_attention_output(tmp_path):
    """Σ_h Σ_j A^h[i, j] f^h(x_j) + b_O is what BERT's attention output projection returns (before its dropout,
    residual and layer norm)."""
    from attn_study.models.huggingface import PretrainedClassifier, load_pretrained

    hf, _ = load_pretrained(save_checkpoint(tmp_path))
    model = PretrainedClassifier(hf).eval()
    batch = token_batch([[5, 6, 7, 8], [9, 10]], boundary=True)
    seen = []
    dense = hf.bert.encoder.layer[1].attention.output.dense
    hook = dense.register_forward_hook(lambda _m, _i, out: seen.append(out))
    with torch.no_grad():
        trace = model.layer_trace(batch)
    hook.remove()
    mixed = torch.einsum("bhij,bhjo->bio", trace.attention[:, 1], trace.transformed[:, 1]) + dense.bias
    mask = batch["mask"][..., None]
    torch.testing.assert_close(mixed * mask, seen[0] * mask, atol=1e-6, rtol=0)


def test_a_wrong_directory_or_a_missing_transformers_gets_one_line(tmp_path, monkeypatch):
    from attn_study.models.huggingface import load_pretrained

    with pytest.raises(UserError, match="hf_model=.*no Hugging Face checkpoint"):
        load_pretrained(tmp_path / "nowhere")
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(UserError, match="transformers package is missing"):
        load_pretrained(tmp_path)


def test_a_checkpoint_whose_weights_transformers_would_initialise_is_refused_naming_them(tmp_path):
    """A bare encoder has no classification head, and a head for 2 labels does not fit a config of 3: either would be
    initialised at random. The classifier itself loads, every weight its own."""
    from attn_study.models.huggingface import load_pretrained

    hf, _ = load_pretrained(save_checkpoint(tmp_path / "classifier"))
    saved = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "classifier")
    for name, weight in saved.state_dict().items():
        assert torch.equal(hf.state_dict()[name], weight), name
    bare = save_checkpoint(tmp_path / "bare", head=False)
    with pytest.raises(UserError, match=r"hf_model=.*bare: the checkpoint lacks classifier.bias, classifier.weight,"):
        load_pretrained(bare)
    relabelled = save_checkpoint(tmp_path / "relabelled")
    config = json.loads((relabelled / "config.json").read_text())
    config["id2label"] = {str(i): f"class {i}" for i in range(3)}
    config["label2id"] = {f"class {i}": i for i in range(3)}
    (relabelled / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"holds classifier.bias, classifier.weight in another shape"):
        load_pretrained(relabelled)


def test_a_tiny_checkpoint_analysed_end_to_end_and_the_tests_it_cannot_take_refused(tmp_path, monkeypatch, capsys):
    folder = save_checkpoint(tmp_path / "checkpoint")
    data = (
        "hf_data=['dataset=synthetic','dataset.source.n_train=16','dataset.source.n_dev=8','dataset.source.n_test=8']"
    )
    out = tmp_path / "out"
    code, _, err = entry_point(  # the analyze entry point in this process (in a fresh one: tests/test_run.py)
        analyze_main,
        f"hf_model={folder}",
        data,
        "analysis=[agreement,jain_wallace]",
        "analysis.agreement.ig_steps=4",
        "analysis.jain_wallace.tests=[correlation]",
        "analysis.jain_wallace.attention_scores=flow",
        f"hydra.run.dir={out}",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, err[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ag/n_instances"] == 8 and summary["ag/integrated_gradients/rollout/tau/n"] >= 1
    assert "ag/attention/loo/tau/mean" not in summary  # no pooling attention to compare
    assert summary["jw/tau_loo/n"] >= 1
    refused = [f"hf_model={folder}", data, "analysis=[jain_wallace]", f"hydra.run.dir={out}"]  # in this process
    code, _, err = entry_point(analyze_main, *refused, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("attn-study-analyze: error: analysis.jain_wallace")


def test_what_needs_a_pooling_attention_is_refused_before_any_work(tmp_path):
    from hydra import compose, initialize_config_dir

    from attn_study.analysis.aggregation import AggregationOptions, check_aggregations
    from attn_study.cli import CONFIG_DIR
    from attn_study.job.pretrained import analyze_pretrained
    from attn_study.models.huggingface import PretrainedClassifier, load_pretrained

    folder = save_checkpoint(tmp_path / "checkpoint")
    model = PretrainedClassifier(load_pretrained(folder)[0])
    with pytest.raises(UserError, match="analysis.faithfulness.methods: attention is the pooling attention"):
        check_aggregations(model, ["attention", "rollout"], AggregationOptions(), "analysis.faithfulness.methods")
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("analyze", overrides=[f"hf_model={folder}", "analysis=[serrano_smith]"])
        with pytest.raises(UserError, match=r"analysis=\[serrano_smith\]: perturbs a pooling attention"):
            analyze_pretrained(cfg, tmp_path / "out")
        for option, says in (
            ("hf_data=['dataset.source.n_train=0']", r"dataset.source.n_train=0: must be a whole number >= 1"),
            ("seed=-1", r"seed=-1: must be a whole number in \[0, 4294967295\]"),
        ):
            cfg = compose("analyze", overrides=[f"hf_model={folder}", "analysis=[agreement]", option])
            with pytest.raises(UserError, match=says):
                analyze_pretrained(cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_sequence_holds_the_fewer_of_the_models_positions_and_the_tokenizers_limit():
    """BERT: its position table (64) or the tokenizer's ``model_max_length`` (40), the fewer; RoBERTa's table holds
    ``pad_token_id`` + 1 positions below its first (roberta-base: 514 rows, 512 usable)."""
    from types import SimpleNamespace

    from attn_study.models.huggingface import position_limit

    bert = SimpleNamespace(model_type="bert", max_position_embeddings=64)
    assert position_limit(bert, SimpleNamespace(model_max_length=40)) == 40
    assert position_limit(bert, SimpleNamespace(model_max_length=1000)) == 64
    roberta = SimpleNamespace(model_type="roberta", max_position_embeddings=514, pad_token_id=1)
    assert position_limit(roberta, SimpleNamespace(model_max_length=10**30)) == 512
