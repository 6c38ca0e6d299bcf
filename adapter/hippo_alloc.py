"""hippo as the GPU allocator of PyTorch or CuPy (hippo-alloc(3)).

    import hippo_alloc
    hippo_alloc.torch()    # before the first CUDA allocation
    hippo_alloc.cupy()     # or, for CuPy
    hippo_alloc.figure("peak_bytes_reserved")

The library is $HIPPO_ALLOC_LIB, else the one installed beside this module
(make install names it by its path), else libhippo-alloc.so on the
loader's path (pkg-config --variable=adapter hippo names the installed
one).
"""
import ctypes
import os

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


def torch():
    """Makes hippo PyTorch's CUDA allocator, with its four hooks."""
    import torch.cuda.memory as m
    a = pluggable()
    m.change_current_allocator(a)
    return a


def cupy():
    """Makes hippo CuPy's allocator (the null stream's memory)."""
    import cupy.cuda
    a = cupy.cuda.memory.CFunctionAllocator(
        0, _fn("hippo_cupy_malloc"), _fn("hippo_cupy_free"), lib)
    cupy.cuda.set_allocator(a.malloc)
    return a


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
