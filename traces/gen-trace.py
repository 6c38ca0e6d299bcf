#!/usr/bin/env python3
"""gen-trace.py -- generate traces/train.csv, a synthetic allocation trace.

The trace imitates the device allocations of a few training steps of a small
decoder-only transformer, as a caching allocator would see them:

  model       8 layers, hidden 1024, 16 heads (head dim 64), MLP 4096,
              vocabulary 8192, sequence 512, batch 8 split into 4
              micro-batches of 2 (gradient accumulation); weights, gradients
              and activations in bf16, Adam moments in fp32.

  setup       (stream 0) every parameter tensor, then the two Adam moments
              of each, allocated once and kept for the whole run; a few
              initialisation temporaries freed right away.

  each of 4 steps, for each micro-batch:
    loader    (stream 1) prefetches the next micro-batch: a staging buffer
              of random size (freed once decoded), token ids, labels and an
              attention mask (freed after the micro-batch's backward pass).
    forward   (stream 0) layer by layer: layer-norm outputs and statistics,
              QKV, attention head by head (score and probability tiles are
              temporaries freed right away, per-head outputs are gathered
              into the context tensor), projection + residual, dropout mask,
              MLP (fc1, GELU kept for backward), residual; a few small
              scalar/reduction temporaries of random size; then logits and
              an fp32 loss temporary.
    backward  (stream 0) layers in reverse: the saved activations of a
              layer are freed as its gradients are computed; per-head
              temporaries are recomputed; parameter gradients are allocated
              on the first micro-batch and accumulated through temporaries
              on the later ones.
  optimizer   (stream 0) gradient-norm scalars, one fp32 update temporary
              per parameter, then every gradient is freed (set to None).

  end         the Adam moments are freed; the weights stay live (the trace
              ends with the model loaded, as a real capture would).

Output format (what tools/hippo-replay reads): comment lines starting with
`#`, the header `op,id,size,stream`, then `a,ID,SIZE,STREAM` (reserve) and
`f,ID,,` (free) lines.  Ids are sequential from 1 and never reused.

The output is deterministic: the few random choices (staging buffer and
temporary sizes) come from a splitmix64 generator with a fixed seed, written
out here so the result does not depend on the Python version.

usage: gen-trace.py [OUTPUT]     (default: train.csv next to this script)
The script prints the event count and the peak live bytes to stderr.
"""

import os
import sys

SEED = 0x68697070  # "hipp"

LAYERS = 8
HIDDEN = 1024
HEADS = 16
HEAD_DIM = HIDDEN // HEADS
FFN = 4 * HIDDEN
VOCAB = 8192
SEQ = 512
BATCH = 8
MICRO = 4                     # micro-batches per step
MB = BATCH // MICRO           # sequences per micro-batch
TOKENS = MB * SEQ
STEPS = 4

BF16 = 2
FP32 = 4
INT32 = 4
MASK64 = (1 << 64) - 1


class Rng:
    """splitmix64: tiny, fixed, and identical on every Python."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def between(self, lo, hi):
        """An integer in [lo, hi]."""
        return lo + self.next() % (hi - lo + 1)


class Trace:
    """Collects events and keeps the live-bytes bookkeeping."""

    def __init__(self):
        self.lines = []
        self.next_id = 1
        self.sizes = {}       # live id -> size
        self.live = 0
        self.peak = 0
        self.events = 0

    def alloc(self, size, stream=0):
        tid = self.next_id
        self.next_id += 1
        self.lines.append("a,%d,%d,%d" % (tid, size, stream))
        self.sizes[tid] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        self.events += 1
        return tid

    def free(self, tid):
        self.live -= self.sizes.pop(tid)
        self.lines.append("f,%d,," % tid)
        self.events += 1

    def temp(self, size, stream=0):
        """A temporary: allocated and freed right away."""
        self.free(self.alloc(size, stream))


def layer_params():
    """(name, elements) of one transformer layer's parameters."""
    return [
        ("ln1.w", HIDDEN), ("ln1.b", HIDDEN),
        ("qkv.w", 3 * HIDDEN * HIDDEN), ("qkv.b", 3 * HIDDEN),
        ("out.w", HIDDEN * HIDDEN), ("out.b", HIDDEN),
        ("ln2.w", HIDDEN), ("ln2.b", HIDDEN),
        ("fc1.w", FFN * HIDDEN), ("fc1.b", FFN),
        ("fc2.w", HIDDEN * FFN), ("fc2.b", HIDDEN),
    ]


def model_params():
    params = [("embed", VOCAB * HIDDEN), ("pos", SEQ * HIDDEN)]
    for layer in range(LAYERS):
        params += [("l%d.%s" % (layer, n), e) for n, e in layer_params()]
    params += [("lnf.w", HIDDEN), ("lnf.b", HIDDEN),
               ("head", VOCAB * HIDDEN)]
    return params


def misc_temps(t, rng, count):
    """Small scalar/reduction temporaries of random size."""
    for _ in range(count):
        t.temp(rng.between(1, 256) * 256)


def forward_layer(t, rng):
    """One layer's forward pass; returns the ids saved for backward."""
    act = TOKENS * HIDDEN * BF16
    saved = []
    saved.append(t.alloc(act))                     # ln1 out
    saved.append(t.alloc(TOKENS * FP32))           # ln1 mean
    saved.append(t.alloc(TOKENS * FP32))           # ln1 rstd
    saved.append(t.alloc(3 * act))                 # qkv
    head_out = []
    for _ in range(HEADS):
        scores = t.alloc(MB * SEQ * SEQ * BF16)
        probs = t.alloc(MB * SEQ * SEQ * BF16)
        t.free(scores)
        head_out.append(t.alloc(MB * SEQ * HEAD_DIM * BF16))
        saved.append(t.alloc(MB * SEQ * FP32))     # log-sum-exp of the head
        t.free(probs)
    saved.append(t.alloc(act))                     # context (heads gathered)
    for h in head_out:
        t.free(h)
    proj = t.alloc(act)
    saved.append(t.alloc(act))                     # residual 1
    t.free(proj)
    saved.append(t.alloc(TOKENS * HIDDEN))         # dropout mask (bytes)
    saved.append(t.alloc(act))                     # ln2 out
    saved.append(t.alloc(TOKENS * FP32))           # ln2 mean
    saved.append(t.alloc(TOKENS * FP32))           # ln2 rstd
    saved.append(t.alloc(TOKENS * FFN * BF16))     # fc1 out
    saved.append(t.alloc(TOKENS * FFN * BF16))     # gelu out
    fc2 = t.alloc(act)
    saved.append(t.alloc(act))                     # residual 2 (layer out)
    t.free(fc2)
    misc_temps(t, rng, rng.between(2, 4))
    return saved


def backward_layer(t, rng, saved, grads, first_micro, dx):
    """One layer's backward pass; frees its saved activations in reverse,
    returns the id of the gradient flowing to the layer below."""
    act = TOKENS * HIDDEN * BF16
    params = layer_params()

    def grad(index):
        elements = params[index][1]
        if first_micro:
            grads.append(t.alloc(elements * BF16))
        else:
            t.temp(elements * BF16)                # accumulate into grads

    saved = list(saved)
    t.free(saved.pop())                            # residual 2
    d_gelu = t.alloc(TOKENS * FFN * BF16)
    grad(10)                                       # fc2.w
    grad(11)                                       # fc2.b
    t.free(saved.pop())                            # gelu out
    d_fc1 = t.alloc(TOKENS * FFN * BF16)
    t.free(d_gelu)
    t.free(saved.pop())                            # fc1 out
    grad(8)                                        # fc1.w
    grad(9)                                        # fc1.b
    d_ln2 = t.alloc(act)
    t.free(d_fc1)
    t.free(saved.pop())                            # ln2 rstd
    t.free(saved.pop())                            # ln2 mean
    t.free(saved.pop())                            # ln2 out
    grad(6)
    grad(7)
    d_res1 = t.alloc(act)
    t.free(d_ln2)
    t.free(dx)
    t.free(saved.pop())                            # dropout mask
    t.free(saved.pop())                            # residual 1
    d_ctx = t.alloc(act)
    grad(4)                                        # out.w
    grad(5)                                        # out.b
    t.free(saved.pop())                            # context
    d_qkv = t.alloc(3 * act)
    for _ in range(HEADS):
        scores = t.alloc(MB * SEQ * SEQ * BF16)    # recomputed
        probs = t.alloc(MB * SEQ * SEQ * BF16)
        t.free(scores)
        d_probs = t.alloc(MB * SEQ * SEQ * BF16)
        t.free(probs)
        t.temp(MB * SEQ * HEAD_DIM * BF16)         # dq of the head
        t.temp(MB * SEQ * HEAD_DIM * BF16)         # dk
        t.temp(MB * SEQ * HEAD_DIM * BF16)         # dv
        t.free(d_probs)
        t.free(saved.pop())                        # the head's lse
    t.free(d_ctx)
    grad(2)                                        # qkv.w
    grad(3)                                        # qkv.b
    t.free(saved.pop())                            # qkv
    d_ln1 = t.alloc(act)
    t.free(d_qkv)
    t.free(saved.pop())                            # ln1 rstd
    t.free(saved.pop())                            # ln1 mean
    t.free(saved.pop())                            # ln1 out
    grad(0)
    grad(1)
    d_x = t.alloc(act)
    t.free(d_ln1)
    t.free(d_res1)
    assert not saved
    misc_temps(t, rng, rng.between(1, 3))
    return d_x


def load_batch(t, rng):
    """The loader stream prefetches one micro-batch."""
    staging = t.alloc(rng.between(4, 16) * 256 * 1024, stream=1)
    batch = [t.alloc(MB * SEQ * INT32, stream=1),    # token ids
             t.alloc(MB * SEQ * INT32, stream=1),    # labels
             t.alloc(MB * SEQ, stream=1)]            # attention mask
    t.free(staging)
    return batch


def generate():
    rng = Rng(SEED)
    t = Trace()

    # Setup: weights, then the Adam moments.
    params = model_params()
    weights = []
    for _, elements in params:
        weights.append(t.alloc(elements * BF16))
        if elements >= 1 << 20:
            t.temp(elements * FP32)                # fp32 init buffer
    moments = []
    for _, elements in params:
        moments.append(t.alloc(elements * FP32))   # exp_avg
        moments.append(t.alloc(elements * FP32))   # exp_avg_sq

    act = TOKENS * HIDDEN * BF16
    batch = load_batch(t, rng)
    for _step in range(STEPS):
        grads = []
        for micro in range(MICRO):
            next_batch = load_batch(t, rng)        # prefetch, stream 1
            x = t.alloc(act)                       # embedding out
            layers = [forward_layer(t, rng) for _ in range(LAYERS)]
            lnf = t.alloc(act)
            logits = t.alloc(TOKENS * VOCAB * BF16)
            loss32 = t.alloc(TOKENS * VOCAB * FP32)
            loss = t.alloc(FP32)
            t.free(loss32)

            # Backward: head, then the layers in reverse.
            d_logits = t.alloc(TOKENS * VOCAB * BF16)
            t.free(logits)
            t.free(loss)
            first = micro == 0
            head_grads = []
            if first:
                head_grads = [t.alloc(VOCAB * HIDDEN * BF16),   # head
                              t.alloc(HIDDEN * BF16),           # lnf.w
                              t.alloc(HIDDEN * BF16)]           # lnf.b
            else:
                t.temp(VOCAB * HIDDEN * BF16)
            dx = t.alloc(act)
            t.free(d_logits)
            t.free(lnf)
            layer_grads = []
            for saved in reversed(layers):
                g = []
                dx = backward_layer(t, rng, saved, g, first, dx)
                layer_grads.append(g)
            if first:
                embed_grads = [t.alloc(VOCAB * HIDDEN * BF16),  # embed
                               t.alloc(SEQ * HIDDEN * BF16)]    # pos
                grads = embed_grads + head_grads + \
                    [gid for g in layer_grads for gid in g]
            else:
                t.temp(VOCAB * HIDDEN * BF16)
            t.free(dx)
            t.free(x)
            for tid in batch:                      # done with this batch
                t.free(tid)
            batch = next_batch

        # Optimizer step: clip, update, drop the gradients.
        norms = [t.alloc(FP32) for _ in params]
        total = t.alloc(FP32)
        for n in norms:
            t.free(n)
        for _, elements in params:
            t.temp(elements * FP32)                # the fp32 update
        t.free(total)
        for gid in grads:
            t.free(gid)
        misc_temps(t, rng, 8)

    for tid in batch:
        t.free(tid)
    for tid in moments:
        t.free(tid)
    assert len(t.sizes) == len(weights)
    return t


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    out = argv[1] if len(argv) > 1 else os.path.join(here, "train.csv")
    t = generate()
    with open(out, "w", newline="\n") as f:
        f.write("# train.csv -- generated by traces/gen-trace.py; do not "
                "edit, re-run the script.\n")
        f.write("# %d events, peak live bytes %d, %d ids live at the end.\n"
                % (t.events, t.peak, len(t.sizes)))
        f.write("op,id,size,stream\n")
        for line in t.lines:
            f.write(line + "\n")
    sys.stderr.write("%s: %d events, peak live bytes %d (%.1f MiB)\n"
                     % (out, t.events, t.peak, t.peak / (1 << 20)))


if __name__ == "__main__":
    main(sys.argv)
