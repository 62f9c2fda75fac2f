"""The language models of bench/models for bench/torch_peer.py: the same
layers as Tandem builds from the model file — embedding, position_embedding,
repeat blocks, layer_norm, rms_norm, attention (its q/k/v and output
projections, causal; kv_heads key/value heads shared by groups of query
heads; rope on q and k in the halves layout of sdk/ops.md;
F.scaled_dot_product_attention where this torch has it, else the
softmax(q·kᵀ/√d)·v it computes), add, gelu, silu, linear per token, a head
tied to the embedding — run as the file's DAG of named layers."""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


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


def rotate(x, base):
    """Rope over the last two dims [..., T, D]: element i paired with i + D/2, angles in f64."""
    t, d = x.shape[-2], x.shape[-1]
    freq = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * freq[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], -1).to(x.dtype).to(x.device)
    sin = torch.cat([angle.sin(), angle.sin()], -1).to(x.dtype).to(x.device)
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
        if self.kv_heads != self.heads:  # query head h reads key/value head h // (heads / kv_heads)
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
        width = None
        for layer in self.layers:
            op, name = layer["op"], layer["name"].replace(".", "_")
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
            elif op not in ("add", "gelu", "relu", "silu"):
                sys.exit(f"torch_gpt: layer op {op} not supported")

    def forward(self, tokens):
        values, previous = {"input": tokens}, tokens
        for layer in self.layers:
            op, name = layer["op"], layer["name"]
            ins = [values[i] for i in layer["inputs"]] or [previous]
            if op == "add":
                y = ins[0]
                for other in ins[1:]:
                    y = y + other
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
