"""Oracle cases for issue 18 (executors claim ops before fusion): a functions file for
../shared/thunder-kit/thunder_oracle.py.  Each case exercises one thing castscope now mirrors:
the sdpa executor (flash: bf16 causal and not; memory-efficient: f32 with a mask),
torchcompile_xentropy (cross-entropy), nvFuser around them (RMSNorm + SwiGLU, LayerNorm),
ltorch.split's backward (cat), and a module with buffers (no gradient for the buffers).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rand(*shape, dtype=torch.bfloat16, scale=1.0, grad=True):
    # CPU generator (seeded by the runner), then moved: the same numbers on every machine
    return (torch.randn(*shape) * scale).to(device="cuda", dtype=dtype).requires_grad_(grad)


def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sdpa_scaled(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=False, scale=0.25)


def sdpa_mask_f32(q, k, v, m):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def rmsnorm_swiglu(x, w_norm, w_gate, w_up, w_down):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
    h = xf.to(x.dtype) * w_norm
    return F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def split_mul_add(x):
    a, b, c = torch.split(x, 16, dim=-1)
    return a * b + c


def rotate_half(x):
    d = x.size(-1) // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class RotaryBlock(nn.Module):
    """Attention with rotary buffers cos/sin (registered buffers: Thunder names them t_cos and
    t_sin and gives them no gradient), then cross-entropy on a small head."""

    def __init__(self, d=64, n_head=2, vocab=96, T=32):
        super().__init__()
        self.n_head = n_head
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, vocab, bias=False)
        hd = d // n_head
        t = torch.arange(T).float()[:, None] / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        emb = torch.cat((t, t), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, x, targets):
        B, T, C = x.shape
        hd = C // self.n_head
        q = self.wq(x).view(B, T, self.n_head, hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_head, hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_head, hd).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.wo(y.transpose(1, 2).reshape(B, T, C))
        logits = self.out(x + y)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


torch.manual_seed(0)
BLOCK = RotaryBlock().to(device="cuda", dtype=torch.bfloat16)


def targets(*shape, n=96):
    return torch.randint(0, n, shape).to("cuda")


CASES = {
    "sdpa_causal": (sdpa_causal, lambda: [rand(2, 4, 64, 32), rand(2, 4, 64, 32), rand(2, 4, 64, 32)]),
    "sdpa_scaled": (sdpa_scaled, lambda: [rand(2, 4, 48, 64), rand(2, 4, 48, 64), rand(2, 4, 48, 64)]),
    "sdpa_mask_f32": (sdpa_mask_f32, lambda: [rand(2, 2, 12, 8, dtype=torch.float32),
                                              rand(2, 2, 12, 8, dtype=torch.float32),
                                              rand(2, 2, 12, 8, dtype=torch.float32),
                                              rand(2, 2, 12, 12, dtype=torch.float32, grad=False)]),
    "cross_entropy": (cross_entropy, lambda: [rand(4, 32, 96), targets(4, 32)]),
    "rmsnorm_swiglu": (rmsnorm_swiglu, lambda: [rand(4, 32, 64), rand(64), rand(172, 64, scale=0.1),
                                                rand(172, 64, scale=0.1), rand(64, 172, scale=0.1)]),
    "layernorm": (layernorm, lambda: [rand(4, 32, 64), rand(64), rand(64)]),
    "split_mul_add": (split_mul_add, lambda: [rand(8, 48)]),
    "block_with_buffers": (BLOCK, lambda: [rand(2, 32, 64), targets(2, 32)]),
}
