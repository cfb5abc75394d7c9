"""An 8-block LLaMA-style model for the thunder-kit oracle (castscope issue 18).

It rebuilds the model behind ../shared/traces/thunder_llama_stack_*.txt from the source lines
those traces print (RMSNorm, rotary attention through F.scaled_dot_product_attention, SwiGLU,
cross-entropy; dim 128, 4 heads, hidden 344, vocab 512, batch 2, sequence 64, bf16), each
printed line at the line number the traces name, so their `# models.py:NN` comments agree.
Run it with the nvFuser stub to get Thunder's own nvFusion regions for the training step:

    python3 .thunder-kit/thunder_oracle.py tests/oracle/models.py --nvfuser-stub default \
        --executors none --tar $OUT/llama8.tgz

The blank stretches below keep those line numbers.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, N_HEAD, HIDDEN, VOCAB, N_LAYERS, SEQ, BATCH = 128, 4, 344, 512, 8, 64, 2



























































class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


def rotate_half(x):
    d = x.size(-1) // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin



class Attention(nn.Module):
    def __init__(self, dim, n_head):
        super().__init__()
        self.n_head = n_head
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin, mask=None):
        B, T, C = x.shape
        hd = C // self.n_head
        q = self.wq(x).view(B, T, self.n_head, hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_head, hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_head, hd).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)




        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(B, T, C))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)
    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class Block(nn.Module):
    def __init__(self, dim, n_head, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, n_head)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x, cos, sin, mask=None):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        x = x + self.feed_forward(self.ffn_norm(x))
        return x



class LLaMA(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block(DIM, N_HEAD, HIDDEN) for _ in range(N_LAYERS)])
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        hd = DIM // N_HEAD
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.arange(SEQ).float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok_embeddings(idx)
        mask = None
        cos = self.cos[:T]
        sin = self.sin[:T]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        x = self.norm(x)
        logits = self.output(x)
        # the loss in f32 over (batch * sequence, vocab), as the
        # shared traces print it
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))



torch.manual_seed(0)
MODEL = LLaMA().to(device="cuda", dtype=torch.bfloat16)


def tokens():
    return torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")


CASES = {"llama8": (MODEL, lambda: [tokens(), tokens()])}
