#!/usr/bin/env python3
"""frameworks-check.py -- hippo under PyTorch and CuPy on a real GPU
(hippo-alloc(3); tests/device-check.sh runs it).

Each case runs in a process of its own (an allocator is chosen before the
first CUDA allocation):
  torch-default  a small deterministic training loop (4 transformer
                 layers, AdamW, 50 steps, fixed seeds) on PyTorch's own
                 allocator: its losses, steps/s, max_memory_reserved
  torch-expandable  the same with expandable_segments:True: the footprint
                 hippo's is held against
  torch-hippo    the same loop after hippo_alloc.torch() (the MemPool
                 route, every thread): losses within 1e-5,
                 torch.cuda.max_memory_allocated() logged at every step
                 (PyTorch's statistics work), hippo's peak against both
  torch-pluggable  the same after hippo_alloc.torch(route="pluggable")
  torch-oom      under hippo_alloc.torch(): a batch too large raises
                 torch.OutOfMemoryError, caught, and training resumes
                 with a smaller batch
  torch-compile  torch.compile(mode="reduce-overhead") under
                 hippo_alloc.torch(): outputs equal the eager model's
  torch-graph    a CUDA graph captured and replayed in a MemPool on hippo
                 (under hippo_alloc.torch()): replays equal the eager result
  torch-ipc      a CUDA tensor on hippo's VIRTUAL memory sent to another
                 process (torch.multiprocessing): it reads the same values
  cupy-default, cupy-hippo  an array workload on two CuPy streams on
                 CuPy's allocator and after hippo_alloc.cupy() (each block
                 on CuPy's current stream): identical results
Prints one JSON line per case and a summary; exit 0 all passed, 1 one
failed, 77 no PyTorch or no GPU (nothing checked: a rehearsal stops here).
It installs hippo through the adapter's own module (adapter/hippo_alloc.py),
as a user would.  Environment: HIPPO_ALLOC_LIB (the adapter), HIPPO_PLUGIN,
DEVICE_CHECK_STEP_LIMIT (the seconds device-check.sh gives this step,
default 240): the cases keep 15 s under it, each case at most 300 s or what
is left, so the summary is printed before the step's limit; a case over its
time fails and the next one runs, a case reached with under 20 s left fails
as not run.
"""
import json
import os
import subprocess
import sys
import time

STEPS = 50
# the seconds the cases may take, all together: under device-check.sh's
# limit for this step, so that the summary is printed before it kills us
BUDGET = max(10.0,
             float(os.environ.get("DEVICE_CHECK_STEP_LIMIT", "240")) - 15)


def shipped():
    """The adapter's own Python module (adapter/hippo_alloc.py, on
    $HIPPO_ALLOC_LIB): the check drives hippo as a user would."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "adapter"))
    import hippo_alloc
    return hippo_alloc


def model_and_data(torch):
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)
    vocab, d, seq, batch = 1024, 256, 128, 16
    layer = torch.nn.TransformerEncoderLayer(d, 4, 1024, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, d),
        torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False),
        torch.nn.Linear(d, vocab)).cuda()
    g = torch.Generator(device="cpu").manual_seed(99)
    data = torch.randint(0, vocab, (STEPS, batch, seq + 1), generator=g)
    return model, data.cuda(), vocab


def one_step(torch, model, opt, batch, vocab):
    """One training step on `batch` (each row's tokens, the next token the
    target); its loss."""
    x, y = batch[:, :-1], batch[:, 1:]
    loss = torch.nn.functional.cross_entropy(
        model(x).reshape(-1, vocab), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def train(torch, log=None):
    model, data, vocab = model_and_data(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(STEPS):
        losses.append(one_step(torch, model, opt, data[step], vocab))
        if log is not None:  # what a training framework logs each step
            log.append(torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()
    return losses, STEPS / (time.perf_counter() - t0)


def oom_then_smaller(torch):
    """A batch too large raises torch.OutOfMemoryError; the loop catches
    it and goes on with a smaller one (as a user's auto-batch-size does)."""
    model, data, vocab = model_and_data(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    free, total = torch.cuda.mem_get_info()
    caught = False
    try:
        hog = torch.empty(int(total * 2), dtype=torch.uint8, device="cuda")
        del hog
    except torch.OutOfMemoryError:
        caught = True
    losses = []
    for step in range(5):
        losses.append(one_step(torch, model, opt, data[step, :8], vocab))
    return caught, losses


def _ipc_child(conn):
    t = conn.recv()
    conn.send(float(t.sum().item()))
    del t


def ipc(torch):
    """A tensor on hippo's memory (its VIRTUAL granules ask for a POSIX
    file descriptor handle, issue 40) shared with a spawned process."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    # a Pipe, not a Queue: send() pickles here and now, so a tensor that
    # cannot be shared raises in this process instead of in a Queue's
    # feeder thread while the answer is awaited (CPython 3.11
    # Lib/multiprocessing/connection.py: Connection.send is
    # _ForkingPickler.dumps; pytorch/pytorch
    # torch/multiprocessing/reductions.py, init_reductions: CUDA storages
    # and tensors registered with ForkingPickler); daemon: a child stuck
    # opening the handle does not hold this process's exit
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=_ipc_child, args=(theirs,), daemon=True)
    p.start()
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    mine.send(t)
    if not mine.poll(120):
        raise TimeoutError("torch-ipc: no answer from the other process "
                           "in 120 s (exit code %s)" % p.exitcode)
    got = mine.recv()
    p.join(60)
    return got == float(t.sum().item()), got


def case(name):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    out = {"case": name}
    if name.startswith("torch"):
        import torch
        # warn_only: an op without a deterministic kernel (attention's
        # backward may be one) warns instead of raising, so one such op
        # cannot end every torch case of a scarce GPU run; the losses are
        # then compared within 1e-5 (below), not bit for bit
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        out["torch"] = torch.__version__
        plain = name in ("torch-default", "torch-expandable")
        h = None if plain else shipped()
        if plain:
            out["losses"], out["steps_per_s"] = train(torch)
            out["peak"] = torch.cuda.max_memory_reserved()
        elif name == "torch-hippo":
            h.torch()
            log = []
            out["losses"], out["steps_per_s"] = train(torch, log)
            out["max_allocated_per_step"] = log
            out["torch_max_reserved"] = torch.cuda.max_memory_reserved()
        elif name == "torch-pluggable":
            h.torch(route="pluggable")
            out["losses"], out["steps_per_s"] = train(torch)
        elif name == "torch-oom":
            h.torch()
            out["caught"], out["losses"] = oom_then_smaller(torch)
        elif name == "torch-compile":
            h.torch()
            model, data, vocab = model_and_data(torch)
            x = data[0, :, :-1].clone()
            with torch.no_grad():
                eager = model(x).clone()
                compiled = torch.compile(model, mode="reduce-overhead")
                same = True
                for _ in range(4):
                    y = compiled(x)
                    torch.cuda.synchronize()
                    same = same and bool(torch.allclose(y, eager, rtol=1e-4,
                                                        atol=1e-4))
            out["outputs_equal"] = same
        elif name == "torch-ipc":
            h.torch()
            out["same"], out["child_sum"] = ipc(torch)
        else:  # torch-graph
            h.torch()
            pool = torch.cuda.MemPool(h.pluggable()._allocator)
            model, data, vocab = model_and_data(torch)
            x = data[0, :, :-1].clone()
            with torch.no_grad():
                eager = model(x).clone()
                # warm-up on the stream that captures, in the pool: its
                # segments are hippo's, mapped before the capture (hippo
                # maps nothing while a stream captures), and the capture
                # reuses them
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s), torch.cuda.use_mem_pool(pool):
                    for _ in range(3):
                        model(x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool.id, stream=s):
                    static = model(x)
                same = True
                for _ in range(3):
                    g.replay()
                    torch.cuda.synchronize()
                    same = same and bool(torch.equal(static, eager))
            out["replays_equal"] = same
            del g, static
        if h is not None:
            out["peak"] = h.figure("peak_bytes_reserved")
            out["peak_live"] = h.figure("peak_bytes_in_use")
            out["failed"] = h.figure("failed_allocs")
            out["foreign"] = h.figure("foreign_frees")
            out["last_error"] = h.last_error()
    else:
        import cupy
        out["cupy"] = cupy.__version__
        if name == "cupy-hippo":
            h = shipped()
            h.cupy()
        # two non-blocking streams, each allocating and freeing its own
        # temporaries while the other runs: a block freed on one and
        # reused on the other must wait for the first's work
        rs = cupy.random.RandomState(7)
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
        accs = []
        for k, st in enumerate(streams):
            with st:
                accs.append(cupy.zeros((512, 512), dtype=cupy.float64))
        for i in range(40):
            for k, st in enumerate(streams):
                with st:
                    m = rs.standard_normal((512, 512)) + k
                    accs[k] += (m @ m.T) / (i + 1)
                    del m
        for st in streams:
            st.synchronize()
        acc = accs[0] + accs[1]
        out["checksum"] = float(cupy.asnumpy(acc).sum())
        out["digest"] = cupy.asnumpy(acc).tobytes().hex()[:64]
        if name == "cupy-hippo":
            out["peak"] = h.figure("peak_bytes_reserved")
            out["foreign"] = h.figure("foreign_frees")
    print(json.dumps(out))


def smoke():
    """The adapter, through its module, on the runtime hippo finds (a
    stand-in in a rehearsal), in a process of its own: 1 MiB in and out."""
    import ctypes
    h = shipped()
    h.lib.hippo_alloc.restype = ctypes.c_void_p
    h.lib.hippo_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int,
                                  ctypes.c_void_p]
    h.lib.hippo_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_int, ctypes.c_void_p]
    p = h.lib.hippo_alloc(1 << 20, 0, None)
    n = h.figure("allocations")
    h.lib.hippo_free(p, 0, 0, None)
    ok = p and n == 1 and h.figure("allocations") == 0
    print("adapter: 1 MiB at %#x, allocations 1 then 0" % p if ok else
          "adapter: FAILED: " + h.last_error())
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--smoke"]:
        return smoke()
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        case(sys.argv[2])
        return 0
    deadline = time.monotonic() + BUDGET
    try:
        p = subprocess.run([sys.executable, __file__, "--smoke"],
                           capture_output=True, text=True,
                           timeout=min(120, BUDGET))
    except subprocess.TimeoutExpired:
        print("frameworks-check: the adapter's smoke test ran past its "
              "limit")
        return 1
    print((p.stdout + p.stderr).strip())
    if p.returncode != 0:
        return 1
    try:
        import torch
    except ImportError as e:
        print(f"frameworks-check: no PyTorch ({e}): nothing checked")
        return 77
    if not torch.cuda.is_available():
        print("frameworks-check: PyTorch sees no GPU: nothing checked")
        return 77
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name(0)}")
    res, bad = {}, []
    cases = ["torch-default", "torch-expandable", "torch-hippo",
             "torch-pluggable", "torch-oom", "torch-compile", "torch-graph",
             "torch-ipc", "cupy-default", "cupy-hippo"]
    for name in cases:
        env = dict(os.environ)
        if name == "torch-expandable":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        left = deadline - time.monotonic()
        if left < 20:
            print(f"{name}: FAILED (not run: {BUDGET:.0f} s spent)")
            bad.append(name)
            continue
        try:
            p = subprocess.run([sys.executable, __file__, "--case", name],
                               capture_output=True, text=True,
                               timeout=min(300, left), env=env)
        except subprocess.TimeoutExpired as e:
            # run() killed the case; what it printed so far is here as
            # bytes even with text=True (CPython 3.11 Lib/subprocess.py,
            # run and TimeoutExpired)
            out = e.stderr or e.stdout or ""
            if isinstance(out, bytes):
                out = out.decode(errors="replace")
            tail = out.strip().splitlines()[-6:]
            print(f"{name}: FAILED (over its {min(300, left):.0f} s)\n  " +
                  "\n  ".join(tail))
            bad.append(name)
            continue
        line = (p.stdout.strip().splitlines() or [""])[-1]
        if p.returncode != 0 or not line.startswith("{"):
            tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
            print(f"{name}: FAILED (exit {p.returncode})\n  " +
                  "\n  ".join(tail))
            if name.startswith("cupy") and "No module named" in p.stderr:
                print(f"{name}: no CuPy, left out")
                continue
            bad.append(name)
            continue
        res[name] = json.loads(line)
        print(line)
    d = res.get("torch-default")
    x = res.get("torch-expandable")
    for name in ("torch-hippo", "torch-pluggable"):
        r = res.get(name)
        if d and r:
            same = len(r["losses"]) == len(d["losses"]) and all(
                abs(a - b) <= 1e-5 * max(1.0, abs(b))
                for a, b in zip(r["losses"], d["losses"]))
            vs_x = (f", {r['peak'] / x['peak']:.3f} x expandable_segments' "
                    f"{x['peak']} B" if x else "")
            print(f"{name}: losses {'the same' if same else 'DIFFER'}; peak "
                  f"{r['peak']} B = {r['peak'] / d['peak']:.3f} x the "
                  f"default's max_memory_reserved {d['peak']} B{vs_x} (peak "
                  f"live {r['peak_live']} B); {r['steps_per_s']:.1f} steps/s "
                  f"against {d['steps_per_s']:.1f}")
            if not same or r["foreign"]:
                bad.append(name)
    r = res.get("torch-hippo")
    if r:
        logged = r.get("max_allocated_per_step", [])
        ok = len(logged) == STEPS and all(v > 0 for v in logged)
        print(f"torch-hippo: max_memory_allocated logged at {len(logged)} "
              f"steps{'' if ok else ' (MISSING)'}; PyTorch's "
              f"max_memory_reserved {r['torch_max_reserved']} B")
        if not ok:
            bad.append("torch-hippo statistics")
    o = res.get("torch-oom")
    if o:
        ok = o["caught"] and len(o["losses"]) == 5
        print(f"torch-oom: torch.OutOfMemoryError "
              f"{'caught, 5 steps after' if ok else 'NOT caught'}")
        if not ok:
            bad.append("torch-oom")
    # the cases whose result is one yes or no
    for name, key, text, yes, no in (
            ("torch-ipc", "same", "the other process read {}",
             "the same values", "OTHER values"),
            ("torch-compile", "outputs_equal", "reduce-overhead outputs {}",
             "equal", "DIFFER"),
            ("torch-graph", "replays_equal", "replays {} the eager result",
             "equal", "DIFFER")):
        r = res.get(name)
        if r:
            print(f"{name}: " + text.format(yes if r[key] else no))
            if not r[key]:
                bad.append(name)
    c, h = res.get("cupy-default"), res.get("cupy-hippo")
    if c and h:
        same = c["digest"] == h["digest"] and c["checksum"] == h["checksum"]
        print(f"cupy-hippo: results {'identical' if same else 'DIFFER'}")
        if not same or h["foreign"]:
            bad.append("cupy-hippo")
    print("frameworks-check: " + ("all passed" if not bad else
                                  "FAILED: " + ", ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
