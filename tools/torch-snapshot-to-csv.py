#!/usr/bin/env python3
"""torch-snapshot-to-csv.py -- a PyTorch memory snapshot as a hippo trace.

    python3 tools/torch-snapshot-to-csv.py [--device N] [-o OUT.csv] SNAPSHOT

SNAPSHOT is the pickle that torch.cuda.memory._dump_snapshot() writes (the
dict of torch.cuda.memory._snapshot()), taken after
torch.cuda.memory._record_memory_history() so that it holds
`device_traces`.  The output (stdout, or OUT.csv) is hippo's own trace
format, `op,id,size,stream` (README, "hippo-replay"), which hippo-replay
and hippo-bench read:

  - each `alloc` entry of the device's trace reserves its `size` bytes
    under a new id (an address freed and allocated again is a new id);
  - each `free_completed` entry releases the id live at its address (the
    caching allocator may reuse the bytes from then on; `free_requested`
    comes earlier when another stream still uses the block); PyTorch
    before 2.0 wrote `free`, read the same way;
  - blocks live before recording began have no `alloc` entry: they are
    reserved at the start of the CSV, before the first traced event.  They
    are the addresses whose first entry is a `free_completed` (in trace
    order), then the blocks of the snapshot's `segments` still active
    (`active_allocated`, or a free not completed yet) that the trace leaves
    not live (in segment order), at their `requested_size` (else `size`);
  - other actions (free_requested, segment_alloc, segment_free,
    segment_map, segment_unmap, snapshot, oom) are counted in a comment;
  - each distinct torch stream becomes trace stream 0, 1, ... in order of
    first use (at most 1024);
  - an `alloc` at an address still live (its free is missing from the
    trace) first releases the old block there, and a free at an address
    freed already (nothing live there) is ignored; the comments count
    these, and say so when the snapshot has no `segments` (then blocks
    live at the snapshot that the trace never frees are not known).

Sizes are the trace's, which PyTorch records as requested (not rounded)
bytes.  Comment lines at the top (`#`) say where the trace came from and
these counts.

The pickle is read with an unpickler that refuses every class: a snapshot
is plain dicts, lists, numbers and strings, and so torch need not be
installed.  Exit status: 0 written, 1 the snapshot cannot be used (a
message names why), 2 bad usage.
"""

import argparse
import pickle
import sys

MAX_STREAMS = 1024
ACTIVE_STATES = ("active_allocated", "active_pending_free",
                 "active_awaiting_free")


class Refuse(Exception):
    """The snapshot cannot be converted; the message says why."""


class PlainUnpickler(pickle.Unpickler):
    """Loads plain containers only: any class or function is refused, so a
    hostile pickle cannot run code."""

    def find_class(self, module, name):
        raise Refuse("the pickle asks for %s.%s; a memory snapshot holds "
                     "only dicts, lists, numbers and strings" % (module, name))


def load(path):
    try:
        with open(path, "rb") as f:
            return PlainUnpickler(f).load()
    except OSError as e:
        raise Refuse("cannot read it: %s" % e.strerror)
    except Refuse:
        raise
    except Exception as e:  # whatever a damaged pickle makes pickle raise
        raise Refuse("not a readable pickle: %s" % e)


def number(entry, key, what):
    value = entry.get(key) if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refuse("%s has no usable '%s' (%r)" % (what, key, value))
    if value >= 1 << 64:  # hippo-replay reads 64-bit numbers
        raise Refuse("%s has a '%s' of %d, more than 64 bits" % (what, key,
                                                                 value))
    return value


def printable(text):
    """text for one comment line of the CSV: control characters (a newline
    in a name would start a line of its own), lone surrogates (a pickle's
    string, or a file name's bytes that are no UTF-8, which no UTF-8 file
    can hold) become '?'."""
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7f or
                   0xd800 <= ord(c) <= 0xdfff else c for c in text)


class Block:
    """One reservation: `stream` is torch's stream; `id` is given when the
    CSV is written, in the order reservations appear there."""

    __slots__ = ("size", "stream", "id")

    def __init__(self, size, stream):
        self.size = size
        self.stream = stream
        self.id = None


def convert(snapshot, device):
    """Returns (pre, events, notes): the blocks live before recording,
    the traced events as ('a' | 'f', Block), and comment lines."""
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        raise Refuse("no 'device_traces': record with "
                     "torch.cuda.memory._record_memory_history() before "
                     "taking the snapshot")
    traces = snapshot["device_traces"]
    if not isinstance(traces, list) or not 0 <= device < len(traces):
        raise Refuse("no trace for device %d (it has %s)" % (
            device, "%d" % len(traces) if isinstance(traces, list) else
            "none"))
    trace = traces[device]
    if not isinstance(trace, list):
        raise Refuse("the trace of device %d is not a list" % device)

    live = {}       # address -> Block
    seen = set()    # addresses of an alloc or a free so far
    pre = []        # blocks live before recording began
    events = []
    counts = {}     # action -> entries
    pre_freed = missing_frees = stray_frees = 0
    for i, entry in enumerate(trace):
        what = "trace entry %d" % i
        if not isinstance(entry, dict):
            raise Refuse("%s is not a dict" % what)
        action = entry.get("action")
        if not isinstance(action, str):
            raise Refuse("%s has no usable 'action' (%r)" % (what, action))
        counts[action] = counts.get(action, 0) + 1
        if action not in ("alloc", "free_completed", "free"):
            continue
        addr = number(entry, "addr", what)
        size = number(entry, "size", what)
        stream = number(entry, "stream", what) if "stream" in entry else 0
        if action == "alloc":
            if addr in live:  # its free is missing from the trace
                events.append(("f", live.pop(addr)))
                missing_frees += 1
            block = live[addr] = Block(size, stream)
            events.append(("a", block))
        elif addr in live:
            events.append(("f", live.pop(addr)))
        elif addr in seen:  # freed twice: nothing live there to release
            stray_frees += 1
        else:  # its first entry: allocated before recording began
            block = Block(size, stream)
            pre.append(block)
            events.append(("f", block))
            pre_freed += 1
        seen.add(addr)

    pre_live = 0
    segments = snapshot.get("segments", [])
    if not isinstance(segments, list):
        raise Refuse("'segments' is not a list")
    for s, seg in enumerate(segments):
        what = "segment %d" % s
        if not isinstance(seg, dict):
            raise Refuse("%s is not a dict" % what)
        if seg.get("device", device) != device:
            continue
        addr = number(seg, "address", what)
        stream = number(seg, "stream", what) if "stream" in seg else 0
        blocks = seg.get("blocks", [])
        if not isinstance(blocks, list):
            raise Refuse("the blocks of %s are not a list" % what)
        for b, block in enumerate(blocks):
            bwhat = "block %d of %s" % (b, what)
            size = number(block, "size", bwhat)
            # Older snapshots give no block address: blocks tile the segment.
            if "address" in block:
                addr = number(block, "address", bwhat)
            if block.get("state") in ACTIVE_STATES and addr not in live:
                requested = block.get("requested_size")
                if isinstance(requested, bool) or \
                        not isinstance(requested, int) or requested <= 0:
                    requested = size
                pre.append(Block(requested, stream))
                pre_live += 1
            addr += size

    notes = [
        "trace entries: %s" % (", ".join(
            "%s %d" % (a, n)
            for a, n in sorted(counts.items(), key=lambda kv: str(kv[0])))
            or "none"),
        "used: alloc (a reservation) and free_completed or free (its "
        "release); the others are ignored",
        "blocks live before recording began, reserved first: %d (%d freed "
        "in the trace, %d still live at the snapshot)" % (
            pre_freed + pre_live, pre_freed, pre_live),
    ]
    if missing_frees:
        notes.append("allocs at a live address (its free missing from the "
                     "trace; released first): %d" % missing_frees)
    if stray_frees:
        notes.append("frees at an address freed already (nothing live "
                     "there; ignored): %d" % stray_frees)
    if "segments" not in snapshot:
        notes.append("the snapshot has no 'segments': blocks allocated "
                     "before recording and never freed in the trace are "
                     "not known, so not reserved")
    return pre, events, notes


def render(source, device, pre, events, notes):
    """The CSV, as one string (nothing is written when this refuses)."""
    streams = {}  # torch stream -> trace stream, in order of first use

    def trace_stream(block):
        if block.stream not in streams:
            if len(streams) == MAX_STREAMS:
                raise Refuse("more than %d streams; hippo traces have at "
                             "most %d" % (MAX_STREAMS, MAX_STREAMS))
            streams[block.stream] = len(streams)
        return streams[block.stream]

    lines = []
    next_id = 1
    for op, block in [("a", b) for b in pre] + events:
        if op == "a":
            block.id = next_id
            next_id += 1
        lines.append("%s,%d,%d,%d\n" % (op, block.id, block.size,
                                        trace_stream(block)))
    head = ["# torch-snapshot-to-csv.py: %s, device %d\n" % (
        printable(source), device)]
    head += ["# %s\n" % printable(note) for note in notes]
    head.append("# streams: %s\n" % (", ".join(
        "torch %#x -> %d" % (s, n) for s, n in streams.items()) or "none"))
    head.append("op,id,size,stream\n")
    return "".join(head + lines)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="torch-snapshot-to-csv.py",
        description="Converts a PyTorch memory snapshot (pickle) into a "
        "hippo trace (op,id,size,stream) for hippo-replay.")
    parser.add_argument("snapshot", help="the pickle of "
                        "torch.cuda.memory._dump_snapshot()")
    parser.add_argument("-o", "--output", default="-",
                        help="the CSV to write (default: stdout)")
    parser.add_argument("--device", type=int, default=0,
                        help="the CUDA device whose trace to convert "
                        "(default: 0)")
    args = parser.parse_args(argv)
    try:
        pre, events, notes = convert(load(args.snapshot), args.device)
        text = render(args.snapshot, args.device, pre, events, notes)
        if args.output == "-":
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except OSError as e:
                raise Refuse("cannot write stdout: %s" % e.strerror)
        else:
            try:
                with open(args.output, "w") as out:
                    out.write(text)
            except OSError as e:
                raise Refuse("cannot write %s: %s" % (args.output,
                                                      e.strerror))
    except Refuse as e:
        sys.stderr.write("torch-snapshot-to-csv.py: %s: %s\n" % (
            args.snapshot, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
