#!/usr/bin/env python3
"""gen-trace.py -- synthetic device-allocation traces for hippo-replay.

usage: gen-trace.py SCENARIO [OPTIONS] [-o FILE]
       gen-trace.py SCENARIO --help          (every option and its default)

Four scenarios, each writing the trace to stdout (or -o FILE) and one
summary line on stderr (events, peak live bytes, a figure or two of the
scenario).  Python 3 standard library only; the output is a function of the
options alone (--seed included): the random choices come from generators
written out here (splitmix64; xoshiro256** for `random`), never from
Python's `random` module, so every Python 3 gives the same bytes.  Sizes
accept a K, M or G suffix (binary: 64M = 64 MiB); a range is LO:HI.

The bundled traces in this directory are made by it:

  train.csv        gen-trace.py train -o train.csv
  infer.csv        gen-trace.py infer -o infer.csv
  two-streams.csv  gen-trace.py two-streams -o two-streams.csv
  random.csv       gen-trace.py random --ops 40000 -o random.csv

(tests/test-gen-trace.sh regenerates them and compares byte for byte.)

Model options (train, infer, two-streams): a decoder-only transformer,
  --layers 8  --hidden 1024  --heads 16 (head dim = hidden / heads)
  --ffn 4 x hidden  --vocab 8192
with weights, activations and gradients in bf16, Adam moments in fp32.

train -- a few training steps as a caching allocator sees them (stream 0:
  compute, stream 1: the data loader).  Options: --seq 512, --batch 8 split
  into --micro 4 micro-batches (gradient accumulation), --steps 4, --seed
  0x68697070, --odd-temps.
  setup       every parameter tensor (an fp32 init buffer freed right away
              for those of 1M elements or more), then the two Adam moments
              of each, allocated once and kept for the whole run.
  each step, for each micro-batch:
    loader    (stream 1) prefetches the next micro-batch: a staging buffer
              of random size, 1..4 MiB in 256 KiB steps (freed once
              decoded), token ids, labels and an attention mask (freed
              after the micro-batch's backward pass).
    forward   (stream 0) layer by layer: layer-norm outputs and statistics,
              QKV, attention head by head (score and probability tiles are
              temporaries freed right away, per-head outputs are gathered
              into the context tensor), projection + residual, dropout mask,
              MLP (fc1, GELU kept for backward), residual; 2..4 small
              temporaries of random size per layer; then logits and an fp32
              loss temporary.
    backward  (stream 0) layers in reverse: the saved activations of a
              layer are freed in the reverse order of their allocation as
              its gradients are computed; per-head temporaries are
              recomputed; parameter gradients are allocated on the first
              micro-batch and accumulated through temporaries on the later
              ones; 1..3 small temporaries per layer.
  optimizer   (stream 0) gradient-norm scalars (4 B each), one fp32 update
              temporary per parameter, then every gradient is freed (set to
              None), then 8 small temporaries.
  end         the Adam moments are freed; the weights stay live (the trace
              ends with the model loaded, as a real capture would).
  The small temporaries are 256 B .. 64 KiB in 256-byte steps; --odd-temps
  makes them any byte count in 1 .. 65536 instead (the same random draws,
  so everything else is unchanged; the bundled train.csv is without it).

infer -- serving requests with continuous batching and a growing KV cache
  (stream 0).  Options: --requests 16, --max-batch 8, --prompt 32:512 and
  --generate 16:256 tokens (uniform per request), --arrival-gap 6 (decode
  steps between arrivals: uniform in 0 .. 2 x gap), --kv paged|concat|double,
  --block-tokens 16, --seed 0x696e6665.
  The weights (bf16, one tensor per parameter) are allocated once and stay.
  Then a loop of decode iterations: requests that have arrived are admitted
  while fewer than --max-batch are running; each admitted request is
  prefilled alone (its prompt ids, a forward pass over the P prompt tokens
  with a heads x P x P bf16 score tensor per layer, the last token's fp32
  logits, the sampled token); then one decode step runs every running
  request together (b tokens: per layer layer-norm, QKV, an fp32 attention
  workspace of heads x (sum of the b contexts) x 4 B -- an odd size that
  changes every step --, context, projection + residual, layer-norm, fused
  fc1 + GELU, fc2 + residual; then b x vocab fp32 logits and b int32 sampled
  tokens).  A request that has produced its --generate tokens frees its KV
  cache; the others keep growing, so requests start and finish interleaved.
  When nothing runs, the clock jumps to the next arrival.  The KV cache:
    paged   (default; vLLM-like but allocated on demand) one allocation per
            block of --block-tokens tokens holding K and V of every layer
            (block-tokens x layers x 2 x hidden x 2 B: 512 KiB by default),
            a new block when a request's context crosses a block boundary;
    concat  a naive runtime (torch.cat per token, as Hugging Face's
            DynamicCache): per request and layer a K and a V tensor of
            exactly the context's size, reallocated (new, then the old one
            freed) for every token;
    double  per request and layer K and V with a capacity in tokens (the
            prompt's rounded up to a power of two, at least 16), reallocated
            at twice the capacity when full.
  The weights stay live at the end.

two-streams -- training with weights streamed and activations and gradients
  offloaded (FSDP / ZeRO-Offload style): stream 0 computes, stream 1 copies.
  Options: --seq 256:512 (each step's sequence length, uniform), --batch 4,
  --steps 16, --prefetch 2 (layers gathered ahead), --seed 0x73747265.
  Resident on stream 0 all along: the embedding, positions, head and final
  norm (bf16).  Each step:
    loader    (stream 1) a staging buffer of random size (freed on stream 1
              once decoded), token ids and labels (freed by stream 0 at the
              end of the step: cross-stream).
    forward   (stream 0) for each layer, stream 1 first gathers the weights
              of the layer --prefetch ahead into one flat bf16 buffer (freed
              by stream 0 once the layer ran: cross-stream); the layer's
              input is the checkpoint, copied to the host by stream 1 and
              freed when that copy is done (one layer later: a stream-0
              reservation freed by stream 1); the layer's temporaries
              (layer-norm, QKV, fp32 scores, context, MLP) are freed as soon
              as used.
    backward  layers in reverse: stream 1 gathers the weights again and
              brings the checkpoint back (a stream-1 buffer freed by stream
              0); stream 0 recomputes the layer's forward, keeping what the
              backward needs, computes the input gradient, freeing the saved
              tensors in reverse, and a flat gradient buffer for the layer,
              which stream 1 copies out to the host and frees one layer
              later.  The embedding's and head's gradients likewise.
    optimizer on the host (ZeRO-Offload): nothing on the device.
  A free line carries, in its (ignored) stream field, the stream whose work
  the free follows: `f,ID,,1` frees after stream 1's copy; reservations go
  back to the stream that reserved them either way.

random -- bench/hippo-bench's workload A as a trace (stream 0).  Options:
  --sizes uniform|log2, --p 0.5, --ops 1000000, --max-size 64M, --cap 4G,
  --seed (default: the bench's seed of the case, 0x41 + 2 x log2 + (p >
  0.55)).  Exactly A's operation stream (a_generate() in hippo-bench-speed.c:
  per operation a size, 256 x k with k uniform in 1 .. max/256, or log-uniform
  in 256 .. max rounded up to 256; then allocate-or-release with probability
  p; then 32 random bits picking the live reservation a release frees,
  multiply-shift, the last live one moved into its place; with nothing live
  an operation allocates).  The bench's 4 GiB sliced pool is modelled by
  the cap on live bytes: an allocation that would take them over --cap is
  dropped (no event; the bench counts a failed reservation, consuming the
  operation the same way).  Until the bench's first failed reservation
  (its pool fragments before it is full: docs/benchmarks.md's figures
  show failures with 0.68 .. 0.98 of the space live) the trace is the
  bench's sequence exactly; after that the two drop different allocations
  and their live sets drift apart.

Output format (what tools/hippo-replay reads): comment lines starting with
`#` (the first names the scenario; the second gives events, peak live bytes
and ids live at the end; a `# made with:` line follows when an option differs
from its default), the header `op,id,size,stream`, then `a,ID,SIZE,STREAM`
(reserve) and `f,ID,,` (free; `f,ID,,S` in two-streams) lines.  Ids are
sequential from 1 and never reused.
"""

import argparse
import math
import signal
import sys

MASK64 = (1 << 64) - 1
BF16 = 2
FP32 = 4
INT32 = 4

SEED_TRAIN = 0x68697070        # "hipp"
SEED_INFER = 0x696E6665        # "infe"
SEED_TWO_STREAMS = 0x73747265  # "stre"


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


class Xoshiro:
    """xoshiro256** seeded by splitmix64: hippo-bench-speed.c's rng, bit for
    bit."""

    def __init__(self, seed):
        sm = Rng(seed)
        self.s = [sm.next() for _ in range(4)]

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK64

    def next(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def unit(self):
        """Uniform in [0, 1): rng_unit()."""
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)


class Trace:
    """Collects events and keeps the live-bytes bookkeeping."""

    def __init__(self):
        self.lines = []
        self.next_id = 1
        self.sizes = {}       # live id -> size
        self.streams = {}     # live id -> stream that reserved it
        self.live = 0
        self.peak = 0
        self.events = 0
        self.cross_frees = 0  # frees following the other stream's work

    def alloc(self, size, stream=0):
        tid = self.next_id
        self.next_id += 1
        self.lines.append("a,%d,%d,%d" % (tid, size, stream))
        self.sizes[tid] = size
        self.streams[tid] = stream
        self.live += size
        self.peak = max(self.peak, self.live)
        self.events += 1
        return tid

    def free(self, tid, by=None):
        """Frees tid; `by`, when given, is the stream whose work the free
        follows, written into the (ignored) stream field."""
        self.live -= self.sizes.pop(tid)
        stream = self.streams.pop(tid)
        if by is None:
            self.lines.append("f,%d,," % tid)
        else:
            self.lines.append("f,%d,,%d" % (tid, by))
            if by != stream:
                self.cross_frees += 1
        self.events += 1

    def temp(self, size, stream=0):
        """A temporary: allocated and freed right away."""
        self.free(self.alloc(size, stream))


# ---- the model -------------------------------------------------------------

def layer_params(m):
    """(name, elements) of one transformer layer's parameters."""
    h, ffn = m.hidden, m.ffn
    return [
        ("ln1.w", h), ("ln1.b", h),
        ("qkv.w", 3 * h * h), ("qkv.b", 3 * h),
        ("out.w", h * h), ("out.b", h),
        ("ln2.w", h), ("ln2.b", h),
        ("fc1.w", ffn * h), ("fc1.b", ffn),
        ("fc2.w", h * ffn), ("fc2.b", h),
    ]


def model_params(m, positions):
    """Every parameter tensor; `positions`: rows of the position table."""
    params = [("embed", m.vocab * m.hidden), ("pos", positions * m.hidden)]
    for layer in range(m.layers):
        params += [("l%d.%s" % (layer, n), e) for n, e in layer_params(m)]
    params += [("lnf.w", m.hidden), ("lnf.b", m.hidden),
               ("head", m.vocab * m.hidden)]
    return params


# ---- train -----------------------------------------------------------------

class Train:
    """The sizes of `train`, from the options."""

    def __init__(self, a):
        self.hidden = a.hidden
        self.heads = a.heads
        self.head_dim = a.hidden // a.heads
        self.ffn = a.ffn
        self.vocab = a.vocab
        self.layers = a.layers
        self.seq = a.seq
        self.micro = a.micro
        self.mb = a.batch // a.micro              # sequences per micro-batch
        self.tokens = self.mb * a.seq
        self.steps = a.steps
        self.odd_temps = a.odd_temps


def misc_temps(t, rng, m, count):
    """Small scalar/reduction temporaries of random size."""
    for _ in range(count):
        if m.odd_temps:
            t.temp(rng.between(1, 65536))
        else:
            t.temp(rng.between(1, 256) * 256)


def forward_layer(t, rng, m):
    """One layer's forward pass; returns the ids saved for backward."""
    tokens, mb, seq = m.tokens, m.mb, m.seq
    act = tokens * m.hidden * BF16
    saved = []
    saved.append(t.alloc(act))                     # ln1 out
    saved.append(t.alloc(tokens * FP32))           # ln1 mean
    saved.append(t.alloc(tokens * FP32))           # ln1 rstd
    saved.append(t.alloc(3 * act))                 # qkv
    head_out = []
    for _ in range(m.heads):
        scores = t.alloc(mb * seq * seq * BF16)
        probs = t.alloc(mb * seq * seq * BF16)
        t.free(scores)
        head_out.append(t.alloc(mb * seq * m.head_dim * BF16))
        saved.append(t.alloc(mb * seq * FP32))     # log-sum-exp of the head
        t.free(probs)
    saved.append(t.alloc(act))                     # context (heads gathered)
    for h in head_out:
        t.free(h)
    proj = t.alloc(act)
    saved.append(t.alloc(act))                     # residual 1
    t.free(proj)
    saved.append(t.alloc(tokens * m.hidden))       # dropout mask (bytes)
    saved.append(t.alloc(act))                     # ln2 out
    saved.append(t.alloc(tokens * FP32))           # ln2 mean
    saved.append(t.alloc(tokens * FP32))           # ln2 rstd
    saved.append(t.alloc(tokens * m.ffn * BF16))   # fc1 out
    saved.append(t.alloc(tokens * m.ffn * BF16))   # gelu out
    fc2 = t.alloc(act)
    saved.append(t.alloc(act))                     # residual 2 (layer out)
    t.free(fc2)
    misc_temps(t, rng, m, rng.between(2, 4))
    return saved


def backward_layer(t, rng, m, saved, grads, first_micro, dx):
    """One layer's backward pass; frees its saved activations in reverse,
    returns the id of the gradient flowing to the layer below."""
    tokens, mb, seq = m.tokens, m.mb, m.seq
    act = tokens * m.hidden * BF16
    params = layer_params(m)

    def grad(index):
        elements = params[index][1]
        if first_micro:
            grads.append(t.alloc(elements * BF16))
        else:
            t.temp(elements * BF16)                # accumulate into grads

    saved = list(saved)
    t.free(saved.pop())                            # residual 2
    d_gelu = t.alloc(tokens * m.ffn * BF16)
    grad(10)                                       # fc2.w
    grad(11)                                       # fc2.b
    t.free(saved.pop())                            # gelu out
    d_fc1 = t.alloc(tokens * m.ffn * BF16)
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
    for _ in range(m.heads):
        scores = t.alloc(mb * seq * seq * BF16)    # recomputed
        probs = t.alloc(mb * seq * seq * BF16)
        t.free(scores)
        d_probs = t.alloc(mb * seq * seq * BF16)
        t.free(probs)
        t.temp(mb * seq * m.head_dim * BF16)       # dq of the head
        t.temp(mb * seq * m.head_dim * BF16)       # dk
        t.temp(mb * seq * m.head_dim * BF16)       # dv
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
    misc_temps(t, rng, m, rng.between(1, 3))
    return d_x


def load_batch(t, rng, m):
    """The loader stream prefetches one micro-batch."""
    staging = t.alloc(rng.between(4, 16) * 256 * 1024, stream=1)
    batch = [t.alloc(m.mb * m.seq * INT32, stream=1),    # token ids
             t.alloc(m.mb * m.seq * INT32, stream=1),    # labels
             t.alloc(m.mb * m.seq, stream=1)]            # attention mask
    t.free(staging)
    return batch


def gen_train(a):
    m = Train(a)
    rng = Rng(a.seed)
    t = Trace()

    # Setup: weights, then the Adam moments.
    params = model_params(m, m.seq)
    weights = []
    for _, elements in params:
        weights.append(t.alloc(elements * BF16))
        if elements >= 1 << 20:
            t.temp(elements * FP32)                # fp32 init buffer
    moments = []
    for _, elements in params:
        moments.append(t.alloc(elements * FP32))   # exp_avg
        moments.append(t.alloc(elements * FP32))   # exp_avg_sq

    act = m.tokens * m.hidden * BF16
    batch = load_batch(t, rng, m)
    for _step in range(m.steps):
        grads = []
        for micro in range(m.micro):
            next_batch = load_batch(t, rng, m)     # prefetch, stream 1
            x = t.alloc(act)                       # embedding out
            layers = [forward_layer(t, rng, m) for _ in range(m.layers)]
            lnf = t.alloc(act)
            logits = t.alloc(m.tokens * m.vocab * BF16)
            loss32 = t.alloc(m.tokens * m.vocab * FP32)
            loss = t.alloc(FP32)
            t.free(loss32)

            # Backward: head, then the layers in reverse.
            d_logits = t.alloc(m.tokens * m.vocab * BF16)
            t.free(logits)
            t.free(loss)
            first = micro == 0
            head_grads = []
            if first:
                head_grads = [t.alloc(m.vocab * m.hidden * BF16),  # head
                              t.alloc(m.hidden * BF16),            # lnf.w
                              t.alloc(m.hidden * BF16)]            # lnf.b
            else:
                t.temp(m.vocab * m.hidden * BF16)
            dx = t.alloc(act)
            t.free(d_logits)
            t.free(lnf)
            layer_grads = []
            for saved in reversed(layers):
                g = []
                dx = backward_layer(t, rng, m, saved, g, first, dx)
                layer_grads.append(g)
            if first:
                embed_grads = [t.alloc(m.vocab * m.hidden * BF16),  # embed
                               t.alloc(m.seq * m.hidden * BF16)]    # pos
                grads = embed_grads + head_grads + \
                    [gid for g in layer_grads for gid in g]
            else:
                t.temp(m.vocab * m.hidden * BF16)
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
        misc_temps(t, rng, m, 8)

    for tid in batch:
        t.free(tid)
    for tid in moments:
        t.free(tid)
    assert len(t.sizes) == len(weights)
    return t, ""


# ---- infer -----------------------------------------------------------------

class Request:
    def __init__(self, arrival, prompt, output):
        self.arrival = arrival
        self.prompt = prompt          # tokens
        self.output = output          # tokens to generate
        self.generated = 0
        self.ctx = 0                  # tokens in the KV cache
        self.blocks = []              # paged: block ids
        self.kv = []                  # concat/double: per layer [k, v]
        self.capacity = 0             # double: tokens the tensors hold


class Infer:
    def __init__(self, a):
        self.a = a
        self.hidden = a.hidden
        self.heads = a.heads
        self.ffn = a.ffn
        self.vocab = a.vocab
        self.layers = a.layers
        self.block_bytes = a.block_tokens * a.layers * 2 * a.hidden * BF16
        self.kv_token = a.hidden * BF16      # K (or V) of one token, layer

    def kv_grow(self, t, req, new_ctx, layer):
        """concat/double: layer's K and V hold new_ctx tokens afterwards."""
        if self.a.kv == "concat":
            cap = new_ctx
        else:
            if new_ctx <= req.capacity:
                return
            cap = max(16, 1 << (new_ctx - 1).bit_length())
            if req.capacity:
                cap = max(cap, 2 * req.capacity)
        old = req.kv[layer] if layer < len(req.kv) else None
        new = [t.alloc(cap * self.kv_token), t.alloc(cap * self.kv_token)]
        if old is None:
            req.kv.append(new)
        else:
            t.free(old[0])                 # after the copy into the new one
            t.free(old[1])
            req.kv[layer] = new
        if self.a.kv == "double" and layer == self.layers - 1:
            req.capacity = cap

    def kv_blocks(self, t, req, new_ctx):
        """paged: blocks for new_ctx tokens, allocated before the pass."""
        need = -(-new_ctx // self.a.block_tokens)
        while len(req.blocks) < need:
            req.blocks.append(t.alloc(self.block_bytes))

    def kv_free(self, t, req):
        for b in req.blocks:
            t.free(b)
        for k, v in req.kv:
            t.free(k)
            t.free(v)
        req.blocks, req.kv = [], []

    def forward(self, t, group, tokens, attn_bytes):
        """A forward pass over `tokens` tokens of the requests in `group`,
        each appending tokens to its KV cache; returns the final hidden."""
        h = self.hidden
        act = tokens * h * BF16
        if self.a.kv == "paged":
            for req, add in group:
                self.kv_blocks(t, req, req.ctx + add)
        x = t.alloc(act)                           # embedding out
        for layer in range(self.layers):
            ln = t.alloc(act)                      # ln1
            qkv = t.alloc(3 * act)
            t.free(ln)
            if self.a.kv != "paged":
                for req, add in group:
                    self.kv_grow(t, req, req.ctx + add, layer)
            scores = t.alloc(attn_bytes)           # scores, softmax
            ctx = t.alloc(act)
            t.free(scores)
            t.free(qkv)
            y = t.alloc(act)                       # out proj + residual
            t.free(ctx)
            t.free(x)
            ln = t.alloc(act)                      # ln2
            fc1 = t.alloc(tokens * self.ffn * BF16)  # fc1 + GELU, fused
            t.free(ln)
            x = t.alloc(act)                       # fc2 + residual
            t.free(fc1)
            t.free(y)
        for req, add in group:
            req.ctx += add
        return x

    def sample(self, t, x, rows):
        """Final norm, fp32 logits of `rows` tokens, the sampled tokens."""
        lnf = t.alloc(rows * self.hidden * BF16)
        t.free(x)
        logits = t.alloc(rows * self.vocab * FP32)
        t.free(lnf)
        probs = t.alloc(rows * self.vocab * FP32)
        t.free(logits)
        tokens = t.alloc(rows * INT32)             # copied to the host
        t.free(probs)
        t.free(tokens)


def gen_infer(a):
    m = Infer(a)
    rng = Rng(a.seed)
    t = Trace()

    for _, elements in model_params(m, a.prompt[1] + a.generate[1]):
        t.alloc(elements * BF16)
    weights = len(t.sizes)

    requests = []
    clock = 0
    for i in range(a.requests):
        if i:
            clock += rng.between(0, 2 * a.arrival_gap)
        requests.append(Request(clock, rng.between(*a.prompt),
                                rng.between(*a.generate)))

    waiting = list(requests)
    running = []
    clock = 0
    steps = 0
    peak_batch = 0
    while waiting or running:
        if not running and waiting[0].arrival > clock:
            clock = waiting[0].arrival             # idle until the next one
        while waiting and waiting[0].arrival <= clock and \
                len(running) < a.max_batch:
            req = waiting.pop(0)
            p = req.prompt
            ids = t.alloc(p * INT32)               # the prompt's token ids
            x = m.forward(t, [(req, p)], p, m.heads * p * p * BF16)
            t.free(ids)
            last = t.alloc(m.hidden * BF16)        # the last token's row
            t.free(x)
            m.sample(t, last, 1)
            req.generated = 1
            running.append(req)
        # One decode step for every running request (one token each).
        live = [r for r in running if r.generated < r.output]
        if live:
            b = len(live)
            peak_batch = max(peak_batch, b)
            attn = m.heads * sum(r.ctx + 1 for r in live) * FP32
            x = m.forward(t, [(r, 1) for r in live], b, attn)
            m.sample(t, x, b)
            for r in live:
                r.generated += 1
            steps += 1
        for r in [r for r in running if r.generated >= r.output]:
            m.kv_free(t, r)
            running.remove(r)
        clock += 1
    assert len(t.sizes) == weights
    return t, "%d requests, %d decode steps, batch up to %d, kv %s" % (
        a.requests, steps, peak_batch, a.kv)


# ---- two-streams -----------------------------------------------------------

COMPUTE, COPY = 0, 1


class TwoStreams:
    def __init__(self, a):
        self.a = a
        self.hidden = a.hidden
        self.heads = a.heads
        self.ffn = a.ffn
        self.vocab = a.vocab
        self.layers = a.layers
        self.layer_bytes = sum(e for _, e in layer_params(a)) * BF16


def gen_two_streams(a):
    m = TwoStreams(a)
    rng = Rng(a.seed)
    t = Trace()
    L = m.layers
    h = m.hidden

    # Resident on stream 0: embedding, positions, head, final norm.
    for elements in (m.vocab * h, a.seq[1] * h, m.vocab * h, h, h):
        t.alloc(elements * BF16)
    resident = len(t.sizes)

    def gather(layer):
        """Stream 1 gathers a layer's weights into one flat buffer."""
        return t.alloc(m.layer_bytes, COPY)

    for _step in range(a.steps):
        seq = rng.between(*a.seq)
        tokens = a.batch * seq
        act = tokens * h * BF16
        staging = t.alloc(rng.between(4, 16) * 256 * 1024 + tokens * INT32,
                          COPY)
        ids = t.alloc(tokens * INT32, COPY)
        labels = t.alloc(tokens * INT32, COPY)
        t.free(staging, COPY)

        # Forward: weights gathered --prefetch layers ahead, checkpoints
        # offloaded one layer behind.
        weights = {}
        for layer in range(min(a.prefetch, L)):
            weights[layer] = gather(layer)
        x = t.alloc(act)                                   # embedding out
        t.free(ids, COMPUTE)
        offloading = None
        for layer in range(L):
            if layer + a.prefetch < L:
                weights[layer + a.prefetch] = gather(layer + a.prefetch)
            ln = t.alloc(act)
            qkv = t.alloc(3 * act)
            t.free(ln, COMPUTE)
            scores = t.alloc(a.batch * m.heads * seq * seq * FP32)
            ctx = t.alloc(act)
            t.free(scores, COMPUTE)
            t.free(qkv, COMPUTE)
            y = t.alloc(act)
            t.free(ctx, COMPUTE)
            ln = t.alloc(act)
            fc1 = t.alloc(tokens * m.ffn * BF16)
            t.free(ln, COMPUTE)
            out = t.alloc(act)
            t.free(fc1, COMPUTE)
            t.free(y, COMPUTE)
            t.free(weights.pop(layer), COMPUTE)
            if offloading is not None:
                t.free(offloading, COPY)                   # copied out
            offloading = x                                 # the checkpoint
            x = out
        t.free(offloading, COPY)

        # Head and loss.
        n = t.alloc(act)
        logits = t.alloc(tokens * m.vocab * FP32)
        t.free(n, COMPUTE)
        d_logits = t.alloc(tokens * m.vocab * BF16)
        t.free(logits, COMPUTE)
        t.free(labels, COMPUTE)
        d_head = t.alloc(m.vocab * h * BF16 + 2 * h * BF16)
        dx = t.alloc(act)
        t.free(d_logits, COMPUTE)
        t.free(x, COMPUTE)
        offloading = [d_head]

        # Backward: weights and checkpoints brought back in reverse; the
        # layer's gradient copied out one layer later.
        for layer in range(L - 1, max(L - 1 - a.prefetch, -1), -1):
            weights[layer] = gather(layer)
        for layer in range(L - 1, -1, -1):
            ahead = layer - a.prefetch
            if ahead >= 0:
                weights[ahead] = gather(ahead)
            ckpt = t.alloc(act, COPY)                      # from the host
            saved = []
            ln = t.alloc(act)                              # recompute
            saved.append(ln)
            saved.append(t.alloc(3 * act))                 # qkv
            scores = t.alloc(a.batch * m.heads * seq * seq * FP32)
            saved.append(t.alloc(act))                     # ctx
            t.free(scores, COMPUTE)
            saved.append(t.alloc(act))                     # ln2 out
            saved.append(t.alloc(tokens * m.ffn * BF16))   # fc1 + GELU
            grad = t.alloc(m.layer_bytes)                  # flat gradient
            d = t.alloc(tokens * m.ffn * BF16)
            t.free(saved.pop(), COMPUTE)                   # fc1 out
            d2 = t.alloc(act)
            t.free(d, COMPUTE)
            t.free(saved.pop(), COMPUTE)                   # ln2 out
            t.free(saved.pop(), COMPUTE)                   # ctx
            d = t.alloc(3 * act)
            scores = t.alloc(a.batch * m.heads * seq * seq * FP32)
            t.free(scores, COMPUTE)
            t.free(saved.pop(), COMPUTE)                   # qkv
            t.free(saved.pop(), COMPUTE)                   # ln1 out
            t.free(d2, COMPUTE)
            new_dx = t.alloc(act)
            t.free(d, COMPUTE)
            t.free(dx, COMPUTE)
            t.free(ckpt, COMPUTE)
            t.free(weights.pop(layer), COMPUTE)
            for g in offloading:
                t.free(g, COPY)                            # copied out
            offloading = [grad]
            dx = new_dx
        d_embed = t.alloc(m.vocab * h * BF16 + a.seq[1] * h * BF16)
        t.free(dx, COMPUTE)
        for g in offloading + [d_embed]:
            t.free(g, COPY)
        assert not weights

    assert len(t.sizes) == resident
    return t, "%d cross-stream frees" % t.cross_frees


# ---- random (bench workload A) ---------------------------------------------

def gen_random(a):
    rng = Xoshiro(a.seed)
    t = Trace()
    live = []                                      # ids, as the bench's array
    dropped = 0
    e0, e1 = math.log2(256.0), math.log2(float(a.max_size))
    exp2 = getattr(math, "exp2", lambda x: 2.0 ** x)
    for _ in range(a.ops):
        if a.sizes == "log2":
            s = math.ceil(exp2(e0 + rng.unit() * (e1 - e0)))
            s = min(max(s, 256), a.max_size)
            size = (s + 255) // 256 * 256
        else:
            size = 256 * (1 + rng.next() % (a.max_size // 256))
        alloc = rng.unit() < a.p
        r32 = rng.next() >> 32
        if not live or alloc:
            if t.live + size > a.cap:
                dropped += 1
            else:
                live.append(t.alloc(size))
        else:
            k = (r32 * len(live)) >> 32
            t.free(live[k])
            live[k] = live[-1]
            live.pop()
    return t, "%d allocations dropped at the %d-byte cap" % (dropped, a.cap)


# ---- the command line ------------------------------------------------------

def size_arg(text):
    """BYTES with an optional K, M or G suffix (binary)."""
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = text.strip().lower()
    mult = 1
    if s and s[-1] in scale:
        mult = scale[s[-1]]
        s = s[:-1]
    try:
        value = int(s, 0) * mult
    except ValueError:
        raise argparse.ArgumentTypeError("not a size: %r" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("not a positive size: %r" % text)
    return value


def count_arg(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1: %r" % text)
    return value


def range_arg(text):
    """LO:HI, or N for N:N."""
    lo, colon, hi = text.partition(":")
    try:
        lo = int(lo, 0)
        hi = int(hi, 0) if colon else lo  # "3:" is no range: int('') fails
    except ValueError:
        raise argparse.ArgumentTypeError("not a range LO:HI: %r" % text)
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError("need 1 <= LO <= HI: %r" % text)
    return (lo, hi)


def seed_arg(text):
    try:
        return int(text, 0) & MASK64
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % text)


def prob_arg(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("not in [0, 1]: %r" % text)
    return value


def parser():
    top = argparse.ArgumentParser(
        prog="gen-trace.py",
        description="Synthetic device-allocation traces for hippo-replay "
        "(the module docstring of traces/gen-trace.py and README describe "
        "each scenario).",
        epilog="gen-trace.py SCENARIO --help lists a scenario's options.")
    sub = top.add_subparsers(dest="scenario", metavar="SCENARIO")
    sub.required = True

    def common(p, seed):
        p.add_argument("-o", "--output", metavar="FILE", default="-",
                       help="write the trace here (default: stdout)")
        p.add_argument("--seed", type=seed_arg, default=seed,
                       help="random seed (default: %s)" %
                       ("%#x" % seed if seed is not None else
                        "0x41 + 2 x log2 + (p > 0.55), the bench's"))

    def model(p):
        g = p.add_argument_group("model")
        g.add_argument("--layers", type=count_arg, default=8,
                       help="transformer layers (default 8)")
        g.add_argument("--hidden", type=count_arg, default=1024,
                       help="model width (default 1024)")
        g.add_argument("--heads", type=count_arg, default=16,
                       help="attention heads (divide --hidden; default 16)")
        g.add_argument("--ffn", type=count_arg, default=None,
                       help="MLP width (default 4 x hidden)")
        g.add_argument("--vocab", type=count_arg, default=8192,
                       help="vocabulary (default 8192)")

    p = sub.add_parser(
        "train", help="training steps of a transformer (streams 0 and 1)",
        description="Training steps of a decoder-only transformer: weights "
        "and Adam moments once, activations freed in reverse in the "
        "backward pass, gradients accumulated over micro-batches, "
        "optimizer temporaries, small odd-sized temporaries, a loader on "
        "stream 1.  The defaults make the bundled train.csv.")
    common(p, SEED_TRAIN)
    model(p)
    p.add_argument("--seq", type=count_arg, default=512,
                   help="sequence length (default 512)")
    p.add_argument("--batch", type=count_arg, default=8,
                   help="sequences per step (default 8)")
    p.add_argument("--micro", type=count_arg, default=4,
                   help="micro-batches per step, divides --batch "
                   "(default 4)")
    p.add_argument("--steps", type=count_arg, default=4,
                   help="optimizer steps (default 4)")
    p.add_argument("--odd-temps", action="store_true",
                   help="small temporaries of any byte count 1..65536 "
                   "instead of 256-byte multiples")
    p.set_defaults(gen=gen_train)

    p = sub.add_parser(
        "infer", help="serving requests with a growing KV cache (stream 0)",
        description="Inference: weights once, then requests arriving and "
        "finishing interleaved (continuous batching), each a prompt "
        "prefill then token-by-token decode with a growing KV cache and "
        "per-token temporaries.  The defaults make the bundled infer.csv.")
    common(p, SEED_INFER)
    model(p)
    p.add_argument("--requests", type=count_arg, default=16,
                   help="requests served (default 16)")
    p.add_argument("--max-batch", type=count_arg, default=8,
                   help="requests decoded together at most (default 8)")
    p.add_argument("--prompt", type=range_arg, default=(32, 512),
                   metavar="LO:HI", help="prompt tokens (default 32:512)")
    p.add_argument("--generate", type=range_arg, default=(16, 256),
                   metavar="LO:HI",
                   help="tokens generated per request (default 16:256)")
    p.add_argument("--arrival-gap", type=int, default=6, metavar="STEPS",
                   help="mean decode steps between arrivals, uniform in "
                   "0..2 x STEPS (default 6)")
    p.add_argument("--kv", choices=("paged", "concat", "double"),
                   default="paged",
                   help="KV cache growth: paged blocks (default), concat "
                   "(reallocated every token), double (capacity doubled)")
    p.add_argument("--block-tokens", type=count_arg, default=16,
                   help="tokens per KV block with --kv paged (default 16)")
    p.set_defaults(gen=gen_infer)

    p = sub.add_parser(
        "two-streams",
        help="training with weights streamed and offload (streams 0, 1)",
        description="Compute on stream 0, copies on stream 1: layer "
        "weights gathered ahead by stream 1 and freed by stream 0, "
        "checkpoints and gradients allocated by stream 0 and freed after "
        "stream 1 copied them out, checkpoints brought back by stream 1.  "
        "The defaults make the bundled two-streams.csv.")
    common(p, SEED_TWO_STREAMS)
    model(p)
    p.add_argument("--seq", type=range_arg, default=(256, 512),
                   metavar="LO:HI",
                   help="sequence length per step (default 256:512)")
    p.add_argument("--batch", type=count_arg, default=4,
                   help="sequences per step (default 4)")
    p.add_argument("--steps", type=count_arg, default=16,
                   help="training steps (default 16)")
    p.add_argument("--prefetch", type=count_arg, default=2,
                   help="layers whose weights stream 1 gathers ahead "
                   "(default 2)")
    p.set_defaults(gen=gen_two_streams)

    p = sub.add_parser(
        "random", help="bench/hippo-bench's workload A (stream 0)",
        description="Workload A of bench/hippo-bench-speed.c: allocate with "
        "probability p (always when nothing is live), else free a "
        "uniformly chosen live reservation; sizes in 256-byte steps, "
        "uniform in bytes or in log2; allocations over the cap on live "
        "bytes are dropped.  `random --ops 40000` makes the bundled "
        "random.csv.")
    common(p, None)
    p.add_argument("--sizes", choices=("uniform", "log2"), default="uniform",
                   help="uniform in bytes (default) or in log2")
    p.add_argument("--p", type=prob_arg, default=0.5,
                   help="allocation probability (default 0.5; the bench "
                   "runs 0.5 and 0.6)")
    p.add_argument("--ops", type=count_arg, default=1000000,
                   help="operations (default 1000000, as the bench)")
    p.add_argument("--max-size", type=size_arg, default=64 << 20,
                   help="largest request, a multiple of 256 (default 64M)")
    p.add_argument("--cap", type=size_arg, default=4 << 30,
                   help="cap on live bytes (default 4G, the bench's space)")
    p.set_defaults(gen=gen_random)
    return top


def bench_seed(a):
    """The seed hippo-bench gives workload A's case (sizes, p)."""
    return 0x41 + 2 * (a.sizes == "log2") + (a.p > 0.55)


def made_with(p, a):
    """`gen-trace.py SCENARIO --opt value...` for the options of subparser
    p that differ from their defaults, or None."""
    words = []
    for act in p._actions:
        if not act.option_strings or act.dest in ("help", "output"):
            continue
        value = getattr(a, act.dest)
        default = act.default
        if act.dest == "ffn":
            default = 4 * a.hidden
        elif act.dest == "seed" and default is None:
            default = bench_seed(a)
        if value == default:
            continue
        opt = act.option_strings[-1]
        if isinstance(act, argparse._StoreTrueAction):
            words.append(opt)
        elif isinstance(value, tuple):
            words.append("%s %d:%d" % (opt, value[0], value[1]))
        elif act.dest == "seed":
            words.append("%s %#x" % (opt, value))
        else:
            words.append("%s %s" % (opt, value))
    if not words:
        return None
    return "gen-trace.py %s %s" % (a.scenario, " ".join(words))


def check(p, a):
    """Option checks argparse cannot make; p.error exits with status 2."""
    die = p.error
    if hasattr(a, "hidden"):
        if a.ffn is None:
            a.ffn = 4 * a.hidden
        if a.hidden % a.heads:
            die("--heads %d does not divide --hidden %d" % (a.heads, a.hidden))
    if a.scenario == "train" and a.batch % a.micro:
        die("--micro %d does not divide --batch %d" % (a.micro, a.batch))
    if a.scenario == "infer" and a.arrival_gap < 0:
        die("--arrival-gap must be >= 0")
    if a.scenario == "random":
        if a.max_size % 256 or a.max_size < 256:
            die("--max-size must be a multiple of 256")
        if a.cap < a.max_size:
            die("--cap must hold the largest request (--max-size)")
        if a.seed is None:
            a.seed = bench_seed(a)


def main(argv):
    if hasattr(signal, "SIGPIPE"):             # `| head` ends us quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    top = parser()
    a = top.parse_args(argv[1:])
    sub = next(x for x in top._actions
               if isinstance(x, argparse._SubParsersAction))
    check(sub.choices[a.scenario], a)
    how = made_with(sub.choices[a.scenario], a)

    # the file first: a path that cannot be written fails before the work
    try:
        out = sys.stdout if a.output == "-" else \
            open(a.output, "w", newline="\n")
    except OSError as e:
        return cannot_write(a.output, e)
    t, extra = a.gen(a)
    name = a.scenario + ".csv"
    try:
        write_trace(out, name, t, how)
    except OSError as e:  # a full disk, a closed pipe
        return cannot_write(a.output, e)
    where = "stdout" if a.output == "-" else a.output
    sys.stderr.write("%s: %d events, peak live bytes %d (%.1f MiB)%s\n"
                     % (where, t.events, t.peak, t.peak / (1 << 20),
                        "; " + extra if extra else ""))
    return 0


def cannot_write(path, e):
    """The one line for an output that cannot be written; exit status 1."""
    sys.stderr.write("gen-trace.py: cannot write %s: %s\n"
                     % (path, e.strerror or e))
    return 1


def write_trace(out, name, t, how):
    """The trace's text into out, which is closed (stdout: flushed)."""
    try:
        out.write("# %s -- generated by traces/gen-trace.py; do not "
                  "edit, re-run the script.\n" % name)
        out.write("# %d events, peak live bytes %d, %d ids live at the end.\n"
                  % (t.events, t.peak, len(t.sizes)))
        if how:
            out.write("# made with: %s\n" % how)
        out.write("op,id,size,stream\n")
        out.write("\n".join(t.lines))
        if t.lines:
            out.write("\n")
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
