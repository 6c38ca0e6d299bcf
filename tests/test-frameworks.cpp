// test-frameworks.cpp -- libhippo-alloc driven the way the frameworks
// drive it, in C++ as they are written (issue 39): the adapter's functions
// held in std::functions of PyTorch's and CuPy's exact types and called in
// their order.
//
//  - PyTorch (torch/csrc/cuda/CUDAPluggableAllocator.cpp, the MemPool route
//    of hippo_alloc.torch(); c10/cuda/CUDACachingAllocator.cpp): init with
//    the device count; malloc(size, device, stream) on the current stream,
//    the metadata kept by pointer (even a NULL one, as PyTorch does);
//    raw_delete with the size, device and stream recorded at malloc;
//    allocPrimitive's NULL as cudaErrorMemoryAllocation, raised as an
//    out-of-memory exception; segments rounded as the caching allocator
//    asks for them (2 MiB up to 1 MiB, 20 MiB below 10 MiB, else whole
//    2 MiB); record_stream; empty_cache.
//  - CuPy (cupy/cuda/memory.pyx, CFunctionAllocator): malloc(param, size,
//    device), free(param, ptr, device).
//
// What must hold, on HOST and on both stand-in runtimes (suite-gpu.sh,
// HIPPO_TEST_BACKEND=hip): three streams through three training steps with
// every live segment's bytes intact and the adapter's figures exact; out
// of memory reaching the caller as the exception with every live segment
// intact, and the step going on with a smaller batch; segments a capture
// allocated (after a warm-up) given back once the graph's pool frees them
// (HIPPO_ALLOC_GRAPHS=host); CuPy's pair.  Exits 0, 1, or 77 (no
// HIPPO_ALLOC_LIB).
#include <dlfcn.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "hippo-alloc.h"

namespace {

const size_t MiB = size_t(1) << 20;
int failures = 0;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      failures++;                                                              \
    }                                                                          \
  } while (0)

// The adapter, found by name as both frameworks find it.
struct Adapter {
  void *lib = nullptr;
  template <class F> F *get(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
      std::fprintf(stderr, "the adapter has no %s\n", name);
      std::exit(1);
    }
    return reinterpret_cast<F *>(p);
  }
};

using cudaStream_t = void *; // CUstream_st * / hipStream_t, opaque here

// PyTorch's out-of-memory error, as allocPrimitive's NULL becomes one.
struct OutOfMemoryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CUDAPluggableAllocator as PyTorch holds it (its members' types).
struct Pluggable {
  std::function<void *(size_t, int, cudaStream_t)> alloc_fn_;
  std::function<void(void *, size_t, int, cudaStream_t)> free_fn_;
  std::function<void(int)> init_fn_;
  std::function<void()> reset_fn_;
  std::function<void(void *ptr, cudaStream_t stream)> record_stream_fn_;
  struct Meta {
    size_t size;
    int device;
    cudaStream_t stream;
  };
  std::mutex m_;
  std::unordered_map<void *, Meta> meta_;

  void *malloc(size_t size, int device, cudaStream_t stream) {
    void *r = alloc_fn_(size, device, stream);
    std::lock_guard<std::mutex> g(m_);
    meta_.emplace(r, Meta{size, device, stream}); // NULL too, as PyTorch
    return r;
  }
  void raw_delete(void *ptr) {
    Meta md;
    {
      std::lock_guard<std::mutex> g(m_);
      auto it = meta_.find(ptr);
      if (it == meta_.end())
        throw std::logic_error("Trying to free a pointer not allocated here");
      md = it->second;
      meta_.erase(it);
    }
    free_fn_(ptr, md.size, md.device, md.stream);
  }
};

// The caching allocator's segment sizes (kSmallBuffer, kLargeBuffer,
// kMinLargeAlloc, kRoundLarge).
size_t segment_size(size_t request) {
  if (request <= MiB)
    return 2 * MiB;
  if (request < 10 * MiB)
    return 20 * MiB;
  return (request + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
}

// allocPrimitive: the pool's allocator's raw_alloc on the current stream;
// NULL is cudaErrorMemoryAllocation, which malloc raises as out of memory.
void *segment(Pluggable &p, size_t request, cudaStream_t stream) {
  size_t size = segment_size(request);
  void *ptr = p.malloc(size, 0, stream);
  if (!ptr)
    throw OutOfMemoryError("CUDA out of memory. Tried to allocate " +
                           std::to_string(size) + " bytes");
  return ptr;
}

// A live segment and the bytes written at both ends.
struct Seg {
  void *ptr;
  size_t size;
  cudaStream_t stream;
  uint64_t seed;
};

struct Env {
  const hippo_api *api = nullptr;
  hippo_device *dev = nullptr;
  const hippo_emu_api *emu = nullptr;
  bool bytes = true; // DRY has none
};

void pattern(const Env &e, const Seg &s) {
  uint64_t w[8];
  for (int k = 0; k < 8; k++)
    w[k] = s.seed * 0x9E3779B97F4A7C15ull + k;
  char *p = static_cast<char *>(s.ptr);
  EXPECT(e.emu->write(e.dev, p, w, sizeof w) == HIPPO_SUCCESS, "%s",
         e.api->last_error());
  EXPECT(e.emu->write(e.dev, p + s.size - sizeof w, w, sizeof w) ==
             HIPPO_SUCCESS,
         "%s", e.api->last_error());
}

void verify(const Env &e, const Seg &s) {
  uint64_t w[8], r[8];
  for (int k = 0; k < 8; k++)
    w[k] = s.seed * 0x9E3779B97F4A7C15ull + k;
  char *p = static_cast<char *>(s.ptr);
  EXPECT(e.emu->read(e.dev, p, r, sizeof r) == HIPPO_SUCCESS &&
             !std::memcmp(r, w, sizeof w),
         "segment %p (%zu B): its first bytes changed", s.ptr, s.size);
  EXPECT(e.emu->read(e.dev, p + s.size - sizeof w, r, sizeof r) ==
                 HIPPO_SUCCESS &&
             !std::memcmp(r, w, sizeof w),
         "segment %p (%zu B): its last bytes changed", s.ptr, s.size);
}

uint64_t live_bytes(const std::vector<Seg> &live) {
  uint64_t n = 0;
  for (const Seg &s : live)
    n += s.size;
  return n;
}

} // namespace

int main() {
  const char *path = std::getenv("HIPPO_ALLOC_LIB");
  const char *backend = std::getenv("HIPPO_TEST_BACKEND");
  bool hip = backend && !std::strcmp(backend, "hip");
  if (!path) {
    std::printf("SKIP: test-frameworks: HIPPO_ALLOC_LIB is not set\n");
    return 77;
  }
  setenv("HIPPO_ALLOC_BACKEND", hip ? "hip" : "host", 1);
  setenv("HIPPO_ALLOC_QUIET", "1", 1);
  setenv("HIPPO_ALLOC_GRAPHS", "host", 1); // the MemPool route's
  if (!hip)
    setenv("HIPPO_ALLOC_CAPACITY", "512M", 1);
  Adapter a;
  a.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!a.lib) {
    std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  auto figure = a.get<uint64_t(int, const char *)>("hippo_alloc_figure");
  auto last_error = a.get<const char *()>("hippo_alloc_last_error");
  auto device = a.get<hippo_status(int, const hippo_api **, hippo_device **)>(
      "hippo_alloc_device");
  auto close_all = a.get<uint64_t()>("hippo_alloc_close");

  // ---- PyTorch: the pluggable allocator's members, set as Python sets
  // them (set_init_fn, set_reset_fn, set_record_stream_fn) ----
  Pluggable torch;
  torch.alloc_fn_ = a.get<void *(size_t, int, void *)>("hippo_alloc");
  torch.free_fn_ = a.get<void(void *, size_t, int, void *)>("hippo_free");
  torch.init_fn_ = a.get<void(int)>("hippo_alloc_init");
  torch.reset_fn_ = a.get<void()>("hippo_alloc_empty_cache");
  torch.record_stream_fn_ =
      a.get<void(void *, void *)>("hippo_alloc_record_stream");
  torch.init_fn_(1); // createCustomAllocator: init(device_count)

  Env e;
  if (device(0, &e.api, &e.dev) != HIPPO_SUCCESS) {
    std::fprintf(stderr, "device 0: %s\n", last_error());
    return 1;
  }
  e.api->emulation(&e.emu);
  cudaStream_t streams[3];
  for (auto &s : streams)
    if (e.emu->stream_create(e.dev, &s) != HIPPO_SUCCESS) {
      std::fprintf(stderr, "stream_create: %s\n", e.api->last_error());
      return 1;
    }

  // Three training steps on three streams: each step allocates its
  // activations (segments of mixed sizes) across the streams, hands one
  // to another stream (record_stream), and frees them in reverse; the
  // weights (step 1's first four) stay.
  std::vector<Seg> live;
  uint64_t seed = 1, peak = 0;
  for (int step = 0; step < 3; step++) {
    size_t mark = live.size();
    for (int k = 0; k < 24; k++) {
      static const size_t req[] = {4096, 700 * 1024, 3 * MiB, 12 * MiB + 5,
                                   33 * MiB};
      cudaStream_t st = streams[k % 3];
      Seg s{segment(torch, req[k % 5], st), segment_size(req[k % 5]), st,
            seed++};
      pattern(e, s);
      live.push_back(s);
    }
    if (live_bytes(live) > peak)
      peak = live_bytes(live);
    EXPECT(figure(0, "bytes_in_use") == live_bytes(live),
           "step %d: bytes_in_use %" PRIu64 ", live %" PRIu64, step,
           figure(0, "bytes_in_use"), live_bytes(live));
    EXPECT(figure(0, "allocations") == live.size(), "step %d", step);
    torch.record_stream_fn_(live.back().ptr, streams[0]);
    size_t keep = step == 0 ? mark + 4 : mark;
    while (live.size() > keep) {
      verify(e, live.back());
      torch.raw_delete(live.back().ptr);
      live.pop_back();
    }
  }
  EXPECT(figure(0, "peak_bytes_in_use") == peak,
         "peak_bytes_in_use %" PRIu64 ", the segments' peak %" PRIu64,
         figure(0, "peak_bytes_in_use"), peak);
  EXPECT(figure(0, "streams") >= 3, "%" PRIu64 " streams",
         figure(0, "streams"));

  // Out of memory: a batch too large for the device reaches the caller as
  // PyTorch's exception, every live segment intact; a smaller batch then
  // goes on.
  {
    std::vector<Seg> batch;
    bool oom = false;
    size_t chunk = hip ? 256 * MiB : 64 * MiB;
    try {
      for (int k = 0; k < 4096; k++) {
        Seg s{segment(torch, chunk, streams[k % 3]), chunk, streams[k % 3],
              seed++};
        pattern(e, s);
        batch.push_back(s);
      }
    } catch (const OutOfMemoryError &) {
      oom = true;
    }
    EXPECT(oom, "no out of memory after %zu segments of %zu B", batch.size(),
           chunk);
    EXPECT(std::strlen(last_error()) > 0, "no reason given");
    for (const Seg &s : live)
      verify(e, s);
    for (const Seg &s : batch)
      verify(e, s);
    // the NULL's metadata stays in PyTorch's map (as there); drop it
    torch.meta_.erase(nullptr);
    size_t half = batch.size() / 2;
    while (batch.size() > half) {
      torch.raw_delete(batch.back().ptr);
      batch.pop_back();
    }
    try {
      Seg s{segment(torch, chunk / 2, streams[0]), chunk / 2, streams[0],
            seed++};
      pattern(e, s);
      verify(e, s);
      batch.push_back(s);
    } catch (const OutOfMemoryError &x) {
      EXPECT(false, "a smaller batch after freeing half: %s", x.what());
    }
    EXPECT(figure(0, "bytes_in_use") == live_bytes(live) + live_bytes(batch),
           "after the out of memory");
    for (const Seg &s : batch)
      torch.raw_delete(s.ptr);
  }

  // A graph: a warm-up maps on the capture stream, then the capture
  // allocates and frees segments of the graph's pool; the graph goes, its
  // pool frees them, and empty_cache gives every byte back.
  {
    cudaStream_t cs = streams[1];
    void *warm = segment(torch, 12 * MiB, cs);
    torch.raw_delete(warm);
    uint64_t id = 0;
    EXPECT(e.emu->capture_begin(e.dev, cs, &id) == HIPPO_SUCCESS, "%s",
           e.api->last_error());
    std::vector<Seg> graph;
    for (int k = 0; k < 3; k++) {
      try {
        Seg s{segment(torch, 2 * MiB + 1, cs), segment_size(2 * MiB + 1), cs,
              seed++};
        graph.push_back(s);
      } catch (const OutOfMemoryError &x) {
        EXPECT(false, "inside the capture: %s", x.what());
      }
    }
    EXPECT(e.emu->capture_end(e.dev, cs) == HIPPO_SUCCESS, "%s",
           e.api->last_error());
    for (const Seg &s : graph)
      torch.raw_delete(s.ptr);
    for (const Seg &s : live)
      torch.raw_delete(s.ptr);
    live.clear();
    torch.reset_fn_(); // empty_cache
    hippo_usage u{};
    u.struct_size = sizeof u;
    EXPECT(e.api->usage(e.dev, nullptr, &u) == HIPPO_SUCCESS, "usage");
    EXPECT(u.bytes_guarded == 0 && u.bytes_reserved == 0,
           "after the graph went: %" PRIu64 " B guarded, %" PRIu64
           " B reserved",
           u.bytes_guarded, u.bytes_reserved);
  }

  // ---- CuPy's pair, as CFunctionAllocator types it ----
  {
    std::function<void *(void *, size_t, int)> malloc_func =
        a.get<void *(void *, size_t, int)>("hippo_cupy_malloc");
    std::function<void(void *, void *, int)> free_func =
        a.get<void(void *, void *, int)>("hippo_cupy_free");
    Seg s{malloc_func(nullptr, 5 * MiB + 3, 0), 5 * MiB + 3, nullptr, seed++};
    EXPECT(s.ptr != nullptr, "%s", last_error());
    if (s.ptr) {
      pattern(e, s);
      verify(e, s);
      EXPECT(figure(0, "bytes_in_use") == s.size, "CuPy's block");
      free_func(nullptr, s.ptr, 0);
    }
    EXPECT(figure(0, "allocations") == 0, "everything freed");
  }

  EXPECT(e.api->check(e.dev) == HIPPO_SUCCESS, "%s", e.api->last_error());
  for (auto &s : streams) {
    (void)s; // the adapter attached them: closed with its devices
  }
  EXPECT(close_all() == 0, "blocks still live at the end");
  std::printf("%s: test-frameworks (%s)\n", failures ? "FAIL" : "PASS",
              hip ? "hip" : "host");
  return failures ? 1 : 0;
}
