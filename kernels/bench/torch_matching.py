"""PyTorch eager / torch.compile baselines for the castscope bench workloads that
../shared/bench/torch_baselines.py runs at other shapes (run on the GPU machine beside
`castscope-cli bench`; not part of the product).  Same shapes as data/bench/*.txt, bf16,
fwd+bwd.  Per workload and mode: "graph" = one torch.cuda.CUDAGraph replay of the whole step
(GPU time, mean of 50 between two events), "synced" = median of 20 single steps between an event
pair with a sync (latency).  One JSON object per line."""
import json, math
import torch
import torch.nn.functional as F

dev, dt = "cuda", torch.bfloat16


def param(*shape, scale=0.02):
    return (torch.randn(*shape, device=dev) * scale).to(dt).requires_grad_(True)


def graph_ms(step, n=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); a.record()
    for _ in range(n):
        g.replay()
    b.record(); b.synchronize()
    return a.elapsed_time(b) / n


def synced_ms(step, n=20):
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); step(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[n // 2]


def bench(name, fn, leaves, grad):
    row = {"name": name}
    for mode in ("eager", "compile"):
        torch._dynamo.reset()
        f = fn if mode == "eager" else torch.compile(fn, dynamic=False)

        def step():
            for p in leaves:
                p.grad = None
            f(*leaves).backward(grad)
        try:
            for _ in range(5):
                step()
            row[mode + "_synced"] = round(synced_ms(step), 4)
            row[mode + "_graph"] = round(graph_ms(step), 4)
        except Exception as e:  # report, keep going
            row[mode + "_err"] = (type(e).__name__ + ": " + str(e))[:160]
    print(json.dumps(row), flush=True)


T = 8192
print(torch.__version__, torch.cuda.get_device_name(), flush=True)

# seed_foo_d4096: matmul(a + b, w)
bench("seed_foo_d4096", lambda a, b, w: torch.matmul(a + b, w),
      [param(T, 4096, scale=1.0), param(4096, scale=1.0), param(4096, 4096)],
      torch.randn(T, 4096, device=dev, dtype=dt))

# ln_mlp_residual_d768: x + W2(gelu(W1(layer_norm(x))))
def ln_mlp(x, lw, lb, w1, b1, w2, b2):
    h = F.layer_norm(x, (x.shape[-1],), lw, lb, 1e-5)
    return x + F.linear(F.gelu(F.linear(h, w1, b1)), w2, b2)
bench("ln_mlp_residual_d768", ln_mlp,
      [param(T, 768, scale=1.0), param(768, scale=1.0), param(768), param(3072, 768), param(3072),
       param(768, 3072), param(768)], torch.randn(T, 768, device=dev, dtype=dt))

# rmsnorm_swiglu_d4096: x + Wd(silu(Wg(n)) * Wu(n)), n = rms_norm(x)
def rms_swiglu(x, nw, wg, wu, wd):
    n = F.rms_norm(x, (x.shape[-1],), nw, 1e-6)
    return x + F.linear(F.silu(F.linear(n, wg)) * F.linear(n, wu), wd)
bench("rmsnorm_swiglu_d4096", rms_swiglu,
      [param(1, T, 4096, scale=1.0), param(4096, scale=1.0), param(11008, 4096), param(11008, 4096),
       param(4096, 11008)], torch.randn(1, T, 4096, device=dev, dtype=dt))

# attention_softmax_t2048: softmax(q @ k^T * s, -1) @ v, [4, 32, 2048, 128]
def attn(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(128)), -1) @ v
bench("attention_softmax_t2048", attn,
      [param(4, 32, 2048, 128, scale=1.0), param(4, 32, 2048, 128, scale=1.0), param(4, 32, 2048, 128, scale=1.0)],
      torch.randn(4, 32, 2048, 128, device=dev, dtype=dt))

# mlp_gelu_d768 (same as torch_baselines.py's, for a same-call reference)
bench("mlp_gelu_d768", lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2),
      [param(T, 768, scale=1.0), param(3072, 768), param(3072), param(768, 3072), param(768)],
      torch.randn(T, 768, device=dev, dtype=dt))
