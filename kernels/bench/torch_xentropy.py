"""PyTorch at data/bench/cross_entropy_v50304's shape (run on the GPU machine; not part of the product).

F.cross_entropy(logits.float(), targets) on bf16 logits [8192, 50304] requiring grad, 'mean', forward
and backward, in eager mode and under torch.compile (default mode): per step the synced latency, the
CUDA-graph replay time (median of 5 rounds of 20 replays) and the profiler's kernels and their summed
time.  The measurements of ../shared/bench/torch_baselines.py, for this one workload.  One JSON object
per mode on stdout."""
import json, time
import torch
import torch.nn.functional as F

dev = "cuda"
torch.manual_seed(0)
X = (torch.randn(8192, 50304, device=dev)).to(torch.bfloat16).requires_grad_(True)
TGT = torch.randint(0, 50304, (8192,), device=dev)


def xent(logits):
    return F.cross_entropy(logits.float(), TGT)


def ev(fn, n):
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); a.record()
    for _ in range(n):
        fn()
    b.record(); b.synchronize()
    return a.elapsed_time(b) / n


for mode in ("eager", "default"):
    torch._dynamo.reset()
    f = xent if mode == "eager" else torch.compile(xent, dynamic=False)

    def step():
        X.grad = None
        f(X).backward()

    row = {"name": "cross_entropy 8192x50304", "mode": mode}
    t = time.time(); step(); torch.cuda.synchronize(); row["first_s"] = round(time.time() - t, 1)
    for _ in range(5):
        step()
    ts = []
    for _ in range(20):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); step(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    row["synced_ms"] = sorted(ts)[10]
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    ks = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    row["kernels"] = len(ks) / 3
    row["kernel_ms"] = sum(e.time_range.elapsed_us() for e in ks) / 3 / 1e3
    row["kernel_names"] = sorted({e.name[:60] for e in ks})
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    row["graph_ms"] = sorted(ev(g.replay, 20) for _ in range(5))[2]
    print(json.dumps(row), flush=True)
