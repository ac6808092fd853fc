"""Builds decoder-only transformer graphs in the layout ONNX Runtime GenAI exports,
by hand with onnx.helper. Shared by export_genai.py (the trained tiny model) and
make_random_decoder.py (benchmark-sized models with random weights).

Graph interface (B = batch, S = new tokens, P = past length, T = P + S):
  inputs   input_ids (B, S) int64, attention_mask (B, T) int64,
           past_key_values.{i}.key / .value (B, Nkv, P, H) float32
  outputs  logits (B, S, vocab) float32, present.{i}.key / .value (B, Nkv, T, H) float32

Body:
  seqlens_k             = Cast<int32>(ReduceSum(attention_mask, axes=[1]) - 1)
  total_sequence_length = Cast<int32>(Gather(Shape(attention_mask), 1))
  x = Gather(embed_tokens, input_ids)
  per layer i:
    norm      SimplifiedLayerNormalization (layer 0) or com.microsoft
              SkipSimplifiedLayerNormalization(prev MLP out, residual) whose output 3 is
              the new residual (norm="skip", as GenAI does), or plain Add +
              SimplifiedLayerNormalization (norm="plain")
    q, k, v   MatMul (+ Add bias when qkv_bias); packed_qkv: one MatMul, GQA key/value empty
    attention com.microsoft GroupQueryAttention(do_rotary=1, cos_cache, sin_cache)
    o_proj    MatMul, then SkipSimplifiedLayerNormalization (or Add + norm)
    MLP       MatMul gate, MatMul up, Sigmoid, Mul, Mul, MatMul down
  final norm, lm_head MatMul -> logits

Weights are named as below; MatMul weights are (in, out).
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

EMBED = "model.embed_tokens.weight"
FINAL_NORM = "model.norm.weight"
LM_HEAD = "lm_head.MatMul.weight"


def layer_names(i):
    p = f"model.layers.{i}"
    return {
        "ln1": f"{p}.input_layernorm.weight",
        "q": f"{p}.attn.q_proj.MatMul.weight",
        "k": f"{p}.attn.k_proj.MatMul.weight",
        "v": f"{p}.attn.v_proj.MatMul.weight",
        "q_bias": f"{p}.attn.q_proj.Add.bias",
        "k_bias": f"{p}.attn.k_proj.Add.bias",
        "v_bias": f"{p}.attn.v_proj.Add.bias",
        "o": f"{p}.attn.o_proj.MatMul.weight",
        "ln2": f"{p}.post_attention_layernorm.weight",
        "gate": f"{p}.mlp.gate_proj.MatMul.weight",
        "up": f"{p}.mlp.up_proj.MatMul.weight",
        "down": f"{p}.mlp.down_proj.MatMul.weight",
    }


def default_config(**kw):
    cfg = {
        "vocab_size": 256, "hidden": 128, "num_layers": 4, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 32, "mlp": 256, "max_length": 1024,
        "rope_theta": 10000.0, "rms_eps": 1e-5, "tie_embeddings": True,
        "qkv_bias": False,
    }
    cfg.update(kw)
    cfg.setdefault("rotary_dim", cfg["head_dim"])
    assert cfg["num_heads"] % cfg["num_kv_heads"] == 0
    assert cfg["rotary_dim"] == cfg["head_dim"], "partial rotary is not used here"
    return cfg


def weight_shapes(cfg):
    """(name, shape, kind) for every weight; kind is 'norm', 'bias' or 'matrix'."""
    d, nq, nkv, h, f, v = (cfg["hidden"], cfg["num_heads"], cfg["num_kv_heads"],
                           cfg["head_dim"], cfg["mlp"], cfg["vocab_size"])
    out = [(EMBED, (v, d), "matrix")]
    for i in range(cfg["num_layers"]):
        n = layer_names(i)
        out += [(n["ln1"], (d,), "norm"), (n["q"], (d, nq * h), "matrix"),
                (n["k"], (d, nkv * h), "matrix"), (n["v"], (d, nkv * h), "matrix")]
        if cfg["qkv_bias"]:
            out += [(n["q_bias"], (nq * h,), "bias"), (n["k_bias"], (nkv * h,), "bias"),
                    (n["v_bias"], (nkv * h,), "bias")]
        out += [(n["o"], (nq * h, d), "matrix"), (n["ln2"], (d,), "norm"),
                (n["gate"], (d, f), "matrix"), (n["up"], (d, f), "matrix"),
                (n["down"], (f, d), "matrix")]
    out += [(FINAL_NORM, (d,), "norm"), (LM_HEAD, (d, v), "matrix")]
    return out


def rotary_caches(cfg):
    """cos_cache, sin_cache (max_length, rotary_dim / 2) float32; position p, pair j has
    angle p * theta^(-2j / rotary_dim) (non-interleaved: pairs are (j, j + rot/2))."""
    rot = cfg["rotary_dim"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, rot, 2, dtype=np.float64) / rot))
    ang = np.outer(np.arange(cfg["max_length"], dtype=np.float64), inv_freq)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


class ExternalWriter:
    """Writes initializer bytes to one external file as they are made, so a multi-GB
    model never needs a second in-memory copy."""

    def __init__(self, directory, location="weights.bin", align=4096):
        self.location, self.align = location, align
        self.f = open(os.path.join(directory, location), "wb")
        self.offset = 0

    def tensor(self, name, arr):
        arr = np.ascontiguousarray(arr)
        pad = (-self.offset) % self.align
        if pad:
            self.f.write(b"\0" * pad)
            self.offset += pad
        data = arr.tobytes()
        self.f.write(data)
        t = TensorProto()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(self.offset)),
                     ("length", str(len(data)))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += len(data)
        return t

    def close(self):
        self.f.close()


def build_model(cfg, get_weight, *, norm="skip", packed_qkv=False, opset=17, ir_version=8,
                external=None, small_external_threshold=1024):
    """Returns the ModelProto. get_weight(name, shape, kind) -> float32 array (called once
    per weight, in weight_shapes order). external: an ExternalWriter, or None to embed."""
    assert norm in ("skip", "plain")
    d, nq, nkv, h, v = (cfg["hidden"], cfg["num_heads"], cfg["num_kv_heads"],
                        cfg["head_dim"], cfg["vocab_size"])
    eps = float(cfg["rms_eps"])
    nodes, inits = [], []

    def init(name, arr):
        arr = np.asarray(arr)
        if external is not None and arr.size >= small_external_threshold:
            inits.append(external.tensor(name, arr))
        else:
            inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op, ins, outs, name, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain or None, **attrs))
        return outs[0] if len(outs) == 1 else outs

    shapes = {n: (s, k) for n, s, k in weight_shapes(cfg)}
    packed = {}

    def W(name):
        shape, kind = shapes[name]
        arr = np.asarray(get_weight(name, shape, kind), dtype=np.float32)
        assert arr.shape == tuple(shape), (name, arr.shape, shape)
        return arr

    # Attention-mask reformatting, as GenAI: seqlens_k and total_sequence_length.
    init("/model/constants/INT64/1", np.array(1, dtype=np.int64))
    init("/model/constants/INT64/[1]", np.array([1], dtype=np.int64))
    p = "/model/attn_mask_reformat/attn_mask_subgraph"
    rs = node("ReduceSum", ["attention_mask", "/model/constants/INT64/[1]"],
              [f"{p}/ReduceSum/output_0"], f"{p}/ReduceSum", keepdims=0)
    sub = node("Sub", [rs, "/model/constants/INT64/1"], [f"{p}/Sub/output_0"], f"{p}/Sub")
    seqlens_k = node("Cast", [sub], [f"{p}/Sub/Cast/output_0"], f"{p}/Sub/Cast",
                     to=TensorProto.INT32)
    shp = node("Shape", ["attention_mask"], [f"{p}/Shape/output_0"], f"{p}/Shape")
    g = node("Gather", [shp, "/model/constants/INT64/1"], [f"{p}/Gather/output_0"],
             f"{p}/Gather", axis=0)
    total_len = node("Cast", [g], [f"{p}/Gather/Cast/output_0"], f"{p}/Gather/Cast",
                     to=TensorProto.INT32)

    cos, sin = rotary_caches(cfg)
    init("cos_cache", cos)
    init("sin_cache", sin)

    init(EMBED, W(EMBED))
    x = node("Gather", [EMBED, "input_ids"], ["/model/embed_tokens/Gather/output_0"],
             "/model/embed_tokens/Gather", axis=0)

    residual, pending = x, None  # pending: branch output not yet added to residual
    for i in range(cfg["num_layers"]):
        n = layer_names(i)
        p = f"/model/layers.{i}"

        def normed(weight, tag):
            nonlocal residual, pending
            if pending is None:
                return node("SimplifiedLayerNormalization", [residual, init(weight, W(weight))],
                            [f"{p}/{tag}/output_0"], f"{p}/{tag}/LayerNorm",
                            axis=-1, epsilon=eps, stash_type=1)
            if norm == "skip":
                out, res = f"{p}/{tag}/output_0", f"{p}/{tag}/output_3"
                node("SkipSimplifiedLayerNormalization",
                     [pending, residual, init(weight, W(weight))], [out, "", "", res],
                     f"{p}/{tag}/SkipLayerNorm", domain="com.microsoft", epsilon=eps)
                residual, pending = res, None
                return out
            residual = node("Add", [residual, pending], [f"{p}/{tag}/residual_add/output_0"],
                            f"{p}/{tag}/residual_add")
            pending = None
            return normed(weight, tag)

        a = normed(n["ln1"], "input_layernorm")
        pa = f"{p}/attn"
        if packed_qkv:
            wq, wk, wv = W(n["q"]), W(n["k"]), W(n["v"])
            wqkv = np.concatenate([wq, wk, wv], axis=1)
            name = f"model.layers.{i}.attn.qkv_proj.MatMul.weight"
            qkv = node("MatMul", [a, init(name, wqkv)], [f"{pa}/qkv_proj/MatMul/output_0"],
                       f"{pa}/qkv_proj/MatMul")
            if cfg["qkv_bias"]:
                b = np.concatenate([W(n["q_bias"]), W(n["k_bias"]), W(n["v_bias"])])
                qkv = node("Add", [qkv, init(f"model.layers.{i}.attn.qkv_proj.Add.bias", b)],
                           [f"{pa}/qkv_proj/Add/output_0"], f"{pa}/qkv_proj/Add")
            gqa_in = [qkv, "", ""]
        else:
            gqa_in = []
            for key in ("q", "k", "v"):
                t = node("MatMul", [a, init(n[key], W(n[key]))],
                         [f"{pa}/{key}_proj/MatMul/output_0"], f"{pa}/{key}_proj/MatMul")
                if cfg["qkv_bias"]:
                    bn = n[f"{key}_bias"]
                    t = node("Add", [t, init(bn, W(bn))], [f"{pa}/{key}_proj/Add/output_0"],
                             f"{pa}/{key}_proj/Add")
                gqa_in.append(t)
        gqa_in += [f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k,
                   total_len, "cos_cache", "sin_cache"]
        att = node("GroupQueryAttention", gqa_in,
                   [f"{pa}/GroupQueryAttention/output_0", f"present.{i}.key",
                    f"present.{i}.value"],
                   f"{pa}/GroupQueryAttention", domain="com.microsoft",
                   num_heads=nq, kv_num_heads=nkv, do_rotary=1, rotary_interleaved=0,
                   local_window_size=-1, softcap=0.0)[0]
        pending = node("MatMul", [att, init(n["o"], W(n["o"]))],
                       [f"{pa}/o_proj/MatMul/output_0"], f"{pa}/o_proj/MatMul")

        m = normed(n["ln2"], "post_attention_layernorm")
        pm = f"{p}/mlp"
        gate = node("MatMul", [m, init(n["gate"], W(n["gate"]))],
                    [f"{pm}/gate_proj/MatMul/output_0"], f"{pm}/gate_proj/MatMul")
        up = node("MatMul", [m, init(n["up"], W(n["up"]))],
                  [f"{pm}/up_proj/MatMul/output_0"], f"{pm}/up_proj/MatMul")
        sig = node("Sigmoid", [gate], [f"{pm}/act_fn/Sigmoid/output_0"], f"{pm}/act_fn/Sigmoid")
        act = node("Mul", [gate, sig], [f"{pm}/act_fn/Mul/output_0"], f"{pm}/act_fn/Mul")
        prod = node("Mul", [act, up], [f"{pm}/Mul/output_0"], f"{pm}/Mul")
        pending = node("MatMul", [prod, init(n["down"], W(n["down"]))],
                       [f"{pm}/down_proj/MatMul/output_0"], f"{pm}/down_proj/MatMul")

    p = "/model/layers.final"
    if norm == "skip":
        final = node("SkipSimplifiedLayerNormalization",
                     [pending, residual, init(FINAL_NORM, W(FINAL_NORM))],
                     ["/model/norm/output_0"], "/model/norm/SkipLayerNorm",
                     domain="com.microsoft", epsilon=eps)
    else:
        residual = node("Add", [residual, pending], [f"{p}/residual_add/output_0"],
                        f"{p}/residual_add")
        final = node("SimplifiedLayerNormalization", [residual, init(FINAL_NORM, W(FINAL_NORM))],
                     ["/model/norm/output_0"], "/model/norm/LayerNorm",
                     axis=-1, epsilon=eps, stash_type=1)
    node("MatMul", [final, init(LM_HEAD, W(LM_HEAD))], ["logits"], "/lm_head/MatMul")

    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                            ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", f32,
                                             ["batch_size", "sequence_length", v])]
    for i in range(cfg["num_layers"]):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kv}", f32,
                ["batch_size", nkv, "past_sequence_length", h]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kv}", f32, ["batch_size", nkv, "total_sequence_length", h]))
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="onyx tools/decoder")
    model.ir_version = ir_version
    meta = {k: cfg[k] for k in sorted(cfg)}
    helper.set_model_props(model, {"onyx.decoder_config": json.dumps(meta)})
    return model


def ops_used(model):
    return sorted({f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in model.graph.node})


def reference_logits(cfg, weights, ids):
    """Plain numpy forward over a whole sequence (no cache) — an independent check of
    what the graph computes. ids (B, S) int; returns (B, S, vocab) float32."""
    nq, nkv, h = cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    eps = cfg["rms_eps"]
    cos, sin = rotary_caches(cfg)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rot(x):  # (B, N, S, H)
        s, half = x.shape[2], x.shape[3] // 2
        c, sn = cos[:s][None, None], sin[:s][None, None]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * sn, x2 * c + x1 * sn], -1)

    b, s = ids.shape
    x = weights[EMBED][ids].astype(np.float64)
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for i in range(cfg["num_layers"]):
        n = layer_names(i)
        a = rms(x, weights[n["ln1"]])
        q, k, v_ = (a @ weights[n[key]] for key in ("q", "k", "v"))
        if cfg["qkv_bias"]:
            q, k, v_ = q + weights[n["q_bias"]], k + weights[n["k_bias"]], v_ + weights[n["v_bias"]]
        q = rot(q.reshape(b, s, nq, h).transpose(0, 2, 1, 3))
        k = rot(k.reshape(b, s, nkv, h).transpose(0, 2, 1, 3))
        v_ = v_.reshape(b, s, nkv, h).transpose(0, 2, 1, 3)
        g = nq // nkv
        k, v_ = np.repeat(k, g, axis=1), np.repeat(v_, g, axis=1)
        sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(h) + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        att = (sc @ v_).transpose(0, 2, 1, 3).reshape(b, s, nq * h)
        x = x + att @ weights[n["o"]]
        m = rms(x, weights[n["ln2"]])
        gt = m @ weights[n["gate"]]
        x = x + ((gt / (1 + np.exp(-gt))) * (m @ weights[n["up"]])) @ weights[n["down"]]
    x = rms(x, weights[FINAL_NORM])
    return (x @ weights[LM_HEAD]).astype(np.float32)
