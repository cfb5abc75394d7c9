"""Whole-model training steps in PyTorch eager and torch.compile (castscope issue 20), beside
`castscope-cli run --device cuda` of the same models' Thunder traces in one GPU call.

Models: the 8-block LLaMA behind ../shared/traces/thunder_llama_stack_*.txt
(tests/oracle/models.py) and a 32-layer one of the same dims (castscope's 32-layer trace is that
trace with 24 more copies of its last block: `bench-compile --emit 32`), and the GPT stack of
tests/oracle/gpt_stack.py at 4 and 12 blocks.  bf16, forward + backward of the loss.

Per model and mode: "graph" = one torch.cuda.CUDAGraph replay of the step (zeroed grads,
forward, backward), mean of 50 between two events (GPU time); "synced" = median of 20 single
steps between an event pair with a sync (latency); "kernels" = CUDA kernels per step from the
profiler (memcpy/memset not counted).  One JSON object per line.

    python3 kernels/bench/torch_models.py [NAME...]
"""
import json, os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "oracle"))
import models as llama          # noqa: E402  (builds its 8-block model on import)
import gpt_stack                # noqa: E402

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True


def llama_model(n):
    llama.N_LAYERS = n
    torch.manual_seed(0)
    return llama.LLaMA().to(device="cuda", dtype=torch.bfloat16), llama.VOCAB, (llama.BATCH, llama.SEQ)


def gpt_model(n):
    return gpt_stack.model(n), gpt_stack.VOCAB, (gpt_stack.BATCH, gpt_stack.SEQ)


MODELS = {"llama8": lambda: llama_model(8), "llama32": lambda: llama_model(32),
          "gpt4": lambda: gpt_model(4), "gpt12": lambda: gpt_model(12)}


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
    for _ in range(3):
        g.replay()
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


def kernels_per_step(step):
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(); torch.cuda.synchronize()
    n = 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower() \
                and "memset" not in e.name.lower():
            n += 1
    return n


def bench(name):
    m, vocab, shape = MODELS[name]()
    idx = torch.randint(0, vocab, shape, device="cuda")
    tgt = torch.randint(0, vocab, shape, device="cuda")
    row = {"name": name, "params": sum(p.numel() for p in m.parameters())}
    for mode in ("eager", "compile"):
        torch._dynamo.reset()
        f = m if mode == "eager" else torch.compile(m, dynamic=False)

        def step():
            for p in m.parameters():
                p.grad = None
            f(idx, tgt).backward()
        try:
            for _ in range(5):
                step()
            row[mode + "_synced"] = round(synced_ms(step), 4)
            row[mode + "_kernels"] = kernels_per_step(step)
            row[mode + "_graph"] = round(graph_ms(step), 4)
        except Exception as e:  # report, keep going
            row[mode + "_err"] = (type(e).__name__ + ": " + str(e))[:200]
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for name in sys.argv[1:] or list(MODELS):
        bench(name)
