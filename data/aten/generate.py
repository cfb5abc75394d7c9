#!/usr/bin/env python3
"""Print torch.compile's AOT graphs of castscope's sample functions, for data/aten/.

Runs on the GPU machine with its own PyTorch (2.11; no internet, no other package): for each
function of data/ (the seed foo, mlp_gelu, ln_mlp_residual, rmsnorm_swiglu, attention_softmax,
cross_entropy) and a small GPT and LLaMA block, in bf16 and in f32 under bf16 autocast, it
compiles the function with torch.compile, runs one forward and backward on CUDA, and writes
what TORCH_LOGS=aot_graphs printed (the AOT forward and backward graphs) to
OUT/<case>_<mode>.txt, with the generating source in the file's header.

    python3 data/aten/generate.py --out OUT [--cases seed_foo,gpt_block] [--modes bf16,autocast]
                                  [--backend inductor|aot_eager] [--inductor DIR] [--profile DIR]

With --inductor, Inductor's generated code (TORCH_LOGS=output_code: the kernels each graph
runs, with the FX nodes each kernel fuses) goes to DIR/<case>_<mode>.output_code; with --profile,
torch.profiler's record of one more step (its matmul ops with their input dtypes, and the
number of CUDA kernels) to DIR/<case>_<mode>.json.

Each case compiles in a child process of its own (TORCH_LOGS is read at import) with the
compile caches off, so every graph is traced and logged afresh.  The shapes are castscope's
test sizes, small enough for its CPU reference.
"""
import argparse
import inspect
import os
import re
import subprocess
import sys
import tempfile
import textwrap

# ------------------------------------------------------------------------------------------------
# The functions (the same as data/*.txt traced by Thunder) and their inputs.  Imports of torch
# stay inside the functions: the parent process never imports torch.


def seed_foo(a, b, w):
    import torch
    return torch.matmul(a + b, w)


def mlp_gelu(x, w1, b1, w2, b2):
    import torch.nn.functional as F
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate='tanh'), w2, b2)


def ln_mlp_residual(x, ln_w, ln_b, w1, b1, w2, b2):
    import torch.nn.functional as F
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, 1e-5)
    return x + F.linear(F.gelu(F.linear(h, w1, b1)), w2, b2)


def rmsnorm_swiglu(x, norm_w, w_gate, w_up, w_down):
    import torch.nn.functional as F
    n = F.rms_norm(x, (x.shape[-1],), norm_w, 1e-6)
    return x + F.linear(F.silu(F.linear(n, w_gate)) * F.linear(n, w_up), w_down)


def attention_softmax(q, k, v):
    import torch
    return torch.softmax(q @ k.transpose(-2, -1) * 0.25, -1) @ v


def cross_entropy(logits, targets):
    import torch.nn.functional as F
    return F.cross_entropy(logits.float(), targets)


def gpt_block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj):
    """A GPT-2 block: pre-LayerNorm causal self-attention and a GELU MLP, residuals."""
    import math
    import torch
    import torch.nn.functional as F
    B, T, C = x.shape
    H = 4
    h = F.layer_norm(x, (C,), ln1_w, ln1_b, 1e-5)
    q, k, v = F.linear(h, w_qkv, b_qkv).split(C, dim=-1)
    q = q.view(B, T, H, C // H).transpose(1, 2)
    k = k.view(B, T, H, C // H).transpose(1, 2)
    v = v.view(B, T, H, C // H).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    att = torch.softmax(att.masked_fill(~mask, float('-inf')), dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    x = x + F.linear(y, w_o, b_o)
    h = F.layer_norm(x, (C,), ln2_w, ln2_b, 1e-5)
    return x + F.linear(F.gelu(F.linear(h, w_fc, b_fc), approximate='tanh'), w_proj, b_proj)


def llama_block(x, attn_norm_w, w_q, w_k, w_v, w_o, ffn_norm_w, w_gate, w_up, w_down):
    """A LLaMA block: RMSNorm, causal self-attention without biases, SwiGLU MLP, residuals."""
    import math
    import torch
    import torch.nn.functional as F
    B, T, C = x.shape
    H = 4
    h = F.rms_norm(x, (C,), attn_norm_w, 1e-6)
    q = F.linear(h, w_q).view(B, T, H, C // H).transpose(1, 2)
    k = F.linear(h, w_k).view(B, T, H, C // H).transpose(1, 2)
    v = F.linear(h, w_v).view(B, T, H, C // H).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    att = torch.softmax(att.masked_fill(~mask, float('-inf')), dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    x = x + F.linear(y, w_o)
    h = F.rms_norm(x, (C,), ffn_norm_w, 1e-6)
    return x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)


# name -> (function, inputs: (name, shape, kind)); kind 'f' float (requires grad), 'i<N>' int64
# indices below N (no grad)
CASES = {
    'seed_foo': (seed_foo, [('a', (8, 16), 'f'), ('b', (16,), 'f'), ('w', (16, 16), 'f')]),
    'mlp_gelu': (mlp_gelu, [('x', (32, 64), 'f'), ('w1', (256, 64), 'f'), ('b1', (256,), 'f'),
                            ('w2', (64, 256), 'f'), ('b2', (64,), 'f')]),
    'ln_mlp_residual': (ln_mlp_residual, [('x', (32, 64), 'f'), ('ln_w', (64,), 'f'),
                                          ('ln_b', (64,), 'f'), ('w1', (256, 64), 'f'),
                                          ('b1', (256,), 'f'), ('w2', (64, 256), 'f'),
                                          ('b2', (64,), 'f')]),
    'rmsnorm_swiglu': (rmsnorm_swiglu, [('x', (2, 16, 64), 'f'), ('norm_w', (64,), 'f'),
                                        ('w_gate', (172, 64), 'f'), ('w_up', (172, 64), 'f'),
                                        ('w_down', (64, 172), 'f')]),
    'attention_softmax': (attention_softmax, [('q', (2, 4, 32, 16), 'f'), ('k', (2, 4, 32, 16), 'f'),
                                              ('v', (2, 4, 32, 16), 'f')]),
    'cross_entropy': (cross_entropy, [('logits', (64, 512), 'f'), ('targets', (64,), 'i512')]),
    'gpt_block': (gpt_block, [('x', (2, 16, 64), 'f'), ('ln1_w', (64,), 'f'), ('ln1_b', (64,), 'f'),
                              ('w_qkv', (192, 64), 'f'), ('b_qkv', (192,), 'f'),
                              ('w_o', (64, 64), 'f'), ('b_o', (64,), 'f'),
                              ('ln2_w', (64,), 'f'), ('ln2_b', (64,), 'f'),
                              ('w_fc', (256, 64), 'f'), ('b_fc', (256,), 'f'),
                              ('w_proj', (64, 256), 'f'), ('b_proj', (64,), 'f')]),
    'llama_block': (llama_block, [('x', (2, 16, 64), 'f'), ('attn_norm_w', (64,), 'f'),
                                  ('w_q', (64, 64), 'f'), ('w_k', (64, 64), 'f'),
                                  ('w_v', (64, 64), 'f'), ('w_o', (64, 64), 'f'),
                                  ('ffn_norm_w', (64,), 'f'), ('w_gate', (172, 64), 'f'),
                                  ('w_up', (172, 64), 'f'), ('w_down', (64, 172), 'f')]),
}

MODES = {
    'bf16': 'every float input bf16; no autocast',
    'autocast': 'every float input f32, run under torch.autocast("cuda", dtype=torch.bfloat16)',
}

DRIVER = '''\
inputs = [make(name, shape, kind) for name, shape, kind in INPUTS]   # on cuda, seeded
compiled = torch.compile(FN, backend=BACKEND, dynamic=False, fullgraph=True)
with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(MODE == "autocast")):
    out = compiled(*inputs)
out.float().sum().backward()       # tangents: ones, cast to the output's dtype
torch.cuda.synchronize()'''


def child(case, mode, backend):
    """Compile and run one case; TORCH_LOGS=aot_graphs (set by the parent) logs the graphs."""
    import torch
    fn, specs = CASES[case]
    torch.manual_seed(0)
    dtype = torch.bfloat16 if mode == 'bf16' else torch.float32

    def make(name, shape, kind):
        if kind.startswith('i'):
            return torch.randint(0, int(kind[1:]), shape, device='cuda')
        scale = 1.0 / (shape[-1] ** 0.5) if len(shape) >= 2 else 1.0
        t = (torch.randn(shape, device='cuda') * scale).to(dtype)
        return t.requires_grad_(True)

    inputs = [make(*s) for s in specs]
    compiled = torch.compile(fn, backend=backend, dynamic=False, fullgraph=True)
    with torch.autocast('cuda', dtype=torch.bfloat16, enabled=(mode == 'autocast')):
        out = compiled(*inputs)
    out.float().sum().backward()
    torch.cuda.synchronize()
    if os.environ.get('CS_PROFILE_OUT'):
        profile(compiled, inputs, mode, os.environ['CS_PROFILE_OUT'])
    print('ok %s %s %s' % (case, mode, str(out.dtype)), flush=True)


# The aten ops whose profiler records say how many matmuls ran and in which dtypes.
MATMUL_OPS = ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::matmul',
              'aten::linear', 'aten::_scaled_dot_product_flash_attention',
              'aten::_scaled_dot_product_efficient_attention',
              'aten::_scaled_dot_product_cudnn_attention',
              'aten::_scaled_dot_product_flash_attention_backward',
              'aten::_scaled_dot_product_efficient_attention_backward',
              'aten::_scaled_dot_product_cudnn_attention_backward')


def profile(compiled, inputs, mode, path):
    """Run one more forward and backward of @compiled under torch.profiler (record_shapes) and
    write to @path, as JSON, every matmul-like aten op it recorded (name, input dims and input
    types, in order) and the number of CUDA kernels launched: PyTorch's own count of what the
    compiled graphs ran, for castscope's stats to be held against."""
    import json
    import torch
    from torch.profiler import ProfilerActivity, profile as tprofile
    for t in inputs:
        if t.grad is not None:
            t.grad = None
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=(mode == 'autocast')):
            out = compiled(*inputs)
        out.float().sum().backward()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix='.json') as tmp:
        prof.export_chrome_trace(tmp.name)
        with open(tmp.name) as f:
            events = json.load(f).get('traceEvents', [])
    ops, kernels = [], 0
    for e in sorted(events, key=lambda e: e.get('ts', 0)):
        if e.get('cat') == 'kernel':
            kernels += 1
        elif e.get('cat') == 'cpu_op' and e.get('name') in MATMUL_OPS:
            a = e.get('args', {})
            ops.append({'name': e['name'], 'input_dims': a.get('Input Dims'),
                        'input_types': a.get('Input type')})
    with open(path, 'w') as f:
        json.dump({'torch': torch.__version__, 'cuda_kernels': kernels, 'matmul_ops': ops}, f,
                  indent=1)


# A glog-style prefix: `I0101 12:34:56.789000 1234 path/file.py:56] `
PREFIX = re.compile(r'^[IWEDVC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ')


def log_records(stderr, tag):
    """The [@tag] log records of @stderr (a record runs to the next prefixed line)."""
    out, keep = [], False
    for line in stderr.splitlines():
        if PREFIX.match(line):
            keep = '[%s]' % tag in line
        if keep:
            out.append(line)
    return out


def shorten_paths(text):
    """@text with machine paths shortened: site-packages and the checkout to relative paths,
    Inductor's per-run cache directories (mkdtemp folders in the temporary directory) to
    `<cache>/`."""
    text = re.sub(r'/\S*?/site-packages/', '', text)
    text = text.replace(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                        + os.sep, '')
    temp = re.escape(tempfile.gettempdir().rstrip(os.sep) + os.sep)
    return re.sub(temp + r'tmp\w+/(tmp\w+/)?', '<cache>/', text)


def elide_kernel_bodies(lines):
    """The output_code records @lines without the Triton source of each kernel (the text between
    `async_compile.triton('name', '''` and `''', device_str=...`): castscope reads only which
    kernels the wrapper's `call` runs and the source-node comments above each."""
    out, inside = [], False
    for line in lines:
        if inside:
            if "''', device_str=" in line:
                inside = False
                out.append(line)
            continue
        out.append(line)
        if 'async_compile.triton(' in line and line.rstrip().endswith("'''"):
            inside = True
            out.append(line.split('[__output_code]')[0]
                       + "[__output_code]     # (the kernel's Triton source is elided in castscope's copy)")
    return out


def aot_records(stderr):
    """The [__aot_graphs] log records of @stderr."""
    return log_records(stderr, '__aot_graphs')


def header(case, mode, backend, torch_version, device_name):
    fn, specs = CASES[case]
    lines = [
        'castscope sample: the AOT forward and backward graphs torch.compile printed',
        '(TORCH_LOGS=aot_graphs) for %s, %s; PyTorch %s, backend %s, on %s.' % (
            case, MODES[mode], torch_version, backend, device_name),
        'Generated by data/aten/generate.py (python3 data/aten/generate.py --cases %s --modes %s'
        ' --backend %s); the log records follow, machine paths shortened.' % (case, mode, backend),
        '',
        'source:',
    ]
    lines += ['  ' + l for l in textwrap.dedent(inspect.getsource(fn)).rstrip().splitlines()]
    lines += ['', 'inputs (name, shape, kind: f float with requires_grad, iN int64 in [0, N)):']
    lines += ['  %s %s %s' % (n, list(s), k) for n, s, k in specs]
    lines += ['', 'driver (MODE = %r, BACKEND = %r):' % (mode, backend)]
    lines += ['  ' + l for l in DRIVER.splitlines()]
    return ''.join('# %s\n' % l if l else '#\n' for l in lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument('--cases', default=','.join(CASES))
    ap.add_argument('--modes', default=','.join(MODES))
    ap.add_argument('--backend', default='inductor')
    ap.add_argument('--inductor', metavar='DIR',
                    help='also log TORCH_LOGS=output_code and write Inductor\'s generated code '
                         '(its kernels and their source-node comments) to DIR/<case>_<mode>.output_code')
    ap.add_argument('--profile', metavar='DIR',
                    help='also write the profiler\'s matmul ops and kernel count of one more '
                         'step to DIR/<case>_<mode>.json')
    ap.add_argument('--child', nargs=3, metavar=('CASE', 'MODE', 'BACKEND'), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0

    os.makedirs(args.out, exist_ok=True)
    probe = subprocess.run([sys.executable, '-c',
                            'import torch; print(torch.__version__); print(torch.cuda.get_device_name(0))'],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        sys.stderr.write(probe.stderr)
        return 1
    torch_version, device_name = probe.stdout.split('\n')[:2]
    failed = 0
    for case in args.cases.split(','):
        for mode in args.modes.split(','):
            if case not in CASES or mode not in MODES:
                print('unknown case or mode: %s %s' % (case, mode))
                failed += 1
                continue
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TORCH_LOGS='aot_graphs', TORCHINDUCTOR_FORCE_DISABLE_CACHES='1',
                           TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, 'triton'))
                if args.inductor:
                    env['TORCH_LOGS'] = 'aot_graphs,output_code'
                if args.profile:
                    os.makedirs(args.profile, exist_ok=True)
                    env['CS_PROFILE_OUT'] = os.path.join(args.profile, '%s_%s.json' % (case, mode))
                r = subprocess.run([sys.executable, os.path.abspath(__file__), '--child', case, mode,
                                    args.backend], env=env, capture_output=True, text=True)
            records = aot_records(r.stderr)
            path = os.path.join(args.out, '%s_%s.txt' % (case, mode))
            if r.returncode != 0 or not any('TRACED GRAPH' in l for l in records):
                failed += 1
                print('FAILED %s %s (exit %d):\n%s' % (case, mode, r.returncode, r.stderr[-3000:]))
                continue
            with open(path, 'w') as f:
                f.write(header(case, mode, args.backend, torch_version, device_name))
                f.write(shorten_paths('\n'.join(records)) + '\n')
            if args.inductor:
                os.makedirs(args.inductor, exist_ok=True)
                code = elide_kernel_bodies(log_records(r.stderr, '__output_code'))
                with open(os.path.join(args.inductor, '%s_%s.output_code' % (case, mode)), 'w') as f:
                    f.write(header(case, mode, args.backend, torch_version, device_name)
                            .replace('AOT forward and backward graphs', 'generated code', 1)
                            .replace('(TORCH_LOGS=aot_graphs)', '(TORCH_LOGS=output_code)', 1)
                            .replace(' --backend %s); the log records follow, machine paths shortened.' % args.backend,
                                     ' --backend %s --inductor DIR); the log records follow, the'
                                     ' Triton kernel bodies elided.' % args.backend, 1))
                    f.write(shorten_paths('\n'.join(code)) + '\n')
            n = sum('TRACED GRAPH' in l for l in records)
            print('%s: %d graphs, %s' % (path, n, r.stdout.strip()))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
