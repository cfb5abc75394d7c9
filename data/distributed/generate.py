#!/usr/bin/env python3
"""generate.py: real Thunder traces of one distributed training step (DDP, FSDP ZERO2, FSDP ZERO3).

Runs on the GPU machine, from the repository root, with the thunder kit set up as `.thunder-kit/`
(../shared/thunder-kit/README.md: `sh ../shared/thunder-kit/setup.sh MIRROR .thunder-kit`):

    python3 data/distributed/generate.py --out $OUT/distributed

For each mode it starts one process that
  - puts the kit's `site` folder on sys.path, as thunder_oracle.py does (no nvFuser stub: Thunder's
    default executors without nvFuser, so the step executes);
  - initialises torch.distributed with NCCL as a world of one (rank 0, MASTER_ADDR=127.0.0.1, a free
    port);
  - builds a small LLaMA-style model (token embedding, RMSNorm, rotary attention through
    F.scaled_dot_product_attention, SwiGLU feed-forward, cross-entropy) in bf16 on cuda:0;
  - wraps it: `thunder.distributed.ddp(thunder.jit(model))`, or
    `thunder.distributed.fsdp(thunder.jit(model), device=cuda:0, sharding_strategy=FSDPType.ZERO2|ZERO3)`;
  - runs one forward and backward, and prints every trace of thunder.last_traces(jfn),
    thunder.last_backward_traces(jfn) and thunder.last_prologue_traces(jfn) plus the passes the kit
    hooks, with the kit's own section layout (`# ===== [i] <what> [TAG]: <provenance>`, its
    thunder_oracle.build_sections / render_sections), into <out>/<mode>.txt, whose header holds the
    versions, the world, the key sections and this file's source of the model and the step.

It also writes each key trace on its own, in the form castscope loads (one trace, a `# source:` line
first): <mode>_initial.txt (the trace the grad transform starts from: after the ddp/fsdp pass, with
the `synchronize` of every parameter), <mode>_grad_joint.txt, <mode>_final_fwd.txt and
<mode>_final_bwd.txt; and summary.txt.  When $OUT is set the outdir is also packed into
$OUT/distributed-traces.tgz.

Options: --modes ddp,fsdp_zero2,fsdp_zero3 (the default), --executors default|torch (Thunder's default
list without nvFuser, or the torch executor alone), --kit PATH (default .thunder-kit), --timeout S
per mode.
"""

import argparse
import contextlib
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("ddp", "fsdp_zero2", "fsdp_zero3")

# model size: small enough to read, large enough to have several buckets' worth of parameters
CFG = dict(vocab=256, dim=64, n_layers=2, n_heads=4, hidden=176, seq=32, batch=2)


# ================================================================================== the model
def build_model(torch):
    """A 2-block LLaMA-style model; parameter names as the bundled LLaMA traces (layers.N.attention.wq ...)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return y.type_as(x) * self.weight

    def rotate(x, cos, sin):
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    class Attention(nn.Module):
        def __init__(self, dim, n_heads):
            super().__init__()
            self.n_heads = n_heads
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, dim, bias=False)
            self.wv = nn.Linear(dim, dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)

        def forward(self, x, cos, sin):
            b, t, d = x.shape
            h = self.n_heads
            q = self.wq(x).view(b, t, h, d // h).transpose(1, 2)
            k = self.wk(x).view(b, t, h, d // h).transpose(1, 2)
            v = self.wv(x).view(b, t, h, d // h).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(b, t, d))

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.w_gate = nn.Linear(dim, hidden, bias=False)
            self.w_up = nn.Linear(dim, hidden, bias=False)
            self.w_down = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))

    class Block(nn.Module):
        def __init__(self, dim, n_heads, hidden):
            super().__init__()
            self.attention_norm = RMSNorm(dim)
            self.attention = Attention(dim, n_heads)
            self.ffn_norm = RMSNorm(dim)
            self.feed_forward = FeedForward(dim, hidden)

        def forward(self, x, cos, sin):
            x = x + self.attention(self.attention_norm(x), cos, sin)
            x = x + self.feed_forward(self.ffn_norm(x))
            return x

    class LLaMA(nn.Module):
        def __init__(self, vocab, dim, n_layers, n_heads, hidden, seq):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList(Block(dim, n_heads, hidden) for _ in range(n_layers))
            self.norm = RMSNorm(dim)
            self.output = nn.Linear(dim, vocab, bias=False)
            hd = dim // n_heads
            freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(seq).float(), freqs)
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)

        def forward(self, idx, targets):
            x = self.tok_embeddings(idx)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            logits = self.output(self.norm(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    c = CFG
    return LLaMA(c["vocab"], c["dim"], c["n_layers"], c["n_heads"], c["hidden"], c["seq"])


def wrap(thunder, torch, model, mode, jit_kwargs):
    """The distributed wrapper of `mode` around thunder.jit(model) (thunder/distributed/__init__.py at 1e22aacb1:
    ddp(model, *, broadcast_from=0, bucket_size_in_mb=25.0) and fsdp(model, *, device, sharding_strategy, ...)).
    Returns the wrapped module and the call as text."""
    import thunder.distributed as td

    jfn = thunder.jit(model, **jit_kwargs)
    jit = f"thunder.jit(model{jit_args_str(jit_kwargs)})"
    if mode == "ddp":
        return td.ddp(jfn), f"thunder.distributed.ddp({jit})"
    strategy = {"fsdp_zero2": td.FSDPType.ZERO2, "fsdp_zero3": td.FSDPType.ZERO3}[mode]
    dev = torch.device("cuda", 0)
    return (td.fsdp(jfn, device=dev, sharding_strategy=strategy),
            f"thunder.distributed.fsdp({jit}, device=torch.device('cuda', 0), sharding_strategy=FSDPType.{strategy.name})")


def jit_args_str(kw):
    return "".join(f", {k}={v!r}" for k, v in kw.items())


def step(jfn, idx, targets):
    """One training step: forward (the loss) and backward."""
    loss = jfn(idx, targets)
    loss.backward()
    return loss


# ================================================================================== child: one mode
def free_port():
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(mode, kit, outdir, executors):
    site = os.path.join(kit, "site")
    if not os.path.isfile(os.path.join(site, "thunder", "__init__.py")):
        raise SystemExit(f"generate.py: no Thunder in {site}: run the kit's setup.sh first (../shared/thunder-kit/README.md)")
    sys.path[:0] = [site, kit]  # the kit's site (Thunder, optree/looseversion stand-ins), and thunder_oracle itself
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", LOCAL_RANK="0",
                      WORLD_SIZE="1")
    t_start = time.time()
    import torch
    import torch.distributed as tdist

    # the kit's warm-up: torch.autocast inside Thunder's interpreter needs the device count cached
    torch.cuda.init()
    torch.cuda.device_count()
    torch.cuda.is_bf16_supported()
    torch.cuda.set_device(0)
    try:
        tdist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    except TypeError:
        tdist.init_process_group("nccl", rank=0, world_size=1)
    import thunder
    import thunder_oracle as oracle

    nv_note = "not on the path" if thunder.nvfuser_executor is None else "a real nvfuser is installed"
    oracle.install_hooks(False)
    jit_kwargs = {} if executors == "default" else {"executors": executors.split(",")}

    torch.manual_seed(1234)
    model = build_model(torch).to(device="cuda", dtype=torch.bfloat16)
    jfn, call = wrap(thunder, torch, model, mode, jit_kwargs)
    c = CFG
    g = torch.Generator().manual_seed(99)
    idx = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g).cuda()
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g).cuda()

    res = {"mode": mode, "call": call, "status": "error"}
    t0 = time.time()
    try:
        loss = step(jfn, idx, targets)
        torch.cuda.synchronize()
        res["loss"] = float(loss.float().item())
        res["grads"] = sum(1 for p in jfn.parameters() if p.grad is not None)
        res["params"] = sum(1 for _ in jfn.parameters())
    except Exception as e:  # noqa: BLE001  (the traces built before the failure are still printed)
        res["step_error"] = f"{type(e).__name__}: {e}"[:600]
        res["step_traceback"] = traceback.format_exc()[-3000:]
    res["step_s"] = round(time.time() - t0, 2)

    norm = oracle.make_norm(torch, thunder, HERE)
    sections, counts = oracle.build_sections(jfn, thunder)
    body, stats = oracle.render_sections(sections, norm)
    ks = oracle.key_sections(stats)
    # the trace grad starts from: the last of thunder.last_traces before the grad transform (after
    # the ddp/fsdp pass inserted a synchronize per parameter)
    if "GRAD JOINT" in ks:
        before = [s["section"] for s in stats
                  if s["label"].startswith("thunder.last_traces[") and s["section"] < ks["GRAD JOINT"]]
        if before:
            ks["GRAD INPUT"] = before[-1]
    res["key_sections"] = ks
    commit = oracle.thunder_commit()
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)
    except Exception:  # noqa: BLE001
        nccl = "?"
    dev = torch.cuda.get_device_name(0)
    cd = thunder.compile_data(jfn)
    ex_names = [e.name for e in cd.executors_list if not isinstance(e, thunder.extend.TemporaryExecutor)]
    src = "\n".join(inspect.getsource(f) for f in (build_model, wrap, step))
    H = [f"# generated by lightning-thunder <commit {commit[:9]}> with torch {torch.__version__} on {dev}, executors: "
         f"{', '.join(ex_names)}",
         f"# thunder {thunder.__version__} @ {commit}, torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl}), "
         f"Python {sys.version.split()[0]}; nvfuser: {nv_note}; optree/looseversion: the kit's pure-Python stand-ins",
         f"# torch.distributed: backend {tdist.get_backend()}, world_size {tdist.get_world_size()}, rank {tdist.get_rank()} "
         f"(a world of one: MASTER_ADDR=127.0.0.1, one process, one GPU)",
         f"# mode: {mode}  call: {call}",
         f"# model: LLaMA-style {CFG} bf16 on cuda:0; step: loss = jfn(idx, targets); loss.backward()  "
         f"(torch.manual_seed(1234) before the model, inputs from torch.Generator().manual_seed(99))",
         ("# step: ok, loss %.6g, %d of %d parameters have a grad, %.2f s" % (res["loss"], res["grads"], res["params"],
                                                                           res["step_s"]))
         if "loss" in res else "# UNEXPECTED: the step failed: " + norm(res["step_error"]),
         f"# counts: thunder.last_traces {counts['last_traces']}, last_backward_traces {counts['last_backward_traces']}, "
         f"last_prologue_traces {counts['last_prologue_traces']}, hooked {counts['hooked']}",
         "# key sections: " + (", ".join(f"{t} [{ks[t]}]" for t in ("INITIAL", "GRAD INPUT", "GRAD JOINT", "FINAL FORWARD",
                                                                    "FINAL BACKWARD") if t in ks) or "-")]
    H += oracle.summary_lines(stats)
    H.append(f"# source (data/distributed/{os.path.basename(__file__)}: the model, the wrapper and the step):")
    H += ["#   " + l for l in src.rstrip().splitlines()]
    H.append("")
    with open(os.path.join(outdir, f"{mode}.txt"), "w") as f:
        f.write("\n".join(H + body))

    # the key traces on their own, as castscope loads them
    texts = split_body(body)
    what = {"GRAD INPUT": "initial", "GRAD JOINT": "grad_joint", "FINAL FORWARD": "final_fwd",
            "FINAL BACKWARD": "final_bwd"}
    desc = {"initial": "the trace the grad transform starts from (after the %s pass)" % ("ddp" if mode == "ddp" else "fsdp"),
            "grad_joint": "the grad transform's joint trace", "final_fwd": "final forward trace",
            "final_bwd": "final backward trace"}
    res["files"] = [f"{mode}.txt"]
    for tag, suffix in what.items():
        if tag not in ks or ks[tag] not in texts:
            continue
        name = f"{mode}_{suffix}.txt"
        with open(os.path.join(outdir, name), "w") as f:
            f.write(f"# source: printed by Lightning Thunder (commit {commit[:9]}, torch {torch.__version__}, "
                    f"{'default executors without nvFuser' if executors == 'default' else 'executors ' + executors}) "
                    f"on an {dev} for a 2-block LLaMA-style model, bf16, {call}, torch.distributed NCCL world of one; "
                    f"{desc[suffix]}; section [{ks[tag]}] of {mode}.txt (data/distributed/generate.py)\n")
            f.write(texts[ks[tag]].rstrip("\n") + "\n")
        res["files"].append(name)
    res["status"] = "ok" if "loss" in res else "step-failed"
    res["wall_s"] = round(time.time() - t_start, 1)
    with open(os.path.join(outdir, f"{mode}.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    tdist.destroy_process_group()
    print(json.dumps({k: res.get(k) for k in ("mode", "status", "loss", "step_error", "files", "wall_s")}))


HEAD_RE = re.compile(r"^# ===== \[(\d+)\] ")


def split_body(body):
    """Section index -> the printed trace of that section (the lines after its header)."""
    out, cur, lines = {}, None, []
    for chunk in body:
        for line in chunk.split("\n"):
            m = HEAD_RE.match(line)
            if m:
                if cur is not None:
                    out[cur] = "\n".join(lines)
                cur, lines = int(m.group(1)), []
            elif cur is not None:
                lines.append(line)
    if cur is not None:
        out[cur] = "\n".join(lines)
    return {k: v for k, v in out.items() if not v.lstrip().startswith("# (the same TraceCtx")}


# ================================================================================== driver
def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--_child":
        _, _, mode, kit, outdir, executors = sys.argv
        return child(mode, kit, outdir, executors)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kit", default=".thunder-kit")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "distributed"))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--executors", default="default", help="'default' (Thunder's default list without nvFuser) or "
                                                           "comma-separated executor names, e.g. torch")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per mode")
    a = ap.parse_args()
    kit, outdir = os.path.abspath(a.kit), os.path.abspath(a.out)
    os.makedirs(outdir, exist_ok=True)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"generate.py: unknown mode {m!r}; modes are {', '.join(MODES)}")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", TORCHINDUCTOR_COMPILE_THREADS="1")
    lines = []
    for m in modes:  # one at a time: each is a world of one on GPU 0
        t0 = time.time()
        log = os.path.join(outdir, f"{m}.log")
        with open(log, "w") as f:
            try:
                rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", m, kit, outdir, a.executors],
                                    stdout=f, stderr=subprocess.STDOUT, env=env, timeout=a.timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        try:
            with open(os.path.join(outdir, f"{m}.json")) as f:
                r = json.load(f)
            line = (f"{m:12s} {r['status']} loss={r.get('loss')} files={','.join(r.get('files', []))} "
                    f"{r.get('step_error', '')[:300]}")
        except (OSError, ValueError):
            with open(log, errors="replace") as f:
                line = f"{m:12s} ERROR rc={rc}: {f.read()[-1500:]}"
        line += f"  ({round(time.time() - t0, 1)} s)"
        print(line, flush=True)
        lines.append(line)
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if os.environ.get("OUT"):
        tgz = os.path.join(os.environ["OUT"], "distributed-traces.tgz")
        with tarfile.open(tgz, "w:gz") as t:
            t.add(outdir, arcname="distributed")
        print("packed", outdir, "into", tgz)
    return 0 if all(" ok " in l for l in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
