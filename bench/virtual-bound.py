#!/usr/bin/env python3
"""virtual-bound.py -- what a non-moving virtual-memory allocator could reach
on a trace at best: an idealised model, to tell a missed target that a
better policy would meet from one no policy of this kind meets.

usage: virtual-bound.py [--steps N] [--placement fit|least-map|hybrid]
                        TRACE.csv BUDGET...

For each BUDGET (peak mapped / running peak of live bytes, e.g. 1.033) it
replays TRACE (hippo's `op,id,size,stream` format; streams ignored: one
address range) --steps times as training steps (blocks the trace never
frees made once, as `hippo-replay --steps`) and prints, per step, peak
mapped / peak live and the driver calls per 1,000 events.

The model is generous to the allocator, so its figures are lower bounds
for hippo's VIRTUAL pool and anything like it:
  - blocks sit at any byte offset in an unbounded address range (no
    alignment), and never move;
  - physical memory is 2 MiB granules, each mapped and given back on its
    own (no allocation pins another's granules);
  - a reservation that maps any granule costs 3 calls in all (one create,
    one map, one set-access, whatever the number of granules or runs; a
    real runtime takes one create and one map per physical allocation);
  - a give-back costs 2 calls in all (one unmap, one release, whatever it
    takes), and happens only when mapped bytes pass the budget: the
    idle granules highest in the range go, down to the budget;
  - waits are not counted.
Placement: `fit` takes the smallest free hole that fits (hippo's rule);
`least-map` the hole (start or end of it) that needs the fewest granules
mapped, then the smallest; `hybrid` the fit unless it would map past the
budget, then the least-map one.

Standard library only; the random trace's three steps take about 5 s.
"""
import argparse
import bisect
import sys

G = 2 << 20


def load(path):
    events = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("op,"):
                continue
            fields = line.strip().split(",")
            if len(fields) < 2 or fields[0] not in ("a", "f"):
                continue
            size = int(fields[2]) if fields[0] == "a" else 0
            events.append((fields[0], fields[1], size))
    return events


def granules(start, size):
    return start // G, (start + size + G - 1) // G


def ones(n, at):
    return ((1 << n) - 1) << at


def run(events, budget, steps, placement):
    freed = {i for op, i, _ in events if op == "f"}
    holes = [(0, 1 << 50)]          # free byte ranges, sorted, disjoint
    mapped = 0                      # bit g: granule g is mapped
    live = {}                       # id -> (start, size)
    live_bytes = peak = 0
    out = []
    for step in range(steps):
        calls = n = step_peak_live = step_peak_mapped = 0
        for op, i, size in events:
            if step and i not in freed:
                continue            # made once
            n += 1
            if op == "f":
                if i not in live:
                    continue
                a, size = live.pop(i)
                live_bytes -= size
                b = a + size
                k = bisect.bisect_left(holes, (a, 0))
                if k > 0 and holes[k - 1][1] == a:
                    a = holes.pop(k - 1)[0]
                    k -= 1
                if k < len(holes) and holes[k][0] == b:
                    b = holes.pop(k)[1]
                holes.insert(k, (a, b))
                continue
            if size == 0:
                continue
            fit = least = None
            for h, (a, b) in enumerate(holes):
                if b - a < size:
                    continue
                for start in ((a,) if b - a == size else (a, b - size)):
                    g0, g1 = granules(start, size)
                    need = (~mapped >> g0 & ((1 << (g1 - g0)) - 1)).bit_count()
                    if fit is None or (b - a, need) < fit[0]:
                        fit = ((b - a, need), h, start, need)
                    if least is None or (need, b - a) < least[0]:
                        least = ((need, b - a), h, start, need)
            pick = fit
            if placement == "least-map":
                pick = least
            elif placement == "hybrid" and fit[3] and \
                    (mapped.bit_count() + fit[3]) * G > budget * peak:
                pick = least
            _, h, start, need = pick
            a, b = holes.pop(h)
            if start + size < b:
                holes.insert(h, (start + size, b))
            if start > a:
                holes.insert(h, (a, start))
            live[i] = (start, size)
            live_bytes += size
            peak = max(peak, live_bytes)
            step_peak_live = max(step_peak_live, live_bytes)
            if need:
                g0, g1 = granules(start, size)
                mapped |= ones(g1 - g0, g0)
                calls += 3
                over = mapped.bit_count() * G - budget * peak
                if over > 0:
                    used = 0
                    for s0, sz in live.values():
                        u0, u1 = granules(s0, sz)
                        used |= ones(u1 - u0, u0)
                    idle = mapped & ~used
                    gone = 0
                    while idle and gone * G < over:
                        top = idle.bit_length() - 1
                        idle &= ~(1 << top)
                        mapped &= ~(1 << top)
                        gone += 1
                    if gone:
                        calls += 2
            step_peak_mapped = max(step_peak_mapped, mapped.bit_count() * G)
        out.append((step + 1, step_peak_mapped / max(1, step_peak_live),
                    calls * 1000.0 / max(1, n)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--placement", default="fit",
                    choices=("fit", "least-map", "hybrid"))
    ap.add_argument("trace")
    ap.add_argument("budget", type=float, nargs="+")
    a = ap.parse_args()
    events = load(a.trace)
    for budget in a.budget:
        steps = run(events, budget, a.steps, a.placement)
        print("%s budget %.3f: %s" % (a.placement, budget, " | ".join(
            "step %d %.4f x %.1f calls" % s for s in steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
