#!/usr/bin/env python3
"""Generate ONNX Runtime parity cases for the attention kernels.

Writes one ONNX backend-test directory per case into OUT_DIR (a build folder, never
committed):

    OUT_DIR/<case>/model.onnx
    OUT_DIR/<case>/test_data_set_0/input_<i>.pb    (graph inputs, in order)
    OUT_DIR/<case>/test_data_set_0/output_<i>.pb   (ONNX Runtime's outputs)

Cases cover com.microsoft GroupQueryAttention (first prompt, right-padded batches,
chunked prefill, decode, a KV buffer whose capacity exceeds the total length, packed
QKV, rotary with halves/interleaved/partial dims and position ids, local window,
softcap, smooth softmax, head sink, attention bias, qk_output 1/2, causal=0, head sizes
8..256 including 80 and 96, float32 and float16), ONNX Attention (opsets 23 and 24) and
both RotaryEmbedding ops. Inputs are fresh random non-zero numbers from a seeded
generator, so a run is reproducible.

For a KV buffer with spare capacity (total_sequence_length <= past length) the expected
present_key/value are those of ONNX Runtime's non-shared path (rows past each batch
row's total length are zero), which is what a runtime that does not alias the caller's
buffer must produce. The runner in run_attention_cases.py also checks the in-place
(shared) route against the valid rows.

Usage: make_attention_cases.py OUT_DIR [--seed N] [--only SUBSTRING]
Needs numpy, onnx and onnxruntime (CPU).
"""
import argparse
import os
import shutil
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover - reported to the caller
    print(f"make_attention_cases: missing module: {exc}", file=sys.stderr)
    sys.exit(77)

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
NP = {F32: np.float32, F16: np.float16}


class Case:
    """One model with one data set."""

    def __init__(self, name, domain, op, opset, attrs, inputs, outputs, elem):
        self.name = name
        self.domain = domain
        self.op = op
        self.opset = opset
        self.attrs = attrs
        self.inputs = inputs  # list of (name, array or None); None = absent ('')
        self.outputs = outputs  # list of output names ('' = absent)
        self.elem = elem


def rng_for(seed, name):
    h = 0
    for ch in name:
        h = (h * 131 + ord(ch)) % (1 << 31)
    return np.random.default_rng((seed, h))


def rnd(rng, shape, dtype):
    # Non-zero: a standard normal plus a small offset away from 0.
    a = rng.standard_normal(shape)
    a = np.where(np.abs(a) < 1e-3, 0.5, a)
    return a.astype(dtype)


def proto_type(arr):
    return helper.np_dtype_to_tensor_dtype(arr.dtype)


def build_model(case):
    node_inputs = [n if a is not None else "" for n, a in case.inputs]
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    node = helper.make_node(case.op, node_inputs, case.outputs, domain=case.domain, **case.attrs)
    g_inputs = [helper.make_tensor_value_info(n, proto_type(a), list(a.shape))
                for n, a in case.inputs if a is not None]
    g_outputs = [helper.make_tensor_value_info(o, case.elem, None) for o in case.outputs if o]
    graph = helper.make_graph([node], case.name, g_inputs, g_outputs)
    opsets = [helper.make_opsetid("", case.opset if case.domain == "" else 21)]
    if case.domain:
        opsets.append(helper.make_opsetid(case.domain, case.opset))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="onyx-parity")
    model.ir_version = 10
    return model


def write_case(case, out_dir):
    model = build_model(case)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in case.inputs if a is not None}
    names = [o for o in case.outputs if o]
    results = sess.run(names, feeds)
    d = os.path.join(out_dir, case.name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    i = 0
    for n, a in case.inputs:
        if a is None:
            continue
        t = numpy_helper.from_array(np.array(a, order="C", copy=True), n)
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
        i += 1
    for i, (n, r) in enumerate(zip(names, results)):
        t = numpy_helper.from_array(np.array(r, order="C", copy=True), n)
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    return d


# ------------------------------------------------------------------ GroupQueryAttention

def gqa(name, seed, *, B=1, S=1, nq=4, nkv=2, H=64, past=0, seqlens=None, total=None,
        elem=F32, packed=False, rotary=None, interleaved=0, pos_ids=False, window=-1,
        softcap=0.0, smooth=0, sink=False, bias=False, qk=0, scale=None, causal=None):
    """A GroupQueryAttention case. seqlens: total tokens per batch row (not minus one)."""
    rng = rng_for(seed, name)
    dt = NP[elem]
    if total is None:
        total = past + S
    if seqlens is None:
        seqlens = [total] * B
    first = S == total
    attrs = dict(num_heads=nq, kv_num_heads=nkv)
    if rotary is not None:
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
    if window > 0:
        attrs["local_window_size"] = window
    if softcap:
        attrs["softcap"] = float(softcap)
    if smooth:
        attrs["smooth_softmax"] = 1
    if qk:
        attrs["qk_output"] = qk
    if scale is not None:
        attrs["scale"] = float(scale)
    if causal is not None:
        attrs["causal"] = causal
    if packed:
        query = rnd(rng, (B, S, (nq + 2 * nkv) * H), dt)
        key = value = None
    else:
        query = rnd(rng, (B, S, nq * H), dt)
        key = rnd(rng, (B, S, nkv * H), dt)
        value = rnd(rng, (B, S, nkv * H), dt)
    pk = rnd(rng, (B, nkv, past, H), dt)
    pv = rnd(rng, (B, nkv, past, H), dt)
    sl = np.array([t - 1 for t in seqlens], np.int32)
    ts = np.array(total, np.int32)
    cos = sin = pos = None
    if rotary is not None:
        max_pos = max(64, total + 8)
        ang = rng.uniform(0, 2 * np.pi, (max_pos, rotary // 2))
        cos = np.cos(ang).astype(dt)
        sin = np.sin(ang).astype(dt)
        if pos_ids:
            if first:
                pos = np.tile(np.arange(S, dtype=np.int64) + 3, (B, 1))
            else:
                pos = np.array([[t - S + s for s in range(S)] for t in seqlens], np.int64) + 2
    ab = rnd(rng, (1, nq, S, total), dt) if bias else None
    hs = rnd(rng, (nq,), dt) if sink else None
    inputs = [("query", query), ("key", key), ("value", value), ("past_key", pk),
              ("past_value", pv), ("seqlens_k", sl), ("total_sequence_length", ts),
              ("cos_cache", cos), ("sin_cache", sin), ("position_ids", pos),
              ("attention_bias", ab), ("head_sink", hs)]
    outputs = ["output", "present_key", "present_value"] + (["output_qk"] if qk else [])
    return Case(name, "com.microsoft", "GroupQueryAttention", 1, attrs, inputs, outputs, elem)


def gqa_cases(seed):
    c = []
    # First prompt.
    c.append(gqa("gqa_prompt_f32_h64", seed, S=8, H=64))
    c.append(gqa("gqa_prompt_b2_padded_f32_h32", seed, B=2, S=6, H=32, seqlens=[6, 3]))
    c.append(gqa("gqa_prompt_rotary_f32_h64", seed, S=7, H=64, rotary=64))
    c.append(gqa("gqa_prompt_rotary_posids_interleaved_f32_h32", seed, B=2, S=5, H=32,
                 rotary=32, interleaved=1, pos_ids=True))
    c.append(gqa("gqa_prompt_window_f32_h16", seed, S=16, H=16, window=5))
    c.append(gqa("gqa_prompt_packed_f32_h32", seed, S=6, H=32, packed=True))
    c.append(gqa("gqa_prompt_packed_rotary_f32_h48", seed, S=4, H=48, packed=True, rotary=32))
    c.append(gqa("gqa_prompt_h8_f32", seed, S=5, nq=6, nkv=3, H=8))
    c.append(gqa("gqa_prompt_noncausal_f32_h16", seed, S=5, H=16, causal=0))
    c.append(gqa("gqa_prompt_f16_h64", seed, S=8, H=64, elem=F16))
    c.append(gqa("gqa_prompt_rotary_f16_h96", seed, S=5, H=96, rotary=96, elem=F16))
    # Decode.
    c.append(gqa("gqa_decode_f32_h128", seed, nq=8, nkv=2, H=128, past=31))
    c.append(gqa("gqa_decode_b3_ragged_f32_h80", seed, B=3, H=80, past=20, seqlens=[9, 21, 14]))
    c.append(gqa("gqa_decode_rotary_interleaved_posids_f32_h128", seed, B=2, H=128, past=12,
                 rotary=128, interleaved=1, pos_ids=True, seqlens=[13, 8]))
    c.append(gqa("gqa_decode_rotary_partial_f32_h64", seed, H=64, past=10, rotary=32))
    c.append(gqa("gqa_decode_capacity_b2_f32_h96", seed, B=2, H=96, past=24, total=20,
                 seqlens=[12, 20]))
    c.append(gqa("gqa_decode_window_f32_h32", seed, H=32, past=40, window=8))
    c.append(gqa("gqa_decode_softcap_f32_h64", seed, H=64, past=9, softcap=1.5))
    c.append(gqa("gqa_decode_smooth_f32_h32", seed, H=32, past=7, smooth=1))
    c.append(gqa("gqa_decode_sink_f32_h32", seed, nq=8, nkv=2, H=32, past=7, sink=True))
    c.append(gqa("gqa_decode_mqa_f32_h64", seed, nq=8, nkv=1, H=64, past=16))
    c.append(gqa("gqa_decode_h256_f32", seed, nq=4, nkv=1, H=256, past=15))
    c.append(gqa("gqa_decode_packed_f32_h64", seed, B=2, H=64, past=6, packed=True,
                 seqlens=[7, 5]))
    c.append(gqa("gqa_decode_scale_f32_h16", seed, H=16, past=5, scale=0.3))
    c.append(gqa("gqa_decode_f16_h128", seed, nq=8, nkv=2, H=128, past=33, rotary=128,
                 elem=F16))
    c.append(gqa("gqa_decode_capacity_f16_h64", seed, B=2, H=64, past=16, total=12,
                 seqlens=[12, 5], elem=F16))
    c.append(gqa("gqa_decode_packed_f16_h80", seed, H=80, past=4, packed=True, elem=F16))
    # Chunked prefill (ONNX Runtime takes batch 1 here).
    c.append(gqa("gqa_chunk_f32_h64", seed, S=5, H=64, past=7))
    c.append(gqa("gqa_chunk_rotary_window_f32_h32", seed, S=4, H=32, past=9, rotary=32,
                 window=6))
    c.append(gqa("gqa_chunk_capacity_f32_h32", seed, S=4, H=32, past=32, total=20))
    c.append(gqa("gqa_chunk_f16_h48", seed, S=3, H=48, past=5, elem=F16))
    # Extras: attention bias and scores outputs.
    c.append(gqa("gqa_chunk_bias_f32_h16", seed, S=3, H=16, past=4, bias=True))
    c.append(gqa("gqa_chunk_qk1_softcap_f32_h16", seed, S=3, H=16, past=4, qk=1, softcap=2.0,
                 bias=True))
    c.append(gqa("gqa_prompt_qk2_window_f32_h16", seed, S=6, H=16, qk=2, window=3))
    # Long rows (split-K when the runner uses threads) and many row blocks.
    c.append(gqa("gqa_decode_long_f32_h64", seed, nq=4, nkv=1, H=64, past=700, rotary=64))
    c.append(gqa("gqa_decode_long_capacity_f16_h32", seed, B=2, nq=4, nkv=1, H=32, past=640,
                 total=600, seqlens=[600, 577], elem=F16))
    c.append(gqa("gqa_prompt_long_f32_h32", seed, S=40, H=32, rotary=32, window=17))
    return c


# ------------------------------------------------------------------ ONNX Attention

def attention(name, seed, *, opset=23, B=2, nq=4, nkv=2, sq=3, skv=5, hk=16, hv=None, past=0,
              four_d=True, elem=F32, mask=None, causal=0, softcap=0.0, scale=None, qk_mode=None,
              nonpad=None):
    rng = rng_for(seed, name)
    dt = NP[elem]
    hv = hk if hv is None else hv
    attrs = {}
    if causal:
        attrs["is_causal"] = 1
    if softcap:
        attrs["softcap"] = float(softcap)
    if scale is not None:
        attrs["scale"] = float(scale)
    if qk_mode is not None:
        attrs["qk_matmul_output_mode"] = qk_mode
    if four_d:
        q = rnd(rng, (B, nq, sq, hk), dt)
        k = rnd(rng, (B, nkv, skv, hk), dt)
        v = rnd(rng, (B, nkv, skv, hv), dt)
    else:
        attrs.update(q_num_heads=nq, kv_num_heads=nkv)
        q = rnd(rng, (B, sq, nq * hk), dt)
        k = rnd(rng, (B, skv, nkv * hk), dt)
        v = rnd(rng, (B, skv, nkv * hv), dt)
    total = past + skv
    m = None
    if mask == "bool":
        m = rng.random((sq, total)) > 0.3
        m[:, 0] = True
    elif mask == "float":
        m = rnd(rng, (B, 1, sq, total), dt)
    elif mask == "float_heads":
        m = rnd(rng, (1, nq, sq, total), dt)
    pk = pv = None
    if past:
        pk = rnd(rng, (B, nkv, past, hk), dt)
        pv = rnd(rng, (B, nkv, past, hv), dt)
    npd = None
    if nonpad is not None:
        npd = np.array(nonpad, np.int64)
    inputs = [("Q", q), ("K", k), ("V", v), ("attn_mask", m), ("past_key", pk),
              ("past_value", pv)]
    if opset >= 24:
        inputs.append(("nonpad_kv_seqlen", npd))
    outputs = ["Y", "present_key" if past else "", "present_value" if past else ""]
    if qk_mode is not None:
        outputs.append("qk_matmul_output")
    while outputs and outputs[-1] == "":
        outputs.pop()
    return Case(name, "", "Attention", opset, attrs, inputs, outputs, elem)


def attention_cases(seed):
    c = []
    c.append(attention("att_4d_f32", seed))
    c.append(attention("att_3d_gqa_bool_mask_f32", seed, four_d=False, nq=6, nkv=2, mask="bool"))
    c.append(attention("att_4d_causal_past_f32", seed, sq=3, skv=3, past=5, causal=1))
    c.append(attention("att_4d_float_mask_softcap_qk1_f32", seed, mask="float", softcap=2.0,
                       qk_mode=1))
    c.append(attention("att_4d_diff_hv_qk3_f32", seed, hk=16, hv=24, mask="float_heads",
                       qk_mode=3))
    c.append(attention("att_3d_decode_past_f32_h64", seed, four_d=False, sq=1, skv=1, past=20,
                       hk=64, nq=8, nkv=2))
    c.append(attention("att_4d_decode_past_f16_h128", seed, sq=1, skv=1, past=12, hk=128,
                       elem=F16))
    c.append(attention("att_4d_scaled_qk0_f32", seed, scale=0.2, qk_mode=0))
    c.append(attention("att_4d_decode_long_causal_f32", seed, B=1, nq=2, nkv=1, sq=1, skv=1,
                       past=600, hk=32, causal=1))
    c.append(attention("att_24_nonpad_causal_f32", seed, opset=24, B=2, sq=4, skv=9,
                       nonpad=[9, 6], causal=1))
    return c


# ------------------------------------------------------------------ RotaryEmbedding

def rotary(name, seed, *, ms=False, B=2, N=3, S=4, H=16, three_d=False, rot=0, interleaved=0,
           pos="ids", elem=F32):
    rng = rng_for(seed, name)
    dt = NP[elem]
    attrs = {}
    if interleaved:
        attrs["interleaved"] = 1
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if three_d or rot:
        attrs["num_heads"] = N
    half = (rot or H) // 2
    x = rnd(rng, (B, S, N * H) if three_d else (B, N, S, H), dt)
    max_pos = 32
    if pos == "none":
        ang = rng.uniform(0, 6.3, (B, S, half))
        p = None
    else:
        ang = rng.uniform(0, 6.3, (max_pos, half))
        if pos == "scalar":
            p = np.array([5], np.int64)
        else:
            p = rng.integers(0, max_pos, (B, S)).astype(np.int64)
    cos = np.cos(ang).astype(dt)
    sin = np.sin(ang).astype(dt)
    if ms:
        inputs = [("input", x), ("position_ids", p), ("cos_cache", cos), ("sin_cache", sin)]
        return Case(name, "com.microsoft", "RotaryEmbedding", 1, attrs, inputs, ["output"], elem)
    inputs = [("input", x), ("cos_cache", cos), ("sin_cache", sin), ("position_ids", p)]
    return Case(name, "", "RotaryEmbedding", 23, attrs, inputs, ["output"], elem)


def rotary_cases(seed):
    c = []
    c.append(rotary("rope_4d_f32", seed))
    c.append(rotary("rope_3d_interleaved_f32", seed, three_d=True, interleaved=1))
    c.append(rotary("rope_nopos_partial_f32", seed, rot=8, pos="none"))
    c.append(rotary("rope_4d_f16", seed, elem=F16, H=32))
    c.append(rotary("msrope_3d_f32", seed, ms=True, three_d=True))
    c.append(rotary("msrope_3d_scalar_pos_interleaved_f32", seed, ms=True, three_d=True,
                    interleaved=1, pos="scalar"))
    c.append(rotary("msrope_3d_partial_f16", seed, ms=True, three_d=True, rot=8, elem=F16))
    return c


def all_cases(seed):
    return gqa_cases(seed) + attention_cases(seed) + rotary_cases(seed)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--only", default="", help="generate the cases whose name contains this")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    ok = failed = 0
    for case in all_cases(args.seed):
        if args.only and args.only not in case.name:
            continue
        try:
            write_case(case, args.out_dir)
            ok += 1
        except Exception as exc:  # ONNX Runtime refused the case: report, keep going
            failed += 1
            print(f"  {case.name}: ONNX Runtime failed: {str(exc).splitlines()[0][:200]}",
                  file=sys.stderr)
    total = 0
    for root, _, files in os.walk(args.out_dir):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"make_attention_cases: {ok} cases in {args.out_dir} ({total / 1e6:.2f} MB)"
          + (f", {failed} refused by ONNX Runtime" if failed else ""))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
