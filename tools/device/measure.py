#!/usr/bin/env python3
"""measure.py -- single-GPU reference measurements for hw_models/ (run on the GPU).

What tpusim's hardware entries need and a GPU vendor's datasheet does not say:
the sustained rates of the kernels a training step runs. One call measures,
in this order (each section guarded, results written as they come):

  info       driver, clocks, power limit, library versions
  hbm        device copy / read / write bandwidth (bytes moved / time)
  mamf       bf16 and fp8 GEMM over a small shape grid (the MAMF idea:
             best of a shape search), median of timed runs after warm-up
  gemm       the GEMMs of Llama 3 8B / 70B layers (fwd, dgrad, wgrad layouts)
  attn       causal and full attention, head dim 128, flash (FA2) and cuDNN
             backends of torch SDPA, forward and forward+backward, the
             FlashAttention-3 paper's setup (batch x seqlen = 16k, 16 heads)
  grouped    torch._grouped_mm (bf16 MoE grouped GEMM) by tokens per expert,
             against one dense GEMM of the same total shape
  launch     eager dispatch per op, and per kernel in a CUDA graph replay
  adamw      fused and foreach AdamW over 2^28 fp32 parameters
  layer      a Llama 3 8B decoder layer, eager PyTorch, fwd+bwd
  sustain    30 s of back-to-back bf16 8192^3 GEMMs (then 15 s of fp8) with
             nvidia-smi sampling clocks and power every 0.5 s

Timing: CUDA events around each run, the median of `reps` runs after `warm`
warm-ups, random normal inputs (never zeros: they draw less power and run
faster). FLOP conventions: GEMM 2mnk; attention 4 s^2 d h b, halved when
causal, backward 2.5x forward (FlashAttention-3 paper, sec. 4.1).

Usage: python3 tools/device/measure.py OUTDIR [SECTION ...]
Writes OUTDIR/results.jsonl (one JSON object per measurement) and the
nvidia-smi logs; prints a summary last.
"""
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
ONLY = set(sys.argv[2:])
T0 = time.time()
RES = open(os.path.join(OUT, "results.jsonl"), "a")
DEV = "cuda"
SUMMARY = []


def emit(section, name, **kw):
    rec = {"section": section, "name": name}
    rec.update(kw)
    RES.write(json.dumps(rec, sort_keys=True) + "\n")
    RES.flush()
    return rec


def say(msg):
    line = "[%6.1fs] %s" % (time.time() - T0, msg)
    print(line, flush=True)


def bench(fn, warm=3, reps=20):
    """Median seconds of fn() over reps runs, timed with CUDA events."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    ts = sorted(s.elapsed_time(e) for s, e in zip(st, en))
    return ts[len(ts) // 2] / 1e3, ts[0] / 1e3, ts[-1] / 1e3


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return "error: %s" % e


def sec_info():
    p = torch.cuda.get_device_properties(0)
    emit("info", "device", gpu=p.name, sms=p.multi_processor_count,
         mem_bytes=p.total_memory, torch=torch.__version__, cuda=torch.version.cuda,
         cudnn=torch.backends.cudnn.version(),
         smi=smi("name,driver_version,power.limit,power.default_limit,power.max_limit,"
                 "clocks.max.sm,clocks.max.mem,clocks.sm,temperature.gpu,pstate"),
         date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    with open(os.path.join(OUT, "smi_q_start.txt"), "w") as f:
        f.write(subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE,TEMPERATURE"],
                               capture_output=True, text=True).stdout)
    say("info: %s, %d SMs, torch %s, cuDNN %s" % (p.name, p.multi_processor_count,
                                                 torch.__version__, torch.backends.cudnn.version()))


def sec_hbm():
    n = 1 << 31  # 2^31 bf16 = 4 GiB
    a = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    b = torch.empty_like(a)
    nb = n * 2
    t, _, _ = bench(lambda: b.copy_(a), warm=3, reps=20)
    emit("hbm", "copy", bytes=2 * nb, time_s=t, bw_bytes_per_s=2 * nb / t)
    SUMMARY.append("hbm copy  %.0f GB/s (read+write)" % (2 * nb / t / 1e9))
    t, _, _ = bench(lambda: b.fill_(1.5), warm=3, reps=20)
    emit("hbm", "write", bytes=nb, time_s=t, bw_bytes_per_s=nb / t)
    SUMMARY.append("hbm write %.0f GB/s" % (nb / t / 1e9))
    t, _, _ = bench(lambda: torch.sum(a, dtype=torch.float32), warm=3, reps=20)
    emit("hbm", "read", bytes=nb, time_s=t, bw_bytes_per_s=nb / t)
    SUMMARY.append("hbm read  %.0f GB/s" % (nb / t / 1e9))
    c = torch.empty_like(a)
    t, _, _ = bench(lambda: torch.add(a, b, out=c), warm=3, reps=20)
    emit("hbm", "add", bytes=3 * nb, time_s=t, bw_bytes_per_s=3 * nb / t)
    SUMMARY.append("hbm add   %.0f GB/s (2 reads + 1 write)" % (3 * nb / t / 1e9))
    say("hbm done")


def gemm_bf16(m, n, k, layout="nt"):
    """Time y = a @ b for [m,k] x [k,n] in bf16; layout says how b is stored:
    'nt' b = W^T with W [n,k] contiguous (nn.Linear forward), 'nn' b [k,n]
    contiguous (dgrad), 'tn' a = X^T with X [k,m] contiguous (wgrad)."""
    if layout == "tn":
        a = torch.randn(k, m, device=DEV, dtype=torch.bfloat16).t()
    else:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    if layout == "nt":
        b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16).t()
    else:
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    reps = 20 if m * n * k < (1 << 36) else 10
    t, tmin, tmax = bench(lambda: torch.mm(a, b, out=c), warm=5, reps=reps)
    del a, b, c
    return t, tmin, tmax


def fp8_pair(m, n, k):
    a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
    return a, b


def gemm_fp8(m, n, k, rowwise=False, fast=True):
    a, b = fp8_pair(m, n, k)
    if rowwise:
        sa = torch.ones(m, 1, device=DEV, dtype=torch.float32)
        sb = torch.ones(1, n, device=DEV, dtype=torch.float32)
    else:
        sa = torch.tensor(1.0, device=DEV)
        sb = torch.tensor(1.0, device=DEV)
    fn = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                  use_fast_accum=fast)
    t, tmin, tmax = bench(fn, warm=5, reps=20)
    del a, b
    return t, tmin, tmax


def sec_mamf():
    dims = [2048, 4096, 8192, 16384]
    ks = [2048, 4096, 8192, 13312, 16384]
    best = (0, None)
    for m in dims:
        for n in dims:
            for k in ks:
                t, tmin, tmax = gemm_bf16(m, n, k)
                fl = 2.0 * m * n * k
                emit("mamf", "bf16", m=m, n=n, k=k, time_s=t, tmin_s=tmin, tmax_s=tmax,
                     flops_per_s=fl / t)
                if fl / t > best[0]:
                    best = (fl / t, (m, n, k))
    SUMMARY.append("mamf bf16 best %.1f TFLOP/s at %s" % (best[0] / 1e12, best[1]))
    say(SUMMARY[-1])
    best = (0, None)
    for m in [2048, 4096, 8192, 16384]:
        for n in [4096, 8192, 16384]:
            for k in [4096, 8192, 16384]:
                t, tmin, tmax = gemm_fp8(m, n, k)
                fl = 2.0 * m * n * k
                emit("mamf", "fp8_tensorwise_fastacc", m=m, n=n, k=k, time_s=t, tmin_s=tmin,
                     tmax_s=tmax, flops_per_s=fl / t)
                if fl / t > best[0]:
                    best = (fl / t, (m, n, k))
    SUMMARY.append("mamf fp8 best %.1f TFLOP/s at %s" % (best[0] / 1e12, best[1]))
    say(SUMMARY[-1])
    for m, n, k in [(8192, 8192, 8192), (16384, 8192, 8192)]:
        for rw, fast in [(False, False), (True, True), (True, False)]:
            try:
                t, tmin, tmax = gemm_fp8(m, n, k, rowwise=rw, fast=fast)
            except Exception as e:  # noqa: BLE001
                emit("mamf", "fp8_error", rowwise=rw, fast=fast, error=str(e)[:300])
                continue
            emit("mamf", "fp8_%s_%s" % ("rowwise" if rw else "tensorwise",
                                        "fastacc" if fast else "splitacc"),
                 m=m, n=n, k=k, time_s=t, flops_per_s=2.0 * m * n * k / t)


# Llama 3 layer GEMMs: (name, n_out, k_in) per layer with tp shards applied.
def llama_gemms(h, ffn, heads, kv, hd, tp):
    return [("qkv", (heads + 2 * kv) * hd // tp, h), ("o", h, heads * hd // tp),
            ("fc1", 2 * ffn // tp, h), ("fc2", h, ffn // tp)]


def sec_gemm():
    cases = [("llama3-8b", 4096, 14336, 32, 8, 128, 1), ("llama3-70b", 8192, 28672, 64, 8, 128, 1),
             ("llama3-70b", 8192, 28672, 64, 8, 128, 4), ("llama3-70b", 8192, 28672, 64, 8, 128, 8)]
    for model, h, ffn, heads, kv, hd, tp in cases:
        for tokens in [4096, 8192, 16384]:
            for name, n, k in llama_gemms(h, ffn, heads, kv, hd, tp):
                # forward [T,k]x[k,n]; dgrad [T,n]x[n,k]; wgrad [n,T]x[T,k]
                for phase, (mm, nn, kk, lay) in [("fwd", (tokens, n, k, "nt")),
                                                 ("dgrad", (tokens, k, n, "nn")),
                                                 ("wgrad", (n, k, tokens, "tn"))]:
                    t, tmin, tmax = gemm_bf16(mm, nn, kk, lay)
                    emit("gemm", "%s/tp%d/%s/%s" % (model, tp, name, phase), m=mm, n=nn, k=kk,
                         layout=lay, tokens=tokens, time_s=t, tmin_s=tmin, tmax_s=tmax,
                         flops_per_s=2.0 * mm * nn * kk / t)
                if tokens == 8192:
                    t, _, _ = gemm_fp8(tokens, n, k, rowwise=False, fast=True)
                    emit("gemm", "%s/tp%d/%s/fwd-fp8" % (model, tp, name), m=tokens, n=n, k=k,
                         tokens=tokens, time_s=t, flops_per_s=2.0 * tokens * n * k / t)
    say("gemm done")


def sec_attn():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    heads, d, total = 16, 128, 16384
    for bname, be in backends:
        for causal in [True, False]:
            for s in [1024, 2048, 4096, 8192, 16384]:
                b = total // s
                try:
                    q, k, v = (torch.randn(b, heads, s, d, device=DEV, dtype=torch.bfloat16,
                                           requires_grad=True) for _ in range(3))
                    g = torch.randn(b, heads, s, d, device=DEV, dtype=torch.bfloat16)
                    with sdpa_kernel([be]):
                        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        tf, _, _ = bench(fwd, warm=3, reps=20)

                        def fb():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            o.backward(g)
                        tfb, _, _ = bench(fb, warm=3, reps=10)
                    ff = 4.0 * s * s * d * heads * b * (0.5 if causal else 1.0)
                    tb = tfb - tf
                    emit("attn", "%s/%s" % (bname, "causal" if causal else "full"), seq=s,
                         batch=b, heads=heads, head_dim=d, fwd_s=tf, fwdbwd_s=tfb,
                         fwd_flops_per_s=ff / tf, bwd_flops_per_s=2.5 * ff / tb,
                         fwdbwd_flops_per_s=3.5 * ff / tfb)
                    if s in (4096, 16384):
                        SUMMARY.append("attn %s %s s=%d fwd %.0f bwd %.0f TFLOP/s" % (
                            bname, "causal" if causal else "full", s, ff / tf / 1e12,
                            2.5 * ff / tb / 1e12))
                    del q, k, v, g
                except Exception as e:  # noqa: BLE001
                    emit("attn", "%s/error" % bname, seq=s, error=str(e)[:300])
    # GQA as Llama 3 8B runs it (32 query heads, 8 kv heads), 8k causal, cuDNN and flash
    for bname, be in backends:
        try:
            s, b, hq, hk = 8192, 1, 32, 8
            q = torch.randn(b, hq, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
            k, v = (torch.randn(b, hk, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                    for _ in range(2))
            g = torch.randn(b, hq, s, d, device=DEV, dtype=torch.bfloat16)
            with sdpa_kernel([be]):
                fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                tf, _, _ = bench(fwd, warm=3, reps=20)

                def fb():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(g)
                tfb, _, _ = bench(fb, warm=3, reps=10)
            ff = 4.0 * s * s * d * hq * b * 0.5
            emit("attn", "%s/gqa-causal" % bname, seq=s, batch=b, heads=hq, kv_heads=hk, head_dim=d,
                 fwd_s=tf, fwdbwd_s=tfb, fwd_flops_per_s=ff / tf,
                 bwd_flops_per_s=2.5 * ff / (tfb - tf))
        except Exception as e:  # noqa: BLE001
            emit("attn", "%s/gqa-error" % bname, error=str(e)[:300])
    say("attn done")


def sec_grouped():
    if not hasattr(torch, "_grouped_mm"):
        emit("grouped", "missing")
        return
    shapes = [("dsv3-fc1", 4096, 7168), ("dsv3-fc2", 7168, 2048), ("qwen3-30b-fc1", 1536, 2048),
              ("qwen3-30b-fc2", 2048, 768), ("gpt-oss-fc1", 5760, 2880), ("gpt-oss-fc2", 2880, 2880)]
    for name, n, k in shapes:
        for mg in [128, 256, 512, 1024, 2048, 4096, 8192]:
            g = max(1, min(32, 32768 // mg))
            try:
                a = torch.randn(g * mg, k, device=DEV, dtype=torch.bfloat16)
                w = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
                offs = torch.arange(1, g + 1, device=DEV, dtype=torch.int32) * mg
                bt = w.transpose(-2, -1)
                t, _, _ = bench(lambda: torch._grouped_mm(a, bt, offs=offs), warm=5, reps=20)
                fl = 2.0 * g * mg * n * k
                wd = torch.randn(n, k, device=DEV, dtype=torch.bfloat16).t()
                td, _, _ = bench(lambda: torch.mm(a, wd), warm=5, reps=20)
                emit("grouped", name, m_per_group=mg, groups=g, n=n, k=k, time_s=t,
                     flops_per_s=fl / t, dense_time_s=td, dense_flops_per_s=fl / td)
                del a, w, bt, wd
            except Exception as e:  # noqa: BLE001
                emit("grouped", "%s/error" % name, m_per_group=mg, error=str(e)[:300])
    say("grouped done")


def sec_launch():
    x = torch.zeros(1, device=DEV)
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    te = (time.perf_counter() - t0) / n
    emit("launch", "eager_add_", per_op_s=te)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    kn = 1000
    with torch.cuda.graph(gr):
        for _ in range(kn):
            x.add_(1)
    gr.replay()
    torch.cuda.synchronize()
    t, _, _ = bench(gr.replay, warm=3, reps=20)
    emit("launch", "graph_add_", per_kernel_s=t / kn)
    SUMMARY.append("launch eager %.2f us/op, graph %.2f us/kernel" % (te * 1e6, t / kn * 1e6))
    say(SUMMARY[-1])


def sec_adamw():
    n = 1 << 28
    for mode in ["fused", "foreach"]:
        p = torch.nn.Parameter(torch.randn(n, device=DEV, dtype=torch.float32))
        p.grad = torch.randn(n, device=DEV, dtype=torch.float32)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=(mode == "fused"),
                                foreach=(mode == "foreach") or None)
        t, _, _ = bench(opt.step, warm=3, reps=10)
        # param r+w, grad r, exp_avg r+w, exp_avg_sq r+w: 7 x 4 bytes
        emit("adamw", mode, params=n, time_s=t, bytes=28 * n, bw_bytes_per_s=28 * n / t)
        SUMMARY.append("adamw %s %.2f ms / 2^28 params = %.0f GB/s at 28 B/param" %
                       (mode, t * 1e3, 28 * n / t / 1e9))
        del p, opt
    say("adamw done")


class Layer(torch.nn.Module):
    """A Llama 3 decoder layer as torchtitan's eager model writes it."""

    def __init__(self, h, ffn, heads, kv, hd):
        super().__init__()
        L = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk, self.wv, self.wo = L(h, heads * hd), L(h, kv * hd), L(h, kv * hd), L(heads * hd, h)
        self.w1, self.w2, self.w3 = L(h, ffn), L(ffn, h), L(h, ffn)
        self.n1 = torch.nn.Parameter(torch.ones(h))
        self.n2 = torch.nn.Parameter(torch.ones(h))
        self.heads, self.kv, self.hd = heads, kv, hd

    def forward(self, x, freqs):
        b, s, h = x.shape
        y = F.rms_norm(x, (h,), self.n1, 1e-5)
        q = self.wq(y).view(b, s, self.heads, self.hd)
        k = self.wk(y).view(b, s, self.kv, self.hd)
        v = self.wv(y).view(b, s, self.kv, self.hd)

        def rope(t):
            tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
            return torch.view_as_real(tc * freqs).flatten(3).type_as(t)
        q, k = rope(q), rope(k)
        r = self.heads // self.kv
        k = k.unsqueeze(3).expand(b, s, self.kv, r, self.hd).reshape(b, s, self.heads, self.hd)
        v = v.unsqueeze(3).expand(b, s, self.kv, r, self.hd).reshape(b, s, self.heads, self.hd)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
        y = F.rms_norm(x, (h,), self.n2, 1e-5)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


def sec_layer():
    h, ffn, heads, kv, hd = 4096, 14336, 32, 8, 128
    for s, b in [(8192, 1), (8192, 2)]:
        try:
            layer = Layer(h, ffn, heads, kv, hd).to(DEV, torch.bfloat16)
            pos = torch.arange(s, device=DEV, dtype=torch.float32)
            inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=DEV, dtype=torch.float32) / hd))
            freqs = torch.polar(torch.ones(s, hd // 2, device=DEV), torch.outer(pos, inv)).view(1, s, 1, hd // 2)
            x = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
            g = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16)
            tf, _, _ = bench(lambda: layer(x, freqs), warm=3, reps=10)

            def fb():
                layer(x, freqs).backward(g)
            tfb, _, _ = bench(fb, warm=3, reps=10)
            tok = b * s
            mm = 2.0 * tok * (h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * ffn)
            at = 4.0 * s * s * hd * heads * b * 0.5
            emit("layer", "llama3-8b/eager", seq=s, batch=b, fwd_s=tf, fwdbwd_s=tfb,
                 matmul_flops_fwd=mm, attn_flops_fwd=at,
                 model_flops_per_s=3 * (mm + at) / tfb,
                 peak_mem_bytes=torch.cuda.max_memory_allocated())
            SUMMARY.append("layer 8b s=%d b=%d fwd %.2f ms fwd+bwd %.2f ms (%.0f TFLOP/s)" %
                           (s, b, tf * 1e3, tfb * 1e3, 3 * (mm + at) / tfb / 1e12))
            say(SUMMARY[-1])
            del layer, x, g
        except Exception as e:  # noqa: BLE001
            emit("layer", "error", seq=s, batch=b, error=str(e)[:300])


def sec_sustain():
    log = os.path.join(OUT, "smi_sustain.csv")
    reason = "clocks_event_reasons.active"
    probe = smi(reason)
    if "valid" in probe.lower() or "error" in probe.lower():
        reason = "clocks_throttle_reasons.active"
    mon = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,"
                            "temperature.gpu," + reason,
                            "--format=csv", "-lms", "500"],
                           stdout=open(log, "w"), stderr=subprocess.STDOUT)
    time.sleep(2)
    n = 8192
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=DEV, dtype=torch.bfloat16)
    fa, fb8 = fp8_pair(n, n, n)
    one = torch.tensor(1.0, device=DEV)
    for kind, secs, fn in [("bf16", 30, lambda: torch.mm(a, b, out=c)),
                           ("fp8", 15, lambda: torch._scaled_mm(fa, fb8, scale_a=one, scale_b=one,
                                                                out_dtype=torch.bfloat16,
                                                                use_fast_accum=True))]:
        t_end = time.time() + secs
        w = 0
        while time.time() < t_end:
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record()
            k = 100
            for _ in range(k):
                fn()
            en.record()
            en.synchronize()
            dt = st.elapsed_time(en) / 1e3
            emit("sustain", kind, window=w, wall_s=time.time() - T0, gemms=k,
                 flops_per_s=2.0 * n ** 3 * k / dt)
            w += 1
        time.sleep(3)
    mon.terminate()
    time.sleep(0.5)
    say("sustain done")


SECTIONS = [("info", sec_info), ("hbm", sec_hbm), ("launch", sec_launch), ("mamf", sec_mamf),
            ("attn", sec_attn), ("gemm", sec_gemm), ("grouped", sec_grouped),
            ("adamw", sec_adamw), ("layer", sec_layer), ("sustain", sec_sustain)]

if __name__ == "__main__":
    budget = float(os.environ.get("BUDGET_S", "330"))
    for name, fn in SECTIONS:
        if ONLY and name not in ONLY:
            continue
        if time.time() - T0 > budget:
            emit(name, "skipped", reason="time budget")
            say("%s skipped (budget)" % name)
            continue
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            emit(name, "error", error=str(e)[:500])
            say("%s failed: %s" % (name, str(e)[:300]))
        torch.cuda.empty_cache()
    try:
        with open(os.path.join(OUT, "smi_q_end.txt"), "w") as f:
            f.write(subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE,TEMPERATURE"],
                                   capture_output=True, text=True).stdout)
    except Exception:  # noqa: BLE001
        pass
    print("\n== summary (%.0f s) ==" % (time.time() - T0))
    for line in SUMMARY:
        print(line)
