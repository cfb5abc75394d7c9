"""A GPT-2-style stack for the whole-model benchmarks (castscope issue 20), at two depths.

LayerNorm, causal multi-head attention through F.scaled_dot_product_attention, a GELU (tanh)
MLP, learned position embeddings, tied-free output head and cross-entropy; dim 256, 4 heads,
MLP 1024, vocab 1024, batch 4, sequence 128, bf16.  A thunder-kit functions file (its CASES
give Thunder's traces of the training step; ../shared/thunder-kit/README.md):

    python3 .thunder-kit/thunder_oracle.py tests/oracle/gpt_stack.py --nvfuser-stub off \
        --executors default --tar $OUT/gpt.tgz

and a module for kernels/bench/torch_models.py (the same models in PyTorch eager and
torch.compile).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, N_HEAD, MLP, VOCAB, SEQ, BATCH = 256, 4, 1024, 1024, 128, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.c_attn = nn.Linear(DIM, 3 * DIM)
        self.c_proj = nn.Linear(DIM, DIM)
        self.ln_2 = nn.LayerNorm(DIM)
        self.c_fc = nn.Linear(DIM, MLP)
        self.mlp_proj = nn.Linear(MLP, DIM)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, n_layers):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.h = nn.ModuleList([Block() for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.view(-1))


def tokens():
    return torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")


def model(n_layers):
    torch.manual_seed(0)
    return GPT(n_layers).to(device="cuda", dtype=torch.bfloat16)


CASES = {"gpt%d" % n: (model(n), lambda: [tokens(), tokens()]) for n in (4, 12)}
