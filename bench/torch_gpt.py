"""The language models of bench/models for bench/torch_peer.py: the same
layers as Tandem builds from the model file — embedding, position_embedding,
repeat blocks, layer_norm, rms_norm, attention (its q/k/v and output
projections, causal; kv_heads key/value heads shared by groups of query
heads; rope on q and k in the halves layout of sdk/ops.md;
F.scaled_dot_product_attention where this torch has it, else the
softmax(q·kᵀ/√d)·v it computes), add, mul (a SwiGLU gate), gelu, silu, linear per token, a head
tied to the embedding — run as the file's DAG of named layers."""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

# torch >= 2.5 shares key/value heads inside scaled_dot_product_attention
# (enable_gqa) instead of copying them out to every query head first.
GQA_IN_SDPA = hasattr(F, "scaled_dot_product_attention") and tuple(
    int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


def expand(layers):
    """[[layers]] with op = "repeat" as Tandem expands them: <block>.<i>.<name>;
    inside the body the block's name is its input, after it its last layer."""
    out, alias = [], {}
    for layer in layers:
        if layer["op"] != "repeat":
            copy = dict(layer)
            copy["inputs"] = [alias.get(i, i) for i in layer.get("inputs", [])]
            out.append(copy)
            continue
        block, body = layer["name"], layer["body"]
        local = {b["name"] for b in body}
        previous = out[-1]["name"] if out else "input"
        for i in range(layer["count"]):
            prefix = f"{block}.{i}."
            for b in body:
                copy = dict(b)
                copy["name"] = prefix + b["name"]
                copy["inputs"] = [previous if n == block else prefix + n if n in local else n
                                  for n in b.get("inputs", [])]
                out.append(copy)
            previous = out[-1]["name"]
        alias[block] = previous
    return out


class RMSNorm(nn.Module):
    """x·rsqrt(mean(x²) + ε)·gamma (torch.nn.RMSNorm is not in every torch this runs with)."""

    def __init__(self, width, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


_ROPE_TABLES = {}


def rope_table(t, d, base, dtype, device):
    """cos and sin of rope's angles for T positions (computed in f64 once per shape, then kept)."""
    key = (t, d, base, dtype, str(device))
    if key not in _ROPE_TABLES:
        freq = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
        angle = torch.arange(t, dtype=torch.float64)[:, None] * freq[None, :]
        cos = torch.cat([angle.cos(), angle.cos()], -1).to(dtype).to(device)
        sin = torch.cat([angle.sin(), angle.sin()], -1).to(dtype).to(device)
        _ROPE_TABLES[key] = (cos, sin)
    return _ROPE_TABLES[key]


def rotate(x, base):
    """Rope over the last two dims [..., T, D]: element i paired with i + D/2, angles in f64."""
    t, d = x.shape[-2], x.shape[-1]
    cos, sin = rope_table(t, d, base, x.dtype, x.device)
    first, second = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-second, first], -1) * sin


class Attention(nn.Module):
    def __init__(self, width, layer):
        super().__init__()
        self.heads, self.kv_heads = layer["heads"], layer.get("kv_heads", layer["heads"])
        self.head_dim = layer.get("head_dim", width // self.heads)
        self.causal, bias = layer.get("causal", True), layer.get("bias", True)
        self.rope = layer.get("rope_base", 10000.0) if layer.get("rope", False) else None
        self.q = nn.Linear(width, self.heads * self.head_dim, bias=bias)
        self.k, self.v = (nn.Linear(width, self.kv_heads * self.head_dim, bias=bias) for _ in range(2))
        self.out = nn.Linear(self.heads * self.head_dim, width, bias=bias)

    def forward(self, x):
        b, t, c = x.shape
        split = lambda y, heads: y.view(b, t, heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q(x), self.heads), split(self.k(x), self.kv_heads), split(self.v(x), self.kv_heads)
        if self.rope is not None:
            q, k = rotate(q, self.rope), rotate(k, self.rope)
        grouped = self.kv_heads != self.heads  # query head h reads key/value head h // (heads / kv_heads)
        if grouped and GQA_IN_SDPA:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)
            return self.out(o.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))
        if grouped:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if self.causal:
                scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            o = scores.softmax(-1) @ v
        return self.out(o.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class LanguageModel(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.layers = expand(spec["layers"])
        self.context = spec["model"]["context"]
        self.mods = nn.ModuleDict()
        widths, previous = {}, None  # each value's feature width, by layer name
        for layer in self.layers:
            op, name = layer["op"], layer["name"].replace(".", "_")
            width = widths.get(layer["inputs"][0]) if layer.get("inputs") else widths.get(previous)
            if op == "embedding":
                width = layer["embedding_dim"]
                self.mods[name] = nn.Embedding(layer["num_embeddings"], width)
            elif op == "position_embedding":
                self.mods[name] = nn.Embedding(self.context, width)
            elif op == "layer_norm":
                self.mods[name] = nn.LayerNorm(width)
            elif op == "rms_norm":
                self.mods[name] = RMSNorm(width, layer.get("epsilon", 1e-6))
            elif op == "attention":
                self.mods[name] = Attention(width, layer)
            elif op == "linear":
                lin = nn.Linear(width, layer["out_features"], bias=layer.get("bias", True))
                if "tie_weight" in layer:
                    lin.weight = self.mods[layer["tie_weight"].replace(".", "_")].weight
                self.mods[name] = lin
                width = layer["out_features"]
            elif op not in ("add", "mul", "gelu", "relu", "silu"):
                sys.exit(f"torch_gpt: layer op {op} not supported")
            widths[layer["name"]] = width
            previous = layer["name"]

    def init_like_the_model_files(self):
        """GPT-2's initialisation, which bench/models' language models ask for
        (init = "normal", init_std = 0.02; zero biases; norms at one). Without
        it nn.Embedding starts at N(0, 1), and with the head tied to it the
        logits start large enough to diverge."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif p.dim() > 1:
                    p.normal_(0.0, 0.02)

    def forward(self, tokens):
        values, previous = {"input": tokens}, tokens
        for layer in self.layers:
            op, name = layer["op"], layer["name"]
            ins = [values[i] for i in layer["inputs"]] or [previous]
            if op == "add":
                y = ins[0]
                for other in ins[1:]:
                    y = y + other
            elif op == "mul":
                y = ins[0] * ins[1]
            elif op == "gelu":
                y = F.gelu(ins[0], approximate=layer.get("approximate", "none"))
            elif op == "relu":
                y = F.relu(ins[0])
            elif op == "silu":
                y = F.silu(ins[0])
            elif op == "position_embedding":
                y = ins[0] + self.mods[name.replace(".", "_")].weight[: ins[0].shape[1]]
            else:
                y = self.mods[name.replace(".", "_")](ins[0])
                if op == "linear" and layer.get("activation", "none") == "relu":
                    y = F.relu(y)
            values[name] = previous = y
        return previous
