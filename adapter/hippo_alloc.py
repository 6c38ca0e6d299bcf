"""hippo as the GPU allocator of PyTorch or CuPy (hippo-alloc(3)).

    import hippo_alloc
    hippo_alloc.torch()    # PyTorch 2.8 or later, at any time before the
                           # memory it should serve is allocated
    hippo_alloc.cupy()     # or, for CuPy
    hippo_alloc.figure("peak_bytes_reserved")

The library is $HIPPO_ALLOC_LIB, else the one installed beside this module
(make install names it by its path), else libhippo-alloc.so on the
loader's path (pkg-config --variable=adapter hippo names the installed
one).  docs/frameworks.md says which route each function installs and
why.
"""
import contextlib
import ctypes
import os
import warnings

_DEFAULT_LIB = "libhippo-alloc.so"
_path = os.environ.get("HIPPO_ALLOC_LIB", _DEFAULT_LIB)
try:
    lib = ctypes.CDLL(_path)
except OSError as e:
    raise ImportError(
        "hippo_alloc: cannot load %s (%s); set HIPPO_ALLOC_LIB to the "
        "library's path (pkg-config --variable=adapter hippo names the "
        "installed one)" % (_path, e)) from e
lib.hippo_alloc_figure.restype = ctypes.c_uint64
lib.hippo_alloc_figure.argtypes = [ctypes.c_int, ctypes.c_char_p]
lib.hippo_alloc_last_error.restype = ctypes.c_char_p
lib.hippo_alloc.restype = ctypes.c_void_p
lib.hippo_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.hippo_free.restype = None
lib.hippo_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                           ctypes.c_void_p]
lib.hippo_alloc_reset_peak.argtypes = [ctypes.c_int]

# What torch() and cupy() installed (kept alive for the process).
_state = {}


def _fn(name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def pluggable():
    """hippo as a PyTorch CUDAPluggableAllocator with its four hooks, not
    installed (torch.cuda.MemPool(pluggable()._allocator) takes it so)."""
    import torch.cuda.memory as m
    a = m.CUDAPluggableAllocator(lib._name, "hippo_alloc", "hippo_free")
    a._allocator.set_init_fn(_fn("hippo_alloc_init"))
    a._allocator.set_reset_fn(_fn("hippo_alloc_empty_cache"))
    a._allocator.set_memory_fraction_fn(_fn("hippo_alloc_set_fraction"))
    a._allocator.set_record_stream_fn(_fn("hippo_alloc_record_stream"))
    return a


def _torch_version(t):
    parts = t.__version__.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


def _probe_newest_first(t, allocator):
    """Whether PyTorch looks at the newest pool entry first (its
    captures_underway list, read newest first since pytorch#161193): then
    a CUDA graph captured while hippo's all-threads entry is active
    allocates from the graph's own pool.  An allocation on this thread
    inside use_mem_pool(hippo's pool), pushed after an all-threads entry
    of a plain pool, reaches hippo only if the newest entry wins."""
    plain = t.cuda.MemPool()
    mine = t.cuda.MemPool(allocator)
    before = lib.hippo_alloc_figure(0, b"allocations")
    t._C._cuda_beginAllocateToPool(0, plain.id)
    try:
        with t.cuda.use_mem_pool(mine):
            x = t.empty(1, device="cuda:0")
        hit = lib.hippo_alloc_figure(0, b"allocations") > before
        del x
    finally:
        t._C._cuda_endAllocateToPool(0, plain.id)
        t._C._cuda_releasePool(0, plain.id)
    del plain, mine
    return hit


def _expandable_off(m):
    """PyTorch refuses expandable segments in a MemPool with its own
    allocator: alloc_block's TORCH_CHECK "torch.cuda.MemPool doesn't
    currently support expandable_segments" (c10/cuda/
    CUDACachingAllocator.cpp, pytorch/pytorch b944315b), at the first
    segment the pool asks for.  They are switched off at run time, as
    PyTorch's own test_cuda_expandable_segments.py switches them; hippo's
    virtual layout maps granules in their place.  A warning where the
    environment asked for them."""
    conf = ",".join(os.environ.get(v, "") for v in
                    ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
    if "expandable_segments:true" in conf.replace(" ", "").lower():
        warnings.warn(
            "hippo_alloc.torch(): expandable_segments:True switched off "
            "(PyTorch refuses it in a MemPool with its own allocator); "
            "hippo's virtual layout maps the memory instead")
    setter = getattr(m, "_set_allocator_settings", None)
    if setter is not None:
        setter("expandable_segments:False")


def torch(route="mempool"):
    """Makes hippo PyTorch's CUDA memory.

    route="mempool" (the default; PyTorch 2.8 or later): PyTorch's caching
    allocator stays and takes its segments from hippo, through one
    torch.cuda.MemPool per device that every thread's allocations go to
    (torch._C._cuda_beginAllocateToPool: autograd's backward threads
    too).  Out of memory raises torch.OutOfMemoryError, torch.cuda's
    memory statistics and set_per_process_memory_fraction work, CUDA
    graphs and torch.compile(mode="reduce-overhead") capture into their
    own pools.  hippo's devices open with HIPPO_ALLOC_GRAPHS=host (a
    graph's pool lives as long as the graph).  PyTorch's expandable
    segments are switched off (a MemPool with an allocator refuses them).

    route="pluggable": change_current_allocator(pluggable()): every tensor
    straight from hippo, but PyTorch checks no NULL (pytorch#133280), so
    out of memory stops the process with hippo's message
    (HIPPO_ALLOC_OOM=abort), and torch.cuda's memory statistics and
    reduce-overhead raise.  Before the first CUDA allocation only."""
    import torch as t
    import torch.cuda.memory as m
    if route == "pluggable":
        os.environ.setdefault("HIPPO_ALLOC_OOM", "abort")
        a = pluggable()
        m.change_current_allocator(a)
        _state["torch"] = {"route": route, "allocator": a}
        return a
    if route != "mempool":
        raise ValueError("hippo_alloc.torch: route %r is mempool or "
                         "pluggable" % (route,))
    if "torch" in _state:
        return _state["torch"]["allocator"]
    if _torch_version(t) < (2, 8):
        raise RuntimeError(
            "hippo_alloc.torch(): the MemPool route needs PyTorch 2.8 or "
            "later (here %s, whose use_mem_pool and pool entries differ); "
            "torch(route='pluggable') works there, without "
            "torch.OutOfMemoryError or memory statistics" % t.__version__)
    if lib.hippo_alloc_figure(0, b"streams") == 0:
        os.environ.setdefault("HIPPO_ALLOC_GRAPHS", "host")
    elif os.environ.get("HIPPO_ALLOC_GRAPHS") != "host":
        warnings.warn("hippo_alloc.torch(): a hippo device is open already "
                      "without HIPPO_ALLOC_GRAPHS=host: what CUDA graphs "
                      "capture from hippo stays held until hippo_alloc_close")
    _expandable_off(m)
    a = pluggable()
    pools = []
    for d in range(t.cuda.device_count()):
        with t.cuda.device(d):
            pools.append(t.cuda.MemPool(a._allocator))
    newest_first = _probe_newest_first(t, a._allocator)
    if not newest_first:
        warnings.warn(
            "hippo_alloc.torch(): this PyTorch looks at the oldest pool "
            "entry first, so a CUDA graph captured while hippo serves would "
            "allocate from hippo's pool, not its own: capture inside "
            "`with hippo_alloc.paused():`")
    for d, p in enumerate(pools):
        t._C._cuda_beginAllocateToPool(d, p.id)
    _state["torch"] = {"route": route, "allocator": a, "pools": pools,
                       "newest_first": newest_first, "active": True}
    return a


@contextlib.contextmanager
def paused():
    """Inside, PyTorch's allocations go to its own memory, not hippo's
    (what hippo serves stays valid); on leaving, torch.cuda.empty_cache()
    runs the frees PyTorch deferred while a pool entry was active (blocks
    used by other streams, record_stream) and hippo serves again.  Around
    a CUDA graph capture on a PyTorch that looks at the oldest entry
    first, and around the destruction of another MemPool."""
    import torch as t
    s = _state.get("torch")
    if not s or s["route"] != "mempool" or not s["active"]:
        yield
        return
    for d, p in enumerate(s["pools"]):
        t._C._cuda_endAllocateToPool(d, p.id)
        t._C._cuda_releasePool(d, p.id)
    s["active"] = False
    try:
        yield
    finally:
        t.cuda.empty_cache()
        for d, p in enumerate(s["pools"]):
            t._C._cuda_beginAllocateToPool(d, p.id)
        s["active"] = True


def cupy(streams=True, pool=False):
    """Makes hippo CuPy's allocator.

    streams=True (the default): each block is served on CuPy's current
    stream at its allocation (a PythonFunctionAllocator: CuPy passes no
    stream to an allocator), freed on that stream, and out of memory
    raises CuPy's OutOfMemoryError; pool=True puts a cupy MemoryPool on
    top (Python is then called only when the pool misses).
    streams=False: the C pair (hippo_cupy_malloc, hippo_cupy_free), every
    block the null stream's; CuPy checks no NULL there, so out of memory
    stops the process with hippo's message (HIPPO_ALLOC_OOM=abort)."""
    import cupy as cp
    if not streams:
        os.environ.setdefault("HIPPO_ALLOC_OOM", "abort")
        a = cp.cuda.memory.CFunctionAllocator(
            0, _fn("hippo_cupy_malloc"), _fn("hippo_cupy_free"), lib)
        cp.cuda.set_allocator(a.malloc)
        _state["cupy"] = {"allocator": a, "pool": None}
        return a

    def malloc(size, device_id):
        if size == 0:
            return 0
        stream = cp.cuda.get_current_stream().ptr
        ptr = lib.hippo_alloc(size, device_id, stream or None)
        if ptr:
            return ptr
        if pool:
            # under a cupy MemoryPool: it frees its cache and retries,
            # then raises its OutOfMemoryError
            raise cp.cuda.runtime.CUDARuntimeError(
                cp.cuda.runtime.errorMemoryAllocation)
        raise cp.cuda.memory.OutOfMemoryError(
            size, lib.hippo_alloc_figure(device_id, b"bytes_reserved"))

    def free(ptr, device_id):
        if ptr:
            lib.hippo_free(ptr, 0, device_id, None)

    a = cp.cuda.memory.PythonFunctionAllocator(malloc, free)
    mp = cp.cuda.MemoryPool(a.malloc) if pool else None
    _state["cupy"] = {"allocator": a, "pool": mp}
    cp.cuda.set_allocator(mp.malloc if mp else a.malloc)
    return mp or a


FIGURES = ("allocations", "bytes_in_use", "peak_bytes_in_use", "streams",
           "foreign_frees", "failed_allocs", "oom_retries", "bytes_reserved",
           "peak_bytes_reserved", "bytes_virtual")


def figure(name, device=0):
    """A figure of hippo-alloc(3), such as "bytes_in_use"; ValueError for
    a name that is none of FIGURES."""
    if name not in FIGURES:
        raise ValueError("hippo_alloc.figure: %r is not a figure (%s)"
                         % (name, ", ".join(FIGURES)))
    return lib.hippo_alloc_figure(device, name.encode())


def reset_peak(device=0):
    """peak_bytes_in_use starts again from bytes_in_use."""
    lib.hippo_alloc_reset_peak(device)


def last_error():
    return lib.hippo_alloc_last_error().decode()
