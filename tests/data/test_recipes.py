"""The papers' own pipelines (``recipe=jain_wallace``, ``recipe=serrano_smith``): their cleaning, boundary
tokens, document-frequency vocabulary, bounds and splits, on fixtures in the canonical formats, and the
real SST's Table 1 counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from attn_study.data.example import RawExample
from attn_study.data.processed import Preprocessing, build
from attn_study.data.text import EOS, SOS, Vocab
from attn_study.data.twenty_news import TwentyNewsSource
from attn_study.data.twenty_news import jain_wallace_split as news_split
from attn_study.errors import UserError
from attn_study.job.attempt import train_and_test
from attn_study.job.components import build_datamodule
from attn_study.job.run import run as run_job
from tests.data.canonical_files import write_news_tree
from tests.helpers import TINY, compose_config, shared_data


class ListSource:
    name, num_classes, label_names = "toy", 2, ["neg", "pos"]

    def __init__(self, texts: dict[str, list[tuple[str, int]]]):
        self.texts = texts

    def fingerprint(self):
        return {"texts": self.texts}

    def load(self):
        return {
            split: [RawExample(uid=f"{split}-{i}", text=t, label=y) for i, (t, y) in enumerate(rows)]
            for split, rows in self.texts.items()
        }


def recipe_config(*overrides):
    return compose_config("recipe=jain_wallace", *overrides)


def test_the_recipe_composes_the_authors_settings_and_each_is_its_own_option():
    cfg = recipe_config("dataset=sst")
    p = cfg.dataset.preprocessing
    assert (p.clean, p.digits, p.vocab_count, p.boundary_tokens, p.min_length, p.drop_longest) == (
        "remove_non_word",
        "keep",
        "documents",
        True,
        6,
        True,
    )
    assert cfg.model.class_weights == "pos_weight" and cfg.callbacks.model_checkpoint.monitor == "val/auroc"
    assert cfg.training.select_from_epoch == 1
    jw = cfg.analysis.jain_wallace
    assert (
        jw.lam_per_adversary,
        jw.diversity,
        jw.multiclass_output_distance,
        jw.selection,
        jw.epsilon,
        jw.select_epsilon,
    ) == (True, "k_squared", "l1", "authors", 0.01, 0.05)
    assert recipe_config("dataset=babi1").model.class_weights is None  # QA: no class-balanced weight
    imdb = recipe_config("dataset=imdb").dataset
    assert (imdb.source.split, imdb.source.split_seed, imdb.preprocessing.clean, imdb.preprocessing.min_count) == (
        "jain_wallace",
        1378,
        "keras",
        10,
    )
    assert (
        recipe_config(
            "dataset=sst", "dataset.preprocessing.boundary_tokens=false"
        ).dataset.preprocessing.boundary_tokens
        is False
    )
    default = compose_config("dataset=sst")  # without a recipe nothing of it applies
    assert (default.dataset.preprocessing.boundary_tokens, default.model.class_weights) == (False, None)
    assert default.analysis.jain_wallace.selection == "paper"


def test_sst_cleaning_leaves_no_punctuation_and_wraps_every_sequence_in_boundary_tokens():
    texts = {
        "train": [("It 's a good ( really ) film , 2/3 of it .", 1), ("A bad -- dull -- film !", 0)],
        "dev": [("Good , good .", 1), ("Bad ... bad", 0)],
        "test": [("Fine film , 1990s style .", 1), ("Dull .", 0)],
    }
    prep = Preprocessing(clean="remove_non_word", digits="keep", boundary_tokens=True)
    data = build(ListSource(texts), prep)
    for split in ("train", "dev", "test"):
        for ids in data.splits[split].ids:
            tokens = data.vocab.decode(ids.tolist())
            assert tokens[0] == SOS and tokens[-1] == EOS and SOS not in tokens[1:-1] and EOS not in tokens[1:-1]
            assert all(t.isalnum() or t == "<unk>" for t in tokens[1:-1]), tokens
    assert data.vocab.decode(data.splits["test"].ids[0].tolist()) == [SOS, "<unk>", "film", "<unk>", "<unk>", EOS]
    assert "1990s" not in data.vocab.itos and "qqq" not in data.vocab.itos  # digits kept as they are (no qqq)


def test_document_frequency_differs_from_a_total_count():
    docs = [["rare", "rare", "rare"], ["common"], ["common"], ["common", "x"]]
    assert (
        "rare" in Vocab.build(docs, min_count=2).itos
        and "rare" not in Vocab.build(docs, min_count=2, documents=True).itos
    )
    assert "common" in Vocab.build(docs, min_count=2, documents=True).itos


def test_strict_bounds_keep_the_lengths_between_them_only():
    """J&W keep n > 5 (SST, min_length 6) and n < 400 (IMDB, max_length 399): 6 and 399 stay, 5 and 400 go."""
    texts = {split: [(" ".join(["w"] * n), n % 2) for n in (5, 6, 399, 400)] for split in ("train", "dev", "test")}
    data = build(ListSource(texts), Preprocessing(min_length=6, max_length=399))
    assert sorted(len(ids) for ids in data.splits["test"].ids) == [6, 399]
    assert data.splits["test"].lengths.tolist() != [] and build(
        ListSource(texts), Preprocessing(min_length=6, max_length=399, boundary_tokens=True)
    ).splits["test"].lengths.tolist() == [8, 401]  # + <sos> <eos>
    longest = build(ListSource(texts), Preprocessing(min_length=6, drop_longest=True))
    assert sorted(len(ids) for ids in longest.splits["test"].ids) == [6, 399]  # 400, each split's longest, dropped


def test_twenty_news_recipe_split_is_stratified_seeded_and_80_20(tmp_path):
    posts = [RawExample(uid=f"p{i}", text=f"post {i}", label=int(i % 5 == 0)) for i in range(500)]
    split = news_split(posts, 13478)
    assert {k: len(v) for k, v in split.items()} == {"train": 320, "dev": 80, "test": 100}
    for name, part in split.items():
        share = np.mean([p.label for p in part])
        assert share == pytest.approx(0.2, abs=0.02), name  # stratified
    assert news_split(posts, 13478) == split and news_split(posts, 1) != split
    source = TwentyNewsSource(str(write_news_tree(tmp_path / "news")), split="jain_wallace", split_seed=13478)
    loaded = source.load()
    bydate = TwentyNewsSource(str(tmp_path / "news"), dev_size=4).load()
    empty = sum(not e.text.strip() for v in bydate.values() for e in v)
    assert empty == 1  # post 207 is all header
    # the two bydate halves pooled; only the empty post dropped, as theirs drops empty texts
    assert sum(len(v) for v in loaded.values()) == sum(len(v) for v in bydate.values()) - empty
    with pytest.raises(UserError, match="dataset.source.split"):
        TwentyNewsSource(str(tmp_path / "news"), split="random")


def test_ag_news_recipe_dev_is_fifteen_percent_of_train_with_their_seed():
    cfg = recipe_config("dataset=ag_news").dataset.source
    assert (cfg.dev_size, cfg.split_seed) == (9000, 16377)  # 15 % of the 60,000 World + Business articles


def test_imdb_recipe_split_proportions_and_filter():
    from attn_study.data.imdb import jain_wallace_split

    long = " ".join(["word"] * 400)
    train = [RawExample(uid=f"tr{i}", text=long if i % 10 == 0 else f"review {i}", label=i % 2) for i in range(200)]
    test = [RawExample(uid=f"te{i}", text=long if i % 10 == 0 else f"review {i}", label=i % 2) for i in range(200)]
    split = jain_wallace_split(train, test, 1378)
    assert {k: len(v) for k, v in split.items()} == {"train": 144, "dev": 36, "test": 36}  # 180 short: 80/20; 20 %
    assert all("word word" not in e.text for part in split.values() for e in part)
    assert jain_wallace_split(train, test, 1378) == split


@pytest.mark.slow
def test_sst_recipe_gives_the_papers_table_1_counts(tmp_path):
    path = shared_data("sst", "trainDevTestTrees_PTB")
    data = build_datamodule(recipe_config("dataset=sst", f"dataset.path={path}", f"paths.cache_dir={tmp_path}"))
    data.setup()
    assert (len(data.split("train")), len(data.split("test"))) == (6355, 1725)


def test_boundary_tokens_never_reach_a_statistic_heatmap_or_parquet_column(tmp_path):
    """A J&W run on the synthetic task under the recipe's settings: the model sees <sos>/<eos>; lengths,
    correlations, heatmaps and the per-instance table count the text's tokens only."""
    cfg = compose_config(
        "trainer=debug",
        "logger=none",
        "dataset.source.n_train=96",
        "dataset.source.n_dev=32",
        "dataset.source.n_test=32",
        "model.network.embedding_dim=16",
        "encoder.hidden_size=8",
        "dataset.preprocessing.boundary_tokens=true",
        "analysis.jain_wallace.steps=5",
        "analysis.jain_wallace.permutations=4",
        "analysis.jain_wallace.heatmaps=4",
        "analysis.jain_wallace.selection=authors",
        "analysis.jain_wallace.select_epsilon=0.05",
        "model.class_weights=pos_weight",
        "callbacks.model_checkpoint.monitor=val/auroc",
    )
    run = tmp_path / "run"
    train_and_test(cfg, run)
    frame = pd.read_parquet(run / "analysis" / "jain_wallace" / "instances.parquet")
    from attn_study.data.synthetic import SyntheticSource

    plain = build(
        SyntheticSource(
            **{k: v for k, v in OmegaConf.to_container(cfg.dataset.source, resolve=True).items() if k != "_target_"}
        ),
        Preprocessing(),
    )
    assert frame["length"].tolist() == [len(plain.splits["test"].ids[i]) for i in frame["index"]]
    page = (run / "analysis" / "jain_wallace" / "heatmaps.html").read_text()
    assert SOS not in page and EOS not in page and "&lt;sos&gt;" not in page
    assert frame["tau_grad"].notna().any() and frame["adv_emax_jsd"].ge(0).all()


def test_serrano_smith_recipe_has_the_appendix_row_of_every_model():
    table = {
        ("yelp", "han", "noenc"): (0.7, 0.1, 0.7, 0.0001, 10, 58.6),
        ("imdb_rating", "flat", "conv"): (0.4445, None, 0.3457, 0.0004, 5, 48.2),
        ("yahoo", "han", "gru"): (0.4445, 0.2202, 0.3749, 0.0004, 5, 74.6),
        ("amazon", "flat", "noenc"): (0.6, None, 0.4, 0.0002, 10, 50.2),
    }
    for (dataset, model, encoder), (word, sentence, dropout, lr, patience, accuracy) in table.items():
        cfg = compose_config("recipe=serrano_smith", f"dataset={dataset}", f"model={model}", f"encoder={encoder}")
        net = cfg.model.network
        assert (
            net.word_dropout,
            net.get("sentence_dropout"),
            net.dropout,
            cfg.model.optimizer.lr,
            cfg.callbacks.early_stopping.patience,
            cfg.recipe.row.paper_accuracy,
        ) == (word, sentence, dropout, lr, patience, accuracy), (dataset, model, encoder)
        assert cfg.trainer.max_epochs == -1 and list(cfg.analysis) == ["serrano_smith"]
    rows = sum(len(e) for m in compose_config("recipe=serrano_smith").recipe.table.values() for e in m.values())
    assert rows == 24  # 4 datasets × {HAN, FLAN} × {rnn, conv, noenc}


def test_a_model_outside_the_serrano_smith_table_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="recipe=serrano_smith has no settings for dataset=synthetic"):
        train_and_test(compose_config("recipe=serrano_smith", "trainer=debug", "logger=none"), tmp_path / "run")


def test_each_setting_of_the_recipe_takes_effect(tmp_path):
    """A run under recipe=jain_wallace (the synthetic task, 4 epochs): the loss weighs the positive class by
    #negative / #positive of the training split; the checkpoint tested is the epoch of best dev ROC-AUC among
    epochs 1 … 3 (epoch 0 never); every sequence is <sos> … <eos> with no weight on either; the battery's
    adversary is the authors' (λ per adversary, K² diversity, their selection)."""
    import torch

    from attn_study.job.components import build_analyses
    from attn_study.job.plan import load_run

    cfg = recipe_config(*TINY, "trainer.max_epochs=4", "trainer.limit_train_batches=null", "logger=csv")
    run_dir = tmp_path / "run"
    run_job(cfg, run_dir)
    trained = load_run(run_dir)
    labels = trained.datamodule.split("train").labels
    weight = trained.module.class_weights.tolist()
    assert weight == pytest.approx([1.0, float((labels == 0).sum() / (labels == 1).sum())])
    logits, targets = torch.tensor([[0.3], [-1.2]]), torch.tensor([1, 0])
    expected = (
        -(weight[1] * torch.log(torch.sigmoid(torch.tensor(0.3))) + torch.log(1 - torch.sigmoid(torch.tensor(-1.2))))
        / 2
    )
    assert float(trained.module.loss(logits, targets)) == pytest.approx(float(expected), rel=1e-6)
    epochs = pd.read_csv(run_dir / "csv" / "metrics.csv").dropna(subset=["val/early/auroc", "val/auroc"], how="all")
    by_epoch = epochs.groupby("epoch")["val/auroc"].first()
    assert np.isnan(by_epoch.loc[0])  # epoch 0 is never a candidate
    best = int(by_epoch.loc[1:].idxmax())
    assert torch.load(run_dir / "checkpoints" / "best.ckpt", weights_only=False)["epoch"] == best
    split = trained.datamodule.split("test")
    vocab = trained.datamodule.vocab
    assert all(vocab.itos[ids[0]] == SOS and vocab.itos[ids[-1]] == EOS for ids in split.ids)
    recorded = pd.read_parquet(run_dir / "attention.parquet")
    assert all(a[0] == 0 and a[-1] == 0 for a in recorded["attention"])
    battery = build_analyses(recipe_config("analysis=[jain_wallace]"))[0]
    assert (
        battery.lam_per_adversary,
        battery.diversity,
        battery.selection,
        battery.epsilon,
        battery.select_epsilon,
        battery.multiclass_output_distance,
    ) == (True, "k_squared", "authors", 0.01, 0.05, "l1")


@pytest.mark.parametrize("task", [1, 2, 3])
def test_jain_wallace_babi_is_their_pair_model_split_and_training(task):
    """``dataset=babi<k> recipe=jain_wallace``: the pair (question-conditioned) model, their passages and dev
    split, their output classes, LSTM hidden 32, batch 50, 100 epochs, the checkpoint best in dev accuracy (not
    ROC-AUC: a QA task)."""
    cfg = compose_config(f"dataset=babi{task}", "recipe=jain_wallace", "encoder=lstm")
    assert cfg.model.name == "pair" and cfg.model.class_weights is None
    assert (cfg.dataset.source.style, cfg.dataset.source.dev_split) == ("jain_wallace", "jain_wallace")
    assert (cfg.encoder.hidden_size, cfg.dataset.batch_size, cfg.trainer.max_epochs) == (32, 50, 100)
    assert cfg.callbacks.model_checkpoint.monitor == "val/acc" and cfg.training.select_from_epoch == 1
    stopping = cfg.callbacks.early_stopping  # only where no later epoch could be kept: dev accuracy 1.0
    assert (stopping.monitor, stopping.stopping_threshold, stopping.patience) == ("val/acc", 1.0, 100)
    # their output layer: a class per word of tasks 1-3's train files (preprocess/Babi/Babi.ipynb's entity2idx)
    assert (cfg.dataset.source.classes, list(cfg.dataset.source.class_tasks)) == ("words", [1, 2, 3])
    plain = compose_config(f"dataset=babi{task}", "encoder=lstm")
    assert (plain.encoder.hidden_size, plain.dataset.source.dev_split) == (30, "stratified")
    assert (plain.dataset.source.classes, plain.dataset.source.class_tasks) == ("answers", None)
    assert compose_config(f"dataset=babi{task}", "encoder=cnn").encoder.filters == 8
    # their Average (configurations.py): the dataset's hidden size with tanh; their AttnDecoderQA: half its output
    average = compose_config(f"dataset=babi{task}", "recipe=jain_wallace", "encoder=average")
    assert (average.encoder.hidden_size, average.encoder.activation, average.model.network.decoder_dim) == (
        32,
        "tanh",
        None,
    )
    plain = compose_config(f"dataset=babi{task}", "encoder=average")
    assert (plain.encoder.hidden_size, plain.encoder.activation, plain.model.network.decoder_dim) == (256, "relu", 32)
    # their Question_Answering.py: passage and question encoders, each with its own embedding table
    assert average.model.network.separate_query_embeddings is True
    assert plain.model.network.separate_query_embeddings is False


def test_the_recipes_average_and_cnn_encoders_are_the_authors_code_and_the_papers_without_it():
    """``recipe=jain_wallace encoder=average``: configurations.py's projection to 128 with tanh (the paper's text:
    ReLU); without the recipe the paper's 256 + ReLU; an option on the command line still wins. The same for the
    CNN's filters."""
    sst = compose_config("dataset=sst", "recipe=jain_wallace", "encoder=average")
    assert (sst.encoder.hidden_size, sst.encoder.activation) == (128, "tanh")
    plain = compose_config("dataset=sst", "encoder=average")
    assert (plain.encoder.hidden_size, plain.encoder.activation) == (256, "relu")
    chosen = compose_config("dataset=sst", "recipe=jain_wallace", "encoder=average", "encoder.activation=relu")
    assert chosen.encoder.activation == "relu"
    # their CNN: hidden_size // 4 filters per width (the paper: 64; bAbI 8 in both)
    assert compose_config("dataset=sst", "recipe=jain_wallace", "encoder=cnn").encoder.filters == 32
    assert compose_config("dataset=sst", "encoder=cnn").encoder.filters == 64
    assert compose_config("dataset=babi2", "recipe=jain_wallace", "encoder=cnn").encoder.filters == 8


def test_early_stopping_runs_past_the_epochs_that_cannot_be_chosen(tmp_path):
    """Under a recipe whose first epoch is never kept (its dev scores NaN), early stopping goes on training: NaN is
    an epoch without progress, not the end (bAbI's recipe stops early only once dev accuracy is 1.0)."""
    cfg = compose_config(
        *TINY,
        "callbacks=[model_checkpoint,early_stopping]",
        "training.select_from_epoch=1",
        "trainer.max_epochs=3",
        "logger=csv",
    )
    run_job(cfg, tmp_path / "run")
    metrics = pd.read_csv(tmp_path / "run" / "csv" / "metrics.csv")
    assert sorted(metrics.dropna(subset=["val/loss"])["epoch"].unique()) == [0, 1, 2]
