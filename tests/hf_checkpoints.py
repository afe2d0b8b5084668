"""Tiny Hugging Face checkpoints written by a test into its own folder (nothing downloaded, no checkpoint file in the
repository): randomly initialised BERT, RoBERTa and DistilBERT models of 2 layers, 2 heads and width 8, with a
word-level tokenizer over :data:`WORDS` or a WordPiece tokenizer over :data:`PIECES` (BERT's ``##``
continuations). Used by the tests of ``attn-study-analyze hf_model=`` and of ``encoder=pretrained``."""

from __future__ import annotations

from pathlib import Path

from attn_study.data import synthetic

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# the synthetic task's words, so that its texts are not all [UNK]
WORDS = SPECIALS + sorted(set(synthetic.POSITIVE + synthetic.NEGATIVE + synthetic.NEGATORS + synthetic.FILLER))
#: words of the synthetic task that the WordPiece vocabulary holds only as pieces (the other words are whole)
SPLIT = {"wonderful": ["wonder", "##ful"], "terrible": ["terr", "##ible"], "unbelievable": ["un", "##believ", "##able"]}
PIECES = (
    SPECIALS
    + [w for w in WORDS[len(SPECIALS) :] if w not in SPLIT]
    + sorted({piece for pieces in SPLIT.values() for piece in pieces})
)
SIZES = {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16}
SPREAD = 0.5  # initializer_range: a random model whose output moves when a token is deleted (0.02 barely does)


def tokenizer(pieces: bool = False):
    """The fast tokenizer: word-level over :data:`WORDS`, or (``pieces``) WordPiece over :data:`PIECES`; a text is
    ``[CLS] … [SEP]``, a pair ``[CLS] … [SEP] … [SEP]`` (the second text's segment 1)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocabulary = PIECES if pieces else WORDS
    ids = {w: i for i, w in enumerate(vocabulary)}
    model = (
        models.WordPiece(ids, unk_token="[UNK]", max_input_chars_per_word=100)
        if pieces
        else models.WordLevel(ids, unk_token="[UNK]")
    )
    built = Tokenizer(model)
    built.pre_tokenizer = pre_tokenizers.Whitespace()
    built.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=built,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def save_checkpoint(
    folder, kind: str = "bert", num_labels: int = 2, head: bool = True, pieces: bool = False, seed: int = 0
) -> Path:
    """A tiny random ``kind`` classifier (without ``head``: its bare encoder) and :func:`tokenizer` saved in
    ``folder``; its weights drawn from ``seed``."""
    import torch
    import transformers

    fast = tokenizer(pieces)
    torch.manual_seed(seed)
    size = len(PIECES if pieces else WORDS)
    if kind == "distilbert":
        config = transformers.DistilBertConfig(
            vocab_size=size,
            dim=8,
            n_layers=2,
            n_heads=2,
            hidden_dim=16,
            num_labels=num_labels,
            initializer_range=SPREAD,
        )
    else:
        make = {"bert": transformers.BertConfig, "roberta": transformers.RobertaConfig}[kind]
        config = make(
            vocab_size=size,
            max_position_embeddings=72,
            num_labels=num_labels,
            pad_token_id=0,  # no sep_token_id: a real BERT's config.json has none (its tokenizer has [SEP])
            initializer_range=SPREAD,
            **SIZES,
        )
    model = (transformers.AutoModelForSequenceClassification if head else transformers.AutoModel).from_config(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return Path(folder)
