"""test-alloc-python.py -- adapter/hippo_alloc.py against stand-ins of
PyTorch and CuPy that record what it calls (no framework runs here): the
routes it installs, in the order PyTorch's and CuPy's sources take them
(docs/frameworks.md), driving the build tree's adapter on HOST.

  - torch() on PyTorch 2.8+: one MemPool per device with hippo's
    allocator, an all-threads entry each (_cuda_beginAllocateToPool),
    HIPPO_ALLOC_GRAPHS=host; an allocation on any thread reaches hippo;
    the probe tells a PyTorch that reads its newest entry first from one
    that reads the oldest (then a warning says to capture in paused());
  - paused(): the entries end and come back, empty_cache between;
  - torch() with expandable_segments:True asked: switched off, warned
    (a MemPool with an allocator refuses them at its first segment);
  - torch() on 2.7: a RuntimeError naming the pluggable route;
    torch(route="pluggable"): change_current_allocator, HIPPO_ALLOC_OOM;
  - cupy(): CuPy's current stream reaches hippo_alloc; out of memory is
    CuPy's OutOfMemoryError (CUDARuntimeError under a MemoryPool).

Each case runs in a fresh python3 (the module's state, the environment).
Environment: HIPPO_ALLOC_LIB, HIPPO_PLUGIN (make check), top_srcdir.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

TORCH_INIT = '''
import os, threading
__version__ = os.environ.get("STUB_TORCH_VERSION", "2.11.0+cu130")
log = []
from . import cuda, _C
class Tensor:
    def __init__(self, ptr, nbytes, pool):
        self.ptr, self.nbytes, self.pool = ptr, nbytes, pool
    def __del__(self):
        if self.pool is not None:
            self.pool._free(self.ptr, self.nbytes)
def empty(n, device=None):
    return cuda._allocate(4 * n)
'''
TORCH_C = '''
from . import cuda
def _cuda_beginAllocateToPool(d, pid):
    cuda._entries.append((pid, None))
    cuda.log.append(("begin", d, pid))
def _cuda_endAllocateToPool(d, pid):
    for i, e in enumerate(cuda._entries):
        if e[0] == pid:
            del cuda._entries[i]
            break
    cuda.log.append(("end", d, pid))
def _cuda_releasePool(d, pid):
    cuda.log.append(("release", d, pid))
'''
TORCH_CUDA = '''
import contextlib, ctypes, os, threading
log = []
from . import memory
_entries = []   # (pool id, thread id or None: every thread)
_newest_first = os.environ.get("STUB_TORCH_ORDER", "newest") == "newest"
def device_count():
    return 1
@contextlib.contextmanager
def device(d):
    yield
def empty_cache():
    log.append(("empty_cache",))
class MemPool:
    _next = [1]
    def __init__(self, allocator=None):
        self.id = (0, MemPool._next[0])
        MemPool._next[0] += 1
        self.allocator = allocator
        log.append(("mempool", self.id, allocator is not None))
    def _alloc(self, nbytes):
        if self.allocator is None:
            return 1 << 40
        if memory._settings["expandable_segments"]:  # alloc_block's check
            raise RuntimeError("torch.cuda.MemPool doesn't currently "
                               "support expandable_segments.")
        return self.allocator.lib.hippo_alloc(nbytes, 0, None)
    def _free(self, ptr, nbytes):
        if self.allocator is not None:
            self.allocator.lib.hippo_free(ptr, nbytes, 0, None)
@contextlib.contextmanager
def use_mem_pool(pool):
    _entries.append((pool.id, threading.get_ident()))
    try:
        yield
    finally:
        _entries.remove((pool.id, threading.get_ident()))
_pools = {}
def _pool_of(pid):
    return _pools[pid]
_orig_init = MemPool.__init__
def _init(self, allocator=None):
    _orig_init(self, allocator)
    _pools[self.id] = self
MemPool.__init__ = _init
def _allocate(nbytes):
    import torch
    order = reversed(_entries) if _newest_first else iter(_entries)
    for pid, tid in order:
        if tid is None or tid == threading.get_ident():
            pool = _pools[pid]
            ptr = pool._alloc(nbytes)
            if not ptr:
                raise RuntimeError("CUDA out of memory (stand-in)")
            return torch.Tensor(ptr, nbytes, pool)
    return torch.Tensor(1 << 41, nbytes, None)
'''
TORCH_MEMORY = '''
import ctypes, os
_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
_settings = {"expandable_segments": "expandable_segments:True" in _conf}
def _set_allocator_settings(env):
    from . import log
    log.append(("settings", env))
    for kv in env.split(","):
        k, v = kv.split(":")
        _settings[k] = v == "True"
class _Hooks:
    def __init__(self, lib):
        self.lib = lib
        self.hooks = {}
    def set_init_fn(self, f): self.hooks["init"] = f
    def set_reset_fn(self, f): self.hooks["reset"] = f
    def set_memory_fraction_fn(self, f): self.hooks["fraction"] = f
    def set_record_stream_fn(self, f): self.hooks["record_stream"] = f
class CUDAPluggableAllocator:
    def __init__(self, path, alloc, free):
        lib = ctypes.CDLL(path)
        lib.hippo_alloc.restype = ctypes.c_void_p
        lib.hippo_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_void_p]
        lib.hippo_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_int, ctypes.c_void_p]
        assert (alloc, free) == ("hippo_alloc", "hippo_free")
        self._allocator = _Hooks(lib)
def change_current_allocator(a):
    from . import log
    log.append(("change_current_allocator",))
'''
CUPY_INIT = '''
from . import cuda
'''
CUPY_CUDA = '''
import os
from . import memory, runtime
_stream = int(os.environ.get("STUB_CUPY_STREAM", "0"))
class _Stream:
    def __init__(self, ptr): self.ptr = ptr
calls = []
def get_current_stream():
    calls.append("get_current_stream")
    return _Stream(_stream)
_allocator = [None]
def set_allocator(f):
    _allocator[0] = f
def alloc(size):
    return _allocator[0](size)
class MemoryPool:
    def __init__(self, allocator):
        self.allocator = allocator
    def malloc(self, size):
        return self.allocator(size)
'''
CUPY_MEMORY = '''
class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__("Out of memory allocating %d bytes" % size)
        self.size = size
class _Pointer:
    def __init__(self, ptr, free, device):
        self.ptr, self._free, self.device = ptr, free, device
    def __del__(self):
        self._free(self.ptr, self.device)
class PythonFunctionAllocator:
    def __init__(self, malloc_func, free_func):
        self._m, self._f = malloc_func, free_func
    def malloc(self, size):
        return _Pointer(self._m(size, 0), self._f, 0)
class CFunctionAllocator:
    def __init__(self, param, malloc, free, owner):
        self.args = (param, malloc, free)
    def malloc(self, size):
        raise AssertionError("not called here")
'''
CUPY_RUNTIME = '''
errorMemoryAllocation = 2
class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        super().__init__("cudaErrorMemoryAllocation")
        self.status = status
'''

CASES = {
    # torch() on a PyTorch that reads its newest entry first
    "torch_mempool": '''
import threading, warnings, os
import torch, torch.cuda as tc, hippo_alloc as h
with warnings.catch_warnings():
    warnings.simplefilter("error")
    h.torch()
assert os.environ["HIPPO_ALLOC_GRAPHS"] == "host"
s = h._state["torch"]
assert s["newest_first"] is True, s
(pool,) = s["pools"]
assert ("begin", 0, pool.id) in tc.log, tc.log
assert h.figure("allocations") == 0, h.figure("allocations")
t = torch.empty(1024)
assert h.figure("allocations") == 1 and h.figure("bytes_in_use") == 4096
got = []
def other():
    got.append(torch.empty(256))   # autograd's threads: routed too
th = threading.Thread(target=other); th.start(); th.join()
assert h.figure("allocations") == 2, h.figure("allocations")
del t, got[:]
assert h.figure("allocations") == 0
assert h.torch() is s["allocator"]      # installed once
with h.paused():
    x = torch.empty(10)
    assert h.figure("allocations") == 0  # PyTorch's own memory meanwhile
    assert ("end", 0, pool.id) in tc.log
assert tc.log[-2:] == [("empty_cache",), ("begin", 0, pool.id)], tc.log[-3:]
y = torch.empty(10)
assert h.figure("allocations") == 1
print("ok")
''',
    # ... on one that reads the oldest first: a warning, still installed
    "torch_oldest_first": '''
import warnings, torch, torch.cuda as tc, hippo_alloc as h
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    h.torch()
assert any("paused" in str(x.message) for x in w), [str(x.message) for x in w]
assert h._state["torch"]["newest_first"] is False
t = torch.empty(8)
assert h.figure("allocations") == 1
print("ok")
''',
    # expandable_segments:True asked: switched off with a warning, else
    # PyTorch's MemPool refuses hippo's first segment
    "torch_expandable_asked": '''
import warnings, torch, torch.cuda as tc, hippo_alloc as h
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    h.torch()
assert any("expandable_segments" in str(x.message) for x in w), \\
    [str(x.message) for x in w]
assert ("settings", "expandable_segments:False") in tc.log, tc.log
t = torch.empty(1024)
assert h.figure("allocations") == 1
print("ok")
''',
    "torch_too_old": '''
import torch, hippo_alloc as h
try:
    h.torch()
    raise SystemExit("installed on 2.7")
except RuntimeError as e:
    assert "pluggable" in str(e) and "2.8" in str(e), e
try:
    h.torch(route="other")
    raise SystemExit("took route 'other'")
except ValueError as e:
    assert "mempool" in str(e)
print("ok")
''',
    "torch_pluggable": '''
import os, torch, torch.cuda as tc, hippo_alloc as h
a = h.torch(route="pluggable")
assert ("change_current_allocator",) in tc.log
assert os.environ["HIPPO_ALLOC_OOM"] == "abort"
assert set(a._allocator.hooks) == {"init", "reset", "fraction",
                                   "record_stream"}
print("ok")
''',
    # CuPy: the current stream reaches hippo_alloc; out of memory raises
    "cupy_streams": '''
import os, cupy, hippo_alloc as h
h.cupy()
p = cupy.cuda.alloc(1 << 20)
assert "get_current_stream" in cupy.cuda.calls
assert h.figure("allocations") == 1 and h.figure("streams") == 1
del p
assert h.figure("allocations") == 0
try:
    cupy.cuda.alloc(1 << 40)
    raise SystemExit("1 TiB served")
except cupy.cuda.memory.OutOfMemoryError as e:
    assert e.size == 1 << 40
assert "1099511627776" in h.last_error(), h.last_error()
print("ok")
''',
    "cupy_pool_and_stream": '''
import os, cupy, hippo_alloc as h
h.cupy(pool=True)
try:
    cupy.cuda.alloc(1 << 40)
    raise SystemExit("1 TiB served")
except cupy.cuda.runtime.CUDARuntimeError as e:
    assert e.status == cupy.cuda.runtime.errorMemoryAllocation
# a stream hippo cannot attach (not an emulated stream on HOST): refused,
# naming the very stream CuPy gave
cupy.cuda._stream = 0x1234
try:
    cupy.cuda.alloc(4096)
    raise SystemExit("served on a stream that is none")
except cupy.cuda.runtime.CUDARuntimeError:
    pass
assert "0x1234" in h.last_error(), h.last_error()
print("ok")
''',
}

ENV = {
    "torch_oldest_first": {"STUB_TORCH_ORDER": "oldest"},
    "torch_too_old": {"STUB_TORCH_VERSION": "2.7.1"},
    "torch_expandable_asked": {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))


def main():
    top = os.environ.get("top_srcdir", ".")
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        write(os.path.join(d, "torch", "__init__.py"), TORCH_INIT)
        write(os.path.join(d, "torch", "_C.py"), TORCH_C)
        write(os.path.join(d, "torch", "cuda", "__init__.py"), TORCH_CUDA)
        write(os.path.join(d, "torch", "cuda", "memory.py"), TORCH_MEMORY)
        write(os.path.join(d, "cupy", "__init__.py"), CUPY_INIT)
        write(os.path.join(d, "cupy", "cuda", "__init__.py"), CUPY_CUDA)
        write(os.path.join(d, "cupy", "cuda", "memory.py"), CUPY_MEMORY)
        write(os.path.join(d, "cupy", "cuda", "runtime.py"), CUPY_RUNTIME)
        for name, code in CASES.items():
            env = dict(os.environ)
            for v in ("HIPPO_ALLOC_GRAPHS", "HIPPO_ALLOC_OOM"):
                env.pop(v, None)
            env.update(ENV.get(name, {}))
            env.update({"PYTHONPATH": d + os.pathsep +
                        os.path.join(top, "adapter"),
                        "HIPPO_ALLOC_BACKEND": "host",
                        "HIPPO_ALLOC_CAPACITY": "256M",
                        "HIPPO_ALLOC_QUIET": "1"})
            r = subprocess.run([sys.executable, "-c", code], env=env,
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip() == "ok":
                print("PASS: %s" % name)
            else:
                failed += 1
                print("FAIL: %s (exit %d)\n%s%s" % (name, r.returncode,
                                                    r.stdout, r.stderr))
    print("%d passed, %d failed" % (len(CASES) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
