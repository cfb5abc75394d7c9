"""PyTorch's scaled dot product attention, forward + backward, timed on the GPU.

For comparison with `castscope-cli run FILE --device cuda --iters N` on the sdpa traces of
kernels/gpu-attention.sh: q, k, v [B, H, T, D] bf16 with requires_grad, one step =
F.scaled_dot_product_attention + backward of a random cotangent, per backend PyTorch picks
(default: flash) and cuDNN's (SDPBackend.CUDNN_ATTENTION), causal and not.  Each step is
captured in a CUDA graph and replayed; the median of N replays (CUDA events) is printed, with
torch's cuDNN version.

    python3 kernels/bench/torch_sdpa.py [B H T D] [--iters N]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def step_time(q, k, v, g, causal, backend, iters):
    def step():
        for t in (q, k, v):
            t.grad = None
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(g)

    with sdpa_kernel([backend]):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="*", type=int, default=[4, 32, 2048, 128], help="B H T D")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    B, H, T, D = a.shape
    try:
        cudnn = torch.backends.cudnn.version()
    except RuntimeError as e:  # a libcudnn other than torch's own on the library path
        cudnn = f"unavailable ({e})"
    print(f"torch {torch.__version__}, cuDNN {cudnn}, {torch.cuda.get_device_name()}")
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
    for causal in (True, False):
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                ms = step_time(q, k, v, g, causal, backend, a.iters)
                print(f"sdpa [{B},{H},{T},{D}] bf16 {'causal' if causal else 'non-causal'} {name}: fwd+bwd {ms:.3f} ms")
            except Exception as e:  # a backend that refuses the case
                print(f"sdpa {name} {'causal' if causal else 'non-causal'}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
