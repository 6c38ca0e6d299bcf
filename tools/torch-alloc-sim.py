#!/usr/bin/env python3
"""torch-alloc-sim.py -- PyTorch's CUDA caching allocator, simulated.

    python3 tools/torch-alloc-sim.py [--mode segments|expandable]
        [--segments-out SEG.csv] [--json FILE] [--max-split-size BYTES]
        [--device-memory BYTES] [--check] [--quiet] TRACE.csv

Reads a hippo trace (`op,id,size,stream`: `a,ID,SIZE,STREAM` reserves,
`f,ID[,SIZE[,STREAM]]` releases ID on the stream that reserved it;
traces/README.md) and replays it through a model of PyTorch's
DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp), the allocator
under every torch.cuda tensor.  It prints the peaks PyTorch's own
statistics would show: reserved bytes (torch.cuda.max_memory_reserved),
allocated bytes (torch.cuda.max_memory_allocated: live blocks at their
rounded, perhaps unsplit, size), requested bytes (the trace's raw sizes),
and reserved / requested.  Simulated, not measured: no GPU is used.

Modes (PYTORCH_CUDA_ALLOC_CONF):

  segments    the default allocator, and the MemPool route's: every new
              segment is one cudaMalloc (or, in a torch.cuda.MemPool with
              an allocator, one call of that allocator).  --segments-out
              writes those segment requests as a hippo trace
              (`a,SEG,SIZE,STREAM` in order; no frees: without
              torch.cuda.empty_cache() PyTorch never gives one back).
  expandable  expandable_segments:True: one growing segment per stream and
              pool, mapped in pages of 2 MiB (small pool) or 20 MiB (large
              pool); reserved bytes are the mapped pages.

The rules modelled, by PyTorch's function names (read at pytorch/pytorch
commit b944315b93d36f842ef94d67a041371993234a74; the same rules at the
older stored revision 001074d25084fdb87a799823e395a50f5ec044d3):

  round_size            a request rounds up to a multiple of 512 B, at
                        least 512 B (roundup_power2_divisions unset).
  get_pool              rounded size <= 1 MiB: the small pool, else the
                        large pool.
  get_allocation_size   a new segment for a small request is 2 MiB; for a
                        request under 10 MiB, 20 MiB; else the request
                        rounded up to 2 MiB.
  get_free_block        best fit in the pool's free blocks ordered by
                        (stream, size, address): the smallest free block
                        of the request's stream at least as large, the
                        lowest address among equal sizes; a block freed on
                        one stream is never taken by another.  With
                        max_split_size set, a request under it takes no
                        block at or over it, and a request at or over it
                        takes no block max_non_split_rounding_size (20 MiB)
                        or more larger.  Expandable: a free block whose
                        next neighbour is unmapped counts as its size plus
                        that unmapped room, so a larger fitting block
                        elsewhere is taken first.
  should_split          small pool, or expandable segments: split when
                        at least 512 B remain; large pool: split when more
                        than 1 MiB remains (and the request is under
                        max_split_size); an unsplit block is allocated
                        whole.
  free_block /          a freed block merges with free neighbours of its
  try_merge_blocks      segment (mapped with mapped only).
  alloc_block           no block fits: a new segment of
                        get_allocation_size bytes (segments), or
                        try_allocate_expandable_block (expandable).
  find_expandable_block the lowest-addressed unmapped range of the stream's
                        segment in that pool, starting at the free block
                        before it when there is one; a new segment
                        (address space for 9/8 of --device-memory) only
                        when none has room.
  map_block             maps the pages covering what is still missing
                        after that free block, and merges them into it.

Not modelled: torch.cuda.empty_cache(), the out-of-memory path (release of
cached blocks and retry; unmapping free pages), garbage_collection_threshold,
roundup_power2_divisions, record_stream (a block is reused as soon as the
trace frees it, whatever stream the free line names), CUDA graph pools.
Segment addresses are not cudaMalloc's: new segments take increasing
addresses, which only decides ties between free blocks of equal size.

Exit status: 0 simulated, 1 bad trace or output file, 2 bad usage.
"""

import argparse
import bisect
import json
import sys

PYTORCH_COMMIT = "b944315b93d36f842ef94d67a041371993234a74"
PYTORCH_SOURCE = ("pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp at "
                  + PYTORCH_COMMIT)

MIB = 1 << 20
K_MIN_BLOCK_SIZE = 512           # kMinBlockSize
K_SMALL_SIZE = MIB               # kSmallSize
K_SMALL_BUFFER = 2 * MIB         # kSmallBuffer
K_LARGE_BUFFER = 20 * MIB        # kLargeBuffer
K_MIN_LARGE_ALLOC = 10 * MIB     # kMinLargeAlloc
K_ROUND_LARGE = 2 * MIB          # kRoundLarge
UNLIMITED = float("inf")         # max_split_size's default (SIZE_MAX)

HEADER = "op,id,size,stream"
MAX_STREAM = 1023


class TraceError(Exception):
    """The trace cannot be replayed; the message names the line."""


class Block:
    """A block of a segment, as PyTorch's struct Block."""
    __slots__ = ("stream", "size", "ptr", "allocated", "mapped", "prev",
                 "next", "pool", "es", "requested")

    def __init__(self, stream, size, pool, ptr):
        self.stream = stream
        self.size = size
        self.ptr = ptr
        self.allocated = False
        self.mapped = True
        self.prev = None
        self.next = None
        self.pool = pool
        self.es = None          # the ExpandableSegment, or None
        self.requested = 0

    def is_split(self):
        return self.prev is not None or self.next is not None


class BlockPool:
    """Free blocks of one size class: `blocks` ordered as
    BlockComparatorSize (stream, size, address), `unmapped` as
    BlockComparatorAddress (stream, address)."""

    def __init__(self, is_small):
        self.is_small = is_small
        self.keys = []          # sorted (stream, size, ptr)
        self.by_key = {}
        self.ukeys = []         # sorted (stream, ptr) of unmapped blocks
        self.by_ukey = {}

    def insert(self, b):
        k = (b.stream, b.size, b.ptr)
        assert k not in self.by_key
        bisect.insort(self.keys, k)
        self.by_key[k] = b

    def erase(self, b):
        k = (b.stream, b.size, b.ptr)
        i = bisect.bisect_left(self.keys, k)
        assert i < len(self.keys) and self.keys[i] == k
        del self.keys[i]
        del self.by_key[k]

    def insert_unmapped(self, b):
        k = (b.stream, b.ptr)
        bisect.insort(self.ukeys, k)
        self.by_ukey[k] = b

    def erase_unmapped(self, b):
        k = (b.stream, b.ptr)
        i = bisect.bisect_left(self.ukeys, k)
        assert i < len(self.ukeys) and self.ukeys[i] == k
        del self.ukeys[i]
        del self.by_ukey[k]


class ExpandableSegment:
    """The address range of one expandable segment: `size` bytes from
    `base`, mapped in pages of `page` bytes."""

    def __init__(self, base, page, device_memory):
        self.base = base
        self.page = page
        # max_handles_ = numSegments(totalGlobalMem + totalGlobalMem / 8)
        total = device_memory + device_memory // 8
        self.size = (total + page - 1) // page * page


class Stat:
    """A PyTorch Stat: current and peak."""
    __slots__ = ("current", "peak")

    def __init__(self):
        self.current = 0
        self.peak = 0

    def increase(self, n):
        self.current += n
        if self.current > self.peak:
            self.peak = self.current

    def decrease(self, n):
        self.current -= n
        assert self.current >= 0


class Allocator:
    """One device's DeviceCachingAllocator, without its out-of-memory path."""

    def __init__(self, expandable, max_split_size=UNLIMITED,
                 max_non_split_rounding=K_LARGE_BUFFER,
                 device_memory=80 << 30, segments_out=None):
        self.expandable = expandable
        self.max_split_size = max_split_size
        self.max_non_split_rounding = max_non_split_rounding
        self.device_memory = device_memory
        self.small = BlockPool(True)
        self.large = BlockPool(False)
        self.reserved = Stat()
        self.allocated = Stat()
        self.requested = Stat()
        self.next_addr = 1 << 40      # where the next segment is placed
        self.segments = 0             # cudaMalloc calls / expandable segments
        self.maps = 0                 # map_block calls
        self.segments_out = segments_out
        self.segment_sizes = {}       # base address -> bytes (both modes)

    # -- sizes ---------------------------------------------------------------

    @staticmethod
    def round_size(size):
        if size < K_MIN_BLOCK_SIZE:
            return K_MIN_BLOCK_SIZE
        return K_MIN_BLOCK_SIZE * ((size + K_MIN_BLOCK_SIZE - 1)
                                   // K_MIN_BLOCK_SIZE)

    @staticmethod
    def get_allocation_size(size):
        if size <= K_SMALL_SIZE:
            return K_SMALL_BUFFER
        if size < K_MIN_LARGE_ALLOC:
            return K_LARGE_BUFFER
        return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE)

    def get_pool(self, size):
        return self.small if size <= K_SMALL_SIZE else self.large

    def should_split(self, block, size):
        remaining = block.size - size
        if block.pool.is_small or self.expandable:
            return remaining >= K_MIN_BLOCK_SIZE
        return size < self.max_split_size and remaining > K_SMALL_SIZE

    def _place(self, nbytes, align):
        addr = (self.next_addr + align - 1) // align * align
        self.next_addr = addr + nbytes
        return addr

    # -- finding a block -----------------------------------------------------

    def get_free_block(self, pool, stream, size):
        keys = pool.keys
        i = bisect.bisect_left(keys, (stream, size, 0))
        if i == len(keys) or keys[i][0] != stream:
            return None
        b = pool.by_key[keys[i]]
        if b.es is not None:
            # expandable_segments() is true here: every block is expandable.
            def expandable_size(x):
                n = x.next
                return x.size + (n.size if n is not None and not n.mapped
                                 else 0)
            j = i + 1
            while (b.es is not None and j < len(keys)
                   and keys[j][0] == stream):
                nb = pool.by_key[keys[j]]
                if not expandable_size(nb) < expandable_size(b):
                    break
                i, b = j, nb
                j += 1
        mss = self.max_split_size
        if size < mss and b.size >= mss:
            return None
        if size >= mss and b.size >= size + self.max_non_split_rounding:
            return None
        pool.erase(b)
        return b

    def alloc_block(self, pool, stream, size, alloc_size):
        if self.expandable:
            return self.try_allocate_expandable_block(pool, stream, size)
        self.segments += 1
        ptr = self._place(alloc_size, K_SMALL_BUFFER)
        b = Block(stream, alloc_size, pool, ptr)
        self.segment_sizes[ptr] = alloc_size
        self.reserved.increase(alloc_size)
        if self.segments_out is not None:
            self.segments_out.write("a,%d,%d,%d\n"
                                    % (self.segments, alloc_size, stream))
        return b

    # -- expandable segments -------------------------------------------------

    @staticmethod
    def _allocatable(b):
        return b is not None and not b.allocated

    def find_expandable_block(self, pool, stream, size):
        def has_available_address_space(b):
            n = 0
            while n < size and self._allocatable(b):
                n += b.size
                b = b.next
            return n >= size

        ukeys = pool.ukeys
        i = bisect.bisect_left(ukeys, (stream, 0))
        while i < len(ukeys) and ukeys[i][0] == stream:
            c = pool.by_ukey[ukeys[i]]
            if self._allocatable(c.prev):
                c = c.prev
            if has_available_address_space(c):
                return c
            i += 1
        page = K_SMALL_BUFFER if pool.is_small else K_LARGE_BUFFER
        es = ExpandableSegment(0, page, self.device_memory)
        es.base = self._place(es.size, page)
        self.segment_sizes[es.base] = es.size
        self.segments += 1
        cand = Block(stream, es.size, pool, es.base)
        cand.mapped = False
        cand.es = es
        pool.insert_unmapped(cand)
        return cand

    def map_block(self, to_map, size):
        assert not to_map.mapped and size <= to_map.size
        es = to_map.es
        off = to_map.ptr - es.base
        assert off % es.page == 0
        begin = off // es.page
        end = (off + size + es.page - 1) // es.page
        mapped = (end - begin) * es.page
        assert mapped > 0
        pool = to_map.pool
        pool.erase_unmapped(to_map)
        to_map.mapped = True
        if mapped < to_map.size:
            rest = Block(to_map.stream, to_map.size - mapped, pool,
                         to_map.ptr + mapped)
            rest.mapped = False
            rest.es = es
            rest.prev = to_map
            rest.next = to_map.next
            if to_map.next is not None:
                to_map.next.prev = rest
            to_map.next = rest
            pool.insert_unmapped(rest)
            to_map.size = mapped
        self.try_merge_blocks(to_map, to_map.prev, pool)
        self.try_merge_blocks(to_map, to_map.next, pool)
        pool.insert(to_map)
        self.reserved.increase(mapped)
        self.maps += 1

    def try_allocate_expandable_block(self, pool, stream, size):
        c = self.find_expandable_block(pool, stream, size)
        if not c.mapped:
            self.map_block(c, min(c.size, size))
        while c.size < size:
            nxt = c.next
            self.map_block(nxt, min(size - c.size, nxt.size))
            c = nxt
        pool.erase(c)
        return c

    # -- blocks --------------------------------------------------------------

    @staticmethod
    def try_merge_blocks(dst, src, pool):
        if src is None or src.allocated or dst.mapped != src.mapped:
            return 0
        if dst.prev is src:
            dst.ptr = src.ptr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        if src.mapped:
            pool.erase(src)
        else:
            pool.erase_unmapped(src)
        dst.size += src.size
        return src.size

    def malloc(self, orig_size, stream):
        size = self.round_size(orig_size)
        pool = self.get_pool(size)
        alloc_size = self.get_allocation_size(size)
        block = self.get_free_block(pool, stream, size)
        if block is None:
            block = self.alloc_block(pool, stream, size, alloc_size)
        if self.should_split(block, size):
            remaining = block
            block = Block(stream, size, pool, remaining.ptr)
            block.es = remaining.es
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.ptr += size
            remaining.size -= size
            pool.insert(remaining)
        block.allocated = True
        block.requested = orig_size
        self.allocated.increase(block.size)
        self.requested.increase(orig_size)
        return block

    def free(self, block):
        block.allocated = False
        self.allocated.decrease(block.size)
        self.requested.decrease(block.requested)
        pool = block.pool
        self.try_merge_blocks(block, block.prev, pool)
        self.try_merge_blocks(block, block.next, pool)
        pool.insert(block)


    def check(self, live_blocks):
        """Verifies the bookkeeping; raises AssertionError on the first
        inconsistency (--check)."""
        seen = set()
        heads = []
        free_mapped = {}
        unmapped = {}
        for pool in (self.small, self.large):
            assert pool.keys == sorted(pool.by_key), "pool order"
            for k, b in pool.by_key.items():
                assert k == (b.stream, b.size, b.ptr), "stale key"
                assert b.mapped and not b.allocated and b.pool is pool
                free_mapped[id(b)] = b
            for k, b in pool.by_ukey.items():
                assert k == (b.stream, b.ptr) and not b.mapped
                assert b.pool is pool
                unmapped[id(b)] = b
        everything = list(free_mapped.values()) + list(unmapped.values()) \
            + list(live_blocks)
        for b in everything:
            while b.prev is not None:
                b = b.prev
            if id(b) not in seen:
                seen.add(id(b))
                heads.append(b)
        allocated = 0
        mapped_total = 0
        for h in heads:
            assert h.ptr in self.segment_sizes, "head not at a segment base"
            total = 0
            b = h
            while b is not None:
                if b.allocated:
                    allocated += b.size
                else:
                    assert id(b) in (free_mapped if b.mapped else unmapped), \
                        "a free block missing from its pool"
                if b.mapped:
                    mapped_total += b.size
                if b.es is not None and not b.mapped:
                    assert (b.ptr - b.es.base) % b.es.page == 0
                    assert b.size % b.es.page == 0
                n = b.next
                if n is not None:
                    assert n.prev is b and b.ptr + b.size == n.ptr, "chain"
                    assert n.pool is b.pool and n.stream == b.stream
                    assert not (not b.allocated and not n.allocated
                                and b.mapped == n.mapped), "unmerged"
                total += b.size
                b = n
            assert total == self.segment_sizes[h.ptr], "segment size"
        assert len(heads) == len(self.segment_sizes), "lost a segment"
        assert allocated == self.allocated.current, "allocated bytes"
        assert mapped_total == self.reserved.current, "reserved bytes"


def parse_size(text):
    """BYTES with an optional K, M, G or T (binary) suffix."""
    t = text.strip()
    mult = 1
    if t and t[-1] in "KkMmGgTt":
        mult = 1 << (10 * ("kmgt".index(t[-1].lower()) + 1))
        t = t[:-1]
    try:
        n = int(t)
    except ValueError:
        raise argparse.ArgumentTypeError("not a size: %r" % text)
    if n < 0:
        raise argparse.ArgumentTypeError("not a size: %r" % text)
    return n * mult


def events(path):
    """Yields (lineno, op, id, size, stream) from a hippo trace."""
    try:
        f = open(path, "r", encoding="utf-8-sig", newline="")
    except OSError as e:
        raise TraceError("%s: %s" % (path, e.strerror))
    with f:
        header = False
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            fields = [x.strip() for x in s.split(",")]
            if not header:
                if ",".join(fields) != HEADER:
                    raise TraceError("%s:%d: header '%s' expected"
                                     % (path, lineno, HEADER))
                header = True
                continue

            def num(x, what):
                if not x.isdigit():
                    raise TraceError("%s:%d: %s '%s' is not a number"
                                     % (path, lineno, what, x))
                return int(x)
            op = fields[0]
            if op == "a":
                if len(fields) != 4:
                    raise TraceError("%s:%d: 'a,ID,SIZE,STREAM' expected"
                                     % (path, lineno))
                stream = num(fields[3], "stream")
                if stream > MAX_STREAM:
                    raise TraceError("%s:%d: stream %d over %d"
                                     % (path, lineno, stream, MAX_STREAM))
                yield (lineno, "a", num(fields[1], "id"),
                       num(fields[2], "size"), stream)
            elif op == "f":
                if len(fields) < 2 or len(fields) > 4:
                    raise TraceError("%s:%d: 'f,ID[,SIZE[,STREAM]]' expected"
                                     % (path, lineno))
                for x, what in zip(fields[2:], ("size", "stream")):
                    if x:
                        num(x, what)
                yield (lineno, "f", num(fields[1], "id"), 0, 0)
            else:
                raise TraceError("%s:%d: unknown op '%s'"
                                 % (path, lineno, op[:20]))
        if not header:
            raise TraceError("%s: no header '%s'" % (path, HEADER))


def simulate(path, alloc, check=False):
    """Replays the trace at PATH through ALLOC; returns the event count.
    With CHECK, verifies the allocator's bookkeeping after every event."""
    live = {}
    n = 0
    for lineno, op, key, size, stream in events(path):
        n += 1
        if op == "a":
            if key in live:
                raise TraceError("%s:%d: id %d is live already"
                                 % (path, lineno, key))
            # A 0-byte tensor has no block (NativeCachingAllocator::allocate
            # calls malloc only when size != 0).
            live[key] = alloc.malloc(size, stream) if size else None
        else:
            if key not in live:
                raise TraceError("%s:%d: free of id %d, which is not live"
                                 % (path, lineno, key))
            b = live.pop(key)
            if b is not None:
                alloc.free(b)
        if check:
            try:
                alloc.check(b for b in live.values() if b is not None)
            except AssertionError as e:
                raise TraceError("%s:%d: --check failed: %s"
                                 % (path, lineno, str(e) or "assertion"))
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="torch-alloc-sim.py",
        description="Simulates PyTorch's CUDA caching allocator "
        "(DeviceCachingAllocator) on a hippo trace and prints its peak "
        "reserved, allocated and requested bytes.")
    ap.add_argument("trace", metavar="TRACE.csv")
    ap.add_argument("--mode", choices=("segments", "expandable"),
                    default="segments",
                    help="segments: PyTorch's default (and the MemPool "
                    "route); expandable: expandable_segments:True")
    ap.add_argument("--segments-out", metavar="FILE",
                    help="segments mode: write the segments PyTorch asks "
                    "its allocator for as a hippo trace")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the figures as a JSON object")
    ap.add_argument("--max-split-size", type=parse_size, default=None,
                    metavar="BYTES",
                    help="max_split_size_mb, in bytes (default: unlimited)")
    ap.add_argument("--device-memory", type=parse_size, default=80 << 30,
                    metavar="BYTES",
                    help="expandable: the GPU's memory, which sizes each "
                    "segment's address range at 9/8 of it (default 80G)")
    ap.add_argument("--check", action="store_true",
                    help="verify the simulated allocator's bookkeeping "
                    "after every event (slow; exit 1 on a failure)")
    ap.add_argument("--quiet", action="store_true",
                    help="print nothing but errors")
    args = ap.parse_args(argv)
    if args.segments_out and args.mode != "segments":
        ap.error("--segments-out needs --mode segments")

    seg = None
    if args.segments_out:
        try:
            seg = open(args.segments_out, "w", encoding="ascii")
        except OSError as e:
            print("torch-alloc-sim.py: %s: %s" % (args.segments_out,
                                                  e.strerror),
                  file=sys.stderr)
            return 1
        seg.write("# the segments PyTorch's caching allocator asks for, "
                  "simulated by tools/torch-alloc-sim.py\n"
                  "# from %s (%s); never freed (no empty_cache)\n"
                  "%s\n" % (args.trace, PYTORCH_SOURCE, HEADER))
    alloc = Allocator(
        args.mode == "expandable",
        max_split_size=(UNLIMITED if args.max_split_size is None
                        else args.max_split_size),
        device_memory=args.device_memory, segments_out=seg)
    try:
        n = simulate(args.trace, alloc, args.check)
    except TraceError as e:
        print("torch-alloc-sim.py: %s" % e, file=sys.stderr)
        if seg:
            seg.close()
        return 1
    if seg:
        seg.close()

    peak_req = alloc.requested.peak
    ratio = alloc.reserved.peak / peak_req if peak_req else 0.0
    res = {
        "trace": args.trace,
        "mode": args.mode,
        "simulated_from": PYTORCH_SOURCE,
        "events": n,
        "peak_requested_bytes": peak_req,
        "peak_allocated_bytes": alloc.allocated.peak,
        "peak_reserved_bytes": alloc.reserved.peak,
        "reserved_to_requested": round(ratio, 6),
        "reserved_at_end_bytes": alloc.reserved.current,
        "segments": alloc.segments,
        "map_calls": alloc.maps,
        "max_split_size": (None if args.max_split_size is None
                           else args.max_split_size),
    }
    if not args.quiet:
        print("trace: %s" % args.trace)
        print("mode: %s" % args.mode)
        print("simulated from: %s" % PYTORCH_SOURCE)
        print("events: %d" % n)
        print("peak requested bytes: %d" % peak_req)
        print("peak allocated bytes: %d" % alloc.allocated.peak)
        print("peak reserved bytes: %d" % alloc.reserved.peak)
        print("reserved/requested ratio: %.3f" % ratio)
        print("segments: %d" % alloc.segments)
        if args.mode == "expandable":
            print("map calls: %d" % alloc.maps)
    if args.json:
        try:
            with open(args.json, "w", encoding="ascii") as f:
                json.dump(res, f, indent=2)
                f.write("\n")
        except OSError as e:
            print("torch-alloc-sim.py: %s: %s" % (args.json, e.strerror),
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
