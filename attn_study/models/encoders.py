"""Encoders: embedded tokens E (B, T, d) → hidden states H (B, T, m), padding-invariant.

Every encoder has ``output_dim`` (m) and ``summarize(H, mask, lengths) → (B, m)``, the sequence
summary used as the query of pair tasks (last states for RNNs, max-pool for convolutions, mean
otherwise). Padding positions of H are zero, and real positions do not depend on how much padding
follows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from attn_study.errors import UserError
from attn_study.models.projection import BY_NAME, Softmax

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}


def _activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"encoder.activation={name!r}: choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


def masked_mean(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp_min(1.0)


def conicity(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Conicity of each instance's states (Mohankumar et al. 2020): the mean over its real tokens (``mask``) of
    |cos(h_t, h̄)|, h̄ = the mean of those states. (B,); NaN for an instance without tokens. Near 1: the states
    crowd in a narrow cone, so any attention over them pools nearly the same vector. The absolute value is the
    authors' released code's (their paper writes the cosine): without it a few long states along h̄ let the others
    point away, and a penalty on it goes below 0."""
    m = mask.to(h.dtype)
    count = m.sum(1)
    mean = (h * m.unsqueeze(-1)).sum(1) / count.clamp_min(1.0).unsqueeze(-1)
    cosine = F.cosine_similarity(h, mean.unsqueeze(1).expand_as(h), dim=-1, eps=1e-12).abs()
    value = (cosine * m).sum(1) / count.clamp_min(1.0)
    return value.masked_fill(count == 0, float("nan"))


def direction_weights(rnn: nn.RNNBase, reverse: bool, layer: int = 0) -> dict:
    """One direction of one layer of ``rnn`` as the parameters of a one-layer, one-direction copy of it."""
    suffix = "_reverse" if reverse else ""
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if rnn.bias else ())
    return {f"{name}_l0": getattr(rnn, f"{name}_l{layer}{suffix}") for name in names}


@functools.lru_cache(maxsize=64)
def _one_direction(kind: type, input_size: int, hidden_size: int, bias: bool) -> nn.RNNBase:
    """A one-layer, one-direction ``kind`` without parameters of its own (on the meta device): the module that
    :func:`run_direction` calls with another RNN's weights."""
    return kind(input_size, hidden_size, bias=bias, batch_first=True, device="meta")


def run_direction(
    rnn: nn.RNNBase, reverse: bool, inputs: torch.Tensor, state: tuple | None = None, layer: int = 0
) -> torch.Tensor:
    """One direction of layer ``layer`` of ``rnn`` (LSTM or GRU) read left to right over ``inputs`` (N, S, d),
    from ``state`` (h (N, H), and c for an LSTM; zeros when None): its states (N, S, H).

    Every row is read from its first item, so a row's states at its real positions do not depend on what follows
    them (padding at the end costs time, never a value): the padded batch goes through torch's fused kernel, 4–6×
    faster on a CPU than the same batch packed (``benchmarks/rnn_step.py``)."""
    one = _one_direction(type(rnn), inputs.shape[-1], rnn.hidden_size, rnn.bias)
    if state is not None:
        state = tuple(x.unsqueeze(0).contiguous() for x in state) if isinstance(rnn, nn.LSTM) else state[0].unsqueeze(0)
    out, _ = functional_call(one, direction_weights(rnn, reverse, layer), (inputs, state))
    return out


def xavier_initial_state(like: torch.Tensor, hidden_size: int) -> torch.Tensor:
    """A random initial state (B, hidden_size) for a batch like ``like`` (B, T, d), drawn as Mohankumar et al.'s
    code draws h₀ and c₀ on every pass: ``xavier_uniform_`` of a (1, B, H) tensor, i.e. U(−a, a) with
    a = √(6 / (B·H + H))."""
    state = like.new_empty(1, like.shape[0], hidden_size)
    return nn.init.xavier_uniform_(state)[0]


class RNNEncoder(nn.Module):
    """Bidirectional LSTM or GRU; m = 2·hidden_size.

    Each direction runs over the padded batch (:func:`run_direction`): the forward one reads the batch as it is,
    the backward one reads each sequence reversed within its own length (its padding stays at the end); both are
    the states of a packed-sequence run at every real position (tested in float64) and 0 on padding.

    ``conicity_weight`` λ > 0 makes it Mohankumar et al.'s Diversity LSTM: training adds λ · mean
    conicity of the states (over the attended tokens) to the loss (``encoder=diversity_lstm``, λ = 0.5).
    ``random_initial_state``: in training, every pass starts each direction from a random state
    (:func:`xavier_initial_state`), as Mohankumar et al.'s code does; in eval mode from zeros."""

    def __init__(
        self,
        input_dim: int,
        hidden_size: int = 128,
        cell: str = "lstm",
        num_layers: int = 1,
        bidirectional: bool = True,
        conicity_weight: float = 0.0,
        random_initial_state: bool = False,
    ):
        super().__init__()
        if conicity_weight < 0:
            raise ValueError(f"encoder.conicity_weight={conicity_weight}: a penalty weight is >= 0")
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn(input_dim, hidden_size, num_layers=num_layers, batch_first=True, bidirectional=bidirectional)
        self.directions = 2 if bidirectional else 1
        self.output_dim = hidden_size * self.directions
        self.conicity_weight = float(conicity_weight)
        self.random_initial_state = bool(random_initial_state)

    def _initial_state(self, like: torch.Tensor) -> tuple | None:
        if not (self.random_initial_state and self.training):
            return None
        parts = 2 if isinstance(self.rnn, nn.LSTM) else 1
        return tuple(xavier_initial_state(like, self.rnn.hidden_size) for _ in range(parts))

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        real = mask.unsqueeze(-1).to(embedded.dtype)
        reverse = _reversal_index(lengths, embedded.shape[1]).unsqueeze(-1) if self.directions == 2 else None
        x = embedded
        for layer in range(self.rnn.num_layers):  # each layer reads both directions of the one below
            states = [run_direction(self.rnn, False, x, self._initial_state(x), layer=layer)]
            if reverse is not None:
                backward = run_direction(
                    self.rnn, True, x.gather(1, reverse.expand_as(x)), self._initial_state(x), layer=layer
                )
                states.append(backward.gather(1, reverse.expand_as(backward)))
            x = torch.cat(states, -1) * real
        return x

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Forward direction's last real state ‖ backward direction's first state."""
        size = self.output_dim // self.directions
        last = h[torch.arange(h.shape[0], device=h.device), lengths - 1, :size]
        if self.directions == 1:
            return last
        return torch.cat([last, h[:, 0, size:]], dim=-1)


class OrthogonalLSTMEncoder(nn.Module):
    """Mohankumar et al. (2020)'s Orthogonal LSTM; m = hidden_size per direction (``bidirectional``: 2 of them).

    Each direction is an LSTM cell run step by step whose new state is made orthogonal to the mean of its
    earlier states before it is output and fed back: h_t ← h_t − (h_t·h̄)/(h̄·h̄)·h̄, h̄ the mean of
    h_1 … h_{t−1} (the backward direction reads each sequence's real tokens in reverse; the first state
    is left as it is). Padding positions are zero and never enter h̄. Pair models orthogonalise the
    passage only: their question encoder is the same LSTM without the projection (``question_options``).
    The authors' code runs one direction of 256 units (``encoder=orthogonal_lstm``) and, in training, starts
    from a random state (``random_initial_state``, :func:`xavier_initial_state`); ``encoder=orthogonal_bilstm``
    is the bidirectional 2 × 128 variant.
    """

    def __init__(
        self,
        input_dim: int,
        hidden_size: int = 128,
        orthogonal: bool = True,
        bidirectional: bool = True,
        random_initial_state: bool = False,
    ):
        super().__init__()
        self.directions = 2 if bidirectional else 1
        self.cells = nn.ModuleList(nn.LSTMCell(input_dim, hidden_size) for _ in range(self.directions))
        self.hidden_size = hidden_size
        self.output_dim = self.directions * hidden_size
        self.orthogonal = orthogonal
        self.random_initial_state = bool(random_initial_state)
        self.conicity_weight = 0.0

    question_options = {"orthogonal": False}

    def _direction(self, cell: nn.LSTMCell, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        if self.random_initial_state and self.training:
            h, c = (xavier_initial_state(x, self.hidden_size) for _ in range(2))
        else:
            h, c = x.new_zeros(b, self.hidden_size), x.new_zeros(b, self.hidden_size)
        total = x.new_zeros(b, self.hidden_size)  # Σ of the earlier states (real tokens only)
        outputs = []
        for step in range(t):
            real = mask[:, step].unsqueeze(-1).to(x.dtype)
            new_h, new_c = cell(x[:, step], (h, c))
            if self.orthogonal and step > 0:
                mean = total / step  # every real token before `step` is real (left-aligned sequences)
                coefficient = (new_h * mean).sum(-1, keepdim=True) / (mean * mean).sum(-1, keepdim=True).clamp_min(
                    1e-12
                )
                new_h = new_h - coefficient * mean
            h = real * new_h + (1 - real) * h
            c = real * new_c + (1 - real) * c
            outputs.append(new_h * real)
            total = total + new_h * real
        return torch.stack(outputs, 1)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        forward_states = self._direction(self.cells[0], embedded, mask)
        if self.directions == 1:
            return forward_states
        reverse = _reversal_index(lengths, embedded.shape[1])
        backward_input = embedded.gather(1, reverse.unsqueeze(-1).expand_as(embedded))
        backward_states = self._direction(self.cells[1], backward_input, mask)
        backward_states = backward_states.gather(1, reverse.unsqueeze(-1).expand_as(backward_states))
        return torch.cat([forward_states, backward_states], -1)

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Forward direction's last real state (‖ backward direction's first state)."""
        last = h[torch.arange(h.shape[0], device=h.device), lengths - 1, : self.hidden_size]
        if self.directions == 1:
            return last
        return torch.cat([last, h[:, 0, self.hidden_size :]], dim=-1)


def _reversal_index(lengths: torch.Tensor, total: int) -> torch.Tensor:
    """(B, T) positions that reverse each sequence's first ``lengths[b]`` items and keep its padding in place;
    its own inverse."""
    steps = torch.arange(total, device=lengths.device).unsqueeze(0)
    lengths = lengths.to(steps.device).unsqueeze(1)
    return torch.where(steps < lengths, lengths - 1 - steps, steps)


class CNNEncoder(nn.Module):
    """Same-length 1-D convolutions of several widths, concatenated; m = filters·len(kernel_sizes).

    Jain & Wallace: widths 1, 3, 5, 7 with ReLU (64 filters each in the paper, 32 in their code).
    Serrano & Smith's ``conv``: widths 3 and 5. Padding tokens are zeroed before convolving, so a
    real position only sees real neighbours and zeros.
    """

    def __init__(
        self, input_dim: int, kernel_sizes: tuple[int, ...] = (1, 3, 5, 7), filters: int = 64, activation: str = "relu"
    ):
        super().__init__()
        if any(k % 2 == 0 for k in kernel_sizes):
            raise ValueError(f"encoder.kernel_sizes={list(kernel_sizes)}: widths must be odd (same-length output)")
        self.convs = nn.ModuleList(nn.Conv1d(input_dim, filters, k, padding=k // 2) for k in kernel_sizes)
        self.activation = _activation(activation)
        self.output_dim = filters * len(kernel_sizes)
        self.receptive_radius = max(kernel_sizes) // 2  # a token influences states within this distance

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = (embedded * mask.unsqueeze(-1)).transpose(1, 2)
        h = torch.cat([self.activation(conv(x)) for conv in self.convs], dim=1).transpose(1, 2)
        return h * mask.unsqueeze(-1)

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return h.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1)


class AverageEncoder(nn.Module):
    """Per-token projection h_t = act(W e_t + b), no context (Jain & Wallace's "Average").

    Paper: projection 256 + ReLU (their code: 128 + tanh). m = hidden_size.
    """

    def __init__(self, input_dim: int, hidden_size: int = 256, activation: str = "relu"):
        super().__init__()
        self.proj = nn.Linear(input_dim, hidden_size)
        self.activation = _activation(activation)
        self.output_dim = hidden_size

    context_free = True  # h_t depends on token t alone (leave-one-out exploits this)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.activation(self.proj(embedded)) * mask.unsqueeze(-1)

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return masked_mean(h, mask)


class NoEncoder(nn.Module):
    """Identity: h_t = e_t (Serrano & Smith's ``noenc``). m = input_dim."""

    def __init__(self, input_dim: int):
        super().__init__()
        self.output_dim = input_dim

    context_free = True

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return embedded * mask.unsqueeze(-1)

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return masked_mean(h, mask)


@dataclass
class LayerTrace:
    """What a Transformer's layers did to one batch, for the aggregation methods (``analysis/aggregation.py``).

    ``attention`` (B, L, H, T, T): A[b, l, h, i, j], the weight of position j in the output of head h at
    position i in layer l (rows sum to 1 over the positions the encoder read, 0 elsewhere); ``transformed``
    (B, L, H, T, m) or None: f^h(x_j), position j's vector as head h adds it to the layer's output, the value
    transformation followed by the head's slice of the output projection (Kobayashi et al. 2020:
    Σ_j α^h_ij f^h(x_j) summed over h, plus the output bias, is the attention's output at i); ``hidden``:
    the encoder's output (B, T, m)."""

    attention: torch.Tensor
    transformed: torch.Tensor | None
    hidden: torch.Tensor


class TransformerEncoder(nn.Module):
    """Small Transformer encoder: Linear(d → model_dim) + sinusoidal positions, ``num_layers``
    pre-norm layers with a key padding mask. m = model_dim. ``trace`` runs the same layers step by step and
    keeps each head's attention and transformed vectors (the same H, tested).

    ``self_attention`` is the projection of every head's scores q_i·k_j/√d onto the simplex: ``softmax`` (torch's
    fused layers), ``sparsemax`` or ``entmax15`` (the layers written out, as ``trace`` without its f^h), or a
    projection module (``pooling`` in the config: the model's own ``projection``, sparsegen's λ included — see
    ``job/components.py``)."""

    def __init__(
        self,
        input_dim: int,
        model_dim: int = 128,
        num_heads: int = 4,
        num_layers: int = 2,
        ff_dim: int = 256,
        dropout: float = 0.1,
        max_positions: int = 4096,
        self_attention="softmax",
    ):
        super().__init__()
        if isinstance(self_attention, str):
            if self_attention not in BY_NAME:
                raise UserError(
                    f"encoder.self_attention={self_attention}: choose one of {sorted(BY_NAME)} or pooling "
                    "(the model's projection)"
                )
            self_attention = BY_NAME[self_attention]()
        self.self_attention = self_attention
        self.proj = nn.Linear(input_dim, model_dim)
        layer = nn.TransformerEncoderLayer(model_dim, num_heads, ff_dim, dropout, batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(model_dim)
        position = torch.arange(max_positions).unsqueeze(1)
        freq = torch.exp(torch.arange(0, model_dim, 2) * (-math.log(10000.0) / model_dim))
        table = torch.zeros(max_positions, model_dim)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq[: model_dim // 2])
        self.register_buffer("positions", table, persistent=False)
        self.output_dim = model_dim
        self.attention_shape = (num_layers, num_heads, True)  # layers, heads, f^h known (aggregation methods)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if embedded.shape[1] > self.positions.shape[0]:
            raise ValueError(f"sequence of {embedded.shape[1]} tokens exceeds encoder.max_positions")
        if not isinstance(self.self_attention, Softmax):
            return self._written_out(embedded, mask, keep=False).hidden
        x = self.proj(embedded) + self.positions[: embedded.shape[1]]
        h = self.norm(self.layers(x, src_key_padding_mask=~mask))
        return h * mask.unsqueeze(-1)

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return masked_mean(h, mask)

    def trace(self, embedded: torch.Tensor, mask: torch.Tensor) -> LayerTrace:
        """The forward pass written out per head (the math of ``nn.TransformerEncoderLayer`` with
        ``norm_first``: x ← x + MHA(LN₁(x)), x ← x + FF(LN₂(x))), keeping A^h = π(q_i·k_j/√d) over
        the real keys (π: ``self_attention``) and f^h(y_j) = (W_V^h y_j + b_V^h) W_O^h (y = LN₁(x)); dropout as
        the module's mode."""
        return self._written_out(embedded, mask, keep=True)

    def _written_out(self, embedded: torch.Tensor, mask: torch.Tensor, keep: bool) -> LayerTrace:
        """The layers written out (``trace``). ``keep=False`` (the forward pass of a non-softmax self-attention)
        keeps neither A^h nor f^h and mixes the values before the output projection, W_O [A^1 v^1; …; A^H v^H]:
        the same sum as Σ_h A^h f^h with H times fewer products in A·V, and the same dropout draws in the same
        order."""
        b, t, _ = embedded.shape
        x = self.proj(embedded) + self.positions[:t]
        attentions, transformed = [], []
        for layer in self.layers.layers:
            attn = layer.self_attn
            heads, size = attn.num_heads, attn.head_dim
            q, k, v = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, heads, size).transpose(1, 2) for z in (q, k, v))  # (B, H, T, d)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(size)
            weights = self.self_attention(scores, mask[:, None, None, :])  # over the real keys, 0 elsewhere
            weights = weights * mask[:, None, :, None]  # padding rows: no output of interest
            dropped = F.dropout(weights, attn.dropout, attn.training)  # as MHA applies it (eval: none)
            if keep:
                # W_O's columns h·d … (h+1)·d act on head h: f^h(y_j) = W_O^h v^h_j (B, H, T, m)
                f = torch.einsum("bhjd,ohd->bhjo", v, attn.out_proj.weight.view(-1, heads, size))
                out = torch.einsum("bhij,bhjo->bio", dropped, f) + attn.out_proj.bias
                attentions.append(weights)
                transformed.append(f)
            else:
                out = attn.out_proj((dropped @ v).transpose(1, 2).reshape(b, t, heads * size))
            x = x + layer.dropout1(out)
            x = x + layer._ff_block(layer.norm2(x))
        hidden = self.norm(x) * mask.unsqueeze(-1)
        if not keep:
            return LayerTrace(None, None, hidden)
        return LayerTrace(torch.stack(attentions, 1), torch.stack(transformed, 1), hidden)
