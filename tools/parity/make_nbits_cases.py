#!/usr/bin/env python3
"""Generate ONNX Runtime parity cases for the quantized-weight kernels.

Writes one ONNX backend-test directory per case into OUT_DIR (a build folder, never
committed):

    OUT_DIR/<case>/model.onnx
    OUT_DIR/<case>/test_data_set_0/input_<i>.pb    (graph inputs, in order)
    OUT_DIR/<case>/test_data_set_0/output_0.pb     (ONNX Runtime's output)

com.microsoft MatMulNBits over bits 2/4/8, block sizes 16..256, K and N that are not
multiples of the block or of the 16-column tile, zero points absent / packed uint8 / of
the scales' type, bias, accuracy_level 0 and 4 (int8 activations), one row (decode) and
many (prefill, batched rank-3 A), float32 / float16 / bfloat16, weights as initializers
(packed at session creation) or as graph inputs (packed per run). GatherBlockQuantized
over uint8 with 2/4/8 bits, int4 and uint4 data on every axis pair, zero points, int32
and int64 indices, negative and out-of-range indices, float16 / bfloat16 scales.

Inputs are fresh random numbers from a seeded generator (never zeros), scales sized so
that outputs are of order 1, so the default tolerances of onyx-run apply. The expected
output is ONNX Runtime's (CPU); where ONNX Runtime refuses a case the op defines
(MatMulNBits with 8-bit weights and float zero points, bfloat16 on the CPU), it is the
definition evaluated in float64 by numpy here, and the case name ends in _def.

Usage: make_nbits_cases.py OUT_DIR [--seed N] [--only SUBSTRING] [--list]
Needs numpy, onnx (and ml_dtypes, which onnx depends on) and onnxruntime.
"""
import argparse
import os
import shutil
import sys

import numpy as np

try:
    import ml_dtypes
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as exc:  # pragma: no cover - reported to the caller
    print(f"make_nbits_cases: missing module: {exc}", file=sys.stderr)
    sys.exit(77)

BF16 = ml_dtypes.bfloat16
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
        np.dtype(BF16): TensorProto.BFLOAT16}


def rng_for(seed, name):
    h = 0
    for ch in name:
        h = (h * 131 + ord(ch)) % (1 << 31)
    return np.random.default_rng((seed, h))


def nonzero_normal(rng, shape):
    a = rng.standard_normal(shape)
    return np.where(np.abs(a) < 1e-3, 0.5, a)


def pack_codes(codes, bits):
    """Codes [..., L] (L a multiple of 8/bits) → uint8 [..., L·bits/8], low bits first."""
    per = 8 // bits
    c = codes.reshape(codes.shape[:-1] + (codes.shape[-1] // per, per)).astype(np.uint16)
    out = np.zeros(c.shape[:-1], np.uint16)
    for i in range(per):
        out |= c[..., i] << (i * bits)
    return out.astype(np.uint8)


def tensor(name, arr):
    arr = np.array(arr, order="C", copy=True)
    if arr.dtype == BF16:
        return helper.make_tensor(name, TensorProto.BFLOAT16, arr.shape,
                                  arr.view(np.uint16).tobytes(), raw=True)
    return numpy_helper.from_array(arr, name)


def tensor4(name, codes, signed, raw=False):
    """An INT4/UINT4 tensor of these logical codes: in int32_data (one packed byte an
    entry, as onnx.helper writes it) or in raw_data (two a byte, low nibble first)."""
    dtype = TensorProto.INT4 if signed else TensorProto.UINT4
    if not raw:
        return helper.make_tensor(name, dtype, codes.shape, codes.flatten().astype(np.int64).tolist())
    flat = (codes.flatten().astype(np.int64) & 0xF).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
    return helper.make_tensor(name, dtype, codes.shape, packed.tobytes(), raw=True)


# ------------------------------------------------------------------ MatMulNBits

class NBCase:
    def __init__(self, name, m, k, n, bits, bs, zp="none", acc=0, dtype=np.float32, bias=False,
                 rank3=False, weights_as_inputs=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def nb_data(c, rng):
    kb = (c.k + c.bs - 1) // c.bs
    hi = 1 << c.bits
    codes = rng.integers(0, hi, (c.n, kb, c.bs))
    # Scales ~ 1 / (sqrt(K) · code range): outputs of order 1.
    scales = (rng.random((c.n, kb)) + 0.5) / (np.sqrt(c.k) * hi / 4)
    zp = None
    if c.zp == "u8":
        zp = rng.integers(0, hi, (c.n, kb))
    elif c.zp == "float":
        zp = rng.random((c.n, kb)) * (hi - 1)
    a_shape = (2, c.m // 2, c.k) if c.rank3 else (c.m, c.k)
    a = nonzero_normal(rng, a_shape)
    bias = nonzero_normal(rng, (c.n,)) if c.bias else None
    return codes, scales, zp, a, bias


def nb_model(c, codes, scales, zp, a, bias):
    dt = np.dtype(c.dtype)
    kb = codes.shape[1]
    b_arr = pack_codes(codes, c.bits)
    s_arr = scales.astype(dt)
    weights = [("B", b_arr), ("scales", s_arr)]
    names = ["A", "B", "scales"]
    if zp is not None:
        if c.zp == "u8":
            padded = np.zeros((c.n, -(-kb * c.bits // 8) * (8 // c.bits)), np.int64)
            padded[:, :kb] = zp
            z_arr = pack_codes(padded, c.bits)
        else:
            z_arr = zp.astype(dt)
        weights.append(("zero_points", z_arr))
        names.append("zero_points")
    else:
        names.append("")
    if bias is not None:
        names += ["", "bias"]
        weights.append(("bias", bias.astype(dt)))
    while names[-1] == "":
        names.pop()
    attrs = dict(K=c.k, N=c.n, bits=c.bits, block_size=c.bs)
    if c.acc:
        attrs["accuracy_level"] = c.acc
    node = helper.make_node("MatMulNBits", names, ["Y"], domain="com.microsoft", **attrs)
    a_arr = a.astype(dt)
    feeds = [("A", a_arr)] + (weights if c.weights_as_inputs else [])
    inits = [] if c.weights_as_inputs else [tensor(n, v) for n, v in weights]
    g_in = [helper.make_tensor_value_info(n, ELEM.get(v.dtype, TensorProto.UINT8), v.shape)
            for n, v in feeds]
    out_shape = list(a.shape[:-1]) + [c.n]
    g_out = [helper.make_tensor_value_info("Y", ELEM[dt], out_shape)]
    return helper.make_graph([node], c.name, g_in, g_out, inits), feeds


def int8_route(c):
    """Where accuracy_level 4 quantizes A, as ONNX Runtime decides on x86 (constant
    weights only: computed ones are dequantized and multiplied in float32)."""
    if c.acc != 4 or c.zp == "float" or c.weights_as_inputs:
        return False
    return c.bits != 2 or 32 <= c.bs <= 128


def nb_definition(c, codes, scales, zp, a, bias):
    """The op's definition in float64, on the inputs as rounded to the case's dtype."""
    dt = np.dtype(c.dtype)
    kb = codes.shape[1]
    s = scales.astype(dt).astype(np.float64)
    z = (np.full((c.n, kb), 1 << (c.bits - 1)) if zp is None else
         zp.astype(dt).astype(np.float64) if c.zp == "float" else zp).astype(np.float64)
    x = a.astype(dt).astype(np.float32).reshape(-1, c.k)
    if int8_route(c):
        # accuracy_level 4: A quantized per block, q = round-half-even(x · 127/amax).
        xp = np.zeros((x.shape[0], kb * c.bs), np.float32)
        xp[:, :c.k] = x
        xb = xp.reshape(x.shape[0], kb, c.bs)
        amax = np.abs(xb).max(-1, keepdims=True)
        inv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0)
        q = np.rint(xb * inv.astype(np.float32))
        x = (q * (amax / np.float32(127)).astype(np.float32)).reshape(x.shape[0], -1)[:, :c.k]
    w = ((codes - z[:, :, None]) * s[:, :, None]).reshape(c.n, -1)[:, :c.k]
    y = (x.astype(np.float64) @ w.T).reshape(tuple(a.shape[:-1]) + (c.n,))
    if bias is not None:
        y = y + bias.astype(dt).astype(np.float64)
    return y.astype(dt)


def nb_cases():
    C = NBCase
    cases = []
    # Decode and prefill over bits, block sizes and zero-point kinds, fp32 and int8.
    for bits in (4, 8, 2):
        for bs in (16, 32, 64, 128, 256):
            for zp in ("none", "u8", "float"):
                for acc in (0, 4):
                    if bits == 2 and (bs, zp) not in ((16, "u8"), (32, "none"), (64, "u8"),
                                                      (128, "float"), (256, "none")):
                        continue
                    k = 3 * bs + 7  # never a whole number of blocks
                    name = f"nb_b{bits}_bs{bs}_{zp}_acc{acc}"
                    cases.append(C(name + "_m1", 1, k, 37, bits, bs, zp, acc))
                    cases.append(C(name + "_m11", 11, k, 53, bits, bs, zp, acc, bias=True))
    # Shapes: whole blocks (A read in place), tiles of 16 exactly, many row groups, rank 3.
    cases += [
        C("nb_whole_blocks_m1", 1, 256, 64, 4, 32, "none", 0),
        C("nb_whole_blocks_m20", 20, 256, 48, 4, 32, "u8", 0, bias=True),
        C("nb_whole_blocks_acc4_m20", 20, 256, 48, 4, 32, "none", 4),
        C("nb_tall_m70", 70, 200, 70, 4, 64, "u8", 4, bias=True),
        C("nb_tall_fp32_m70", 70, 200, 70, 4, 64, "float", 0),
        C("nb_rank3", 6, 96, 40, 4, 32, "u8", 4, rank3=True),
        C("nb_k_below_block", 3, 9, 20, 4, 32, "u8", 4),
        C("nb_n1", 4, 64, 1, 4, 16, "none", 0),
        C("nb_wide_n", 2, 64, 1000, 4, 32, "none", 4),
    ]
    # 16-bit activations.
    for dt in (np.float16, BF16):
        tag = "f16" if dt == np.float16 else "bf16"
        for acc in (0, 4):
            cases.append(C(f"nb_{tag}_acc{acc}_m1", 1, 135, 37, 4, 32, "u8", acc, dt, bias=True))
            cases.append(C(f"nb_{tag}_acc{acc}_m9", 9, 135, 37, 8, 64, "none", acc, dt))
        cases.append(C(f"nb_{tag}_zpfloat_m5", 5, 100, 21, 4, 16, "float", 0, dt, bias=True))
    # Weights as graph inputs: packed per run.
    cases += [
        C("nb_inputs_m1", 1, 100, 30, 4, 32, "u8", 4, weights_as_inputs=True),
        C("nb_inputs_m7_fp32", 7, 100, 30, 8, 16, "float", 0, bias=True, weights_as_inputs=True),
        C("nb_inputs_f16", 3, 64, 17, 4, 32, "none", 0, np.float16, weights_as_inputs=True),
    ]
    return cases


# ------------------------------------------------------------------ GatherBlockQuantized

class GBQCase:
    def __init__(self, name, shape, kind, bits=4, bs=16, gather_axis=0, quantize_axis=None,
                 zp=False, idx=None, idx_dtype=np.int64, sdtype=np.float32, raw=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        if quantize_axis is None:
            self.quantize_axis = len(shape) - 1


def gbq_build(c, rng):
    shape = list(c.shape)
    qa = c.quantize_axis % len(shape)
    ga = c.gather_axis % len(shape)
    lo, hi = {"uint8": (0, 1 << c.bits), "uint4": (0, 16), "int4": (-8, 8)}[c.kind]
    codes = rng.integers(lo, hi, shape)
    s_shape = list(shape)
    s_shape[qa] = -(-shape[qa] // c.bs)
    scales = (rng.random(s_shape) + 0.5)
    zp = rng.integers(lo, hi, s_shape) if c.zp else None
    idx = np.array(c.idx if c.idx is not None else
                   rng.integers(-shape[ga], shape[ga], (2, 3)), c.idx_dtype)
    sdt = np.dtype(c.sdtype)
    if c.kind == "uint8":
        data_t = tensor("data", pack_codes(codes, c.bits))
        if zp is not None:
            per = 8 // c.bits
            padded = np.zeros(s_shape[:-1] + [-(-s_shape[-1] // per) * per], np.int64)
            padded[..., :s_shape[-1]] = zp
            zp_t = tensor("zero_points", pack_codes(padded, c.bits))
    else:
        data_t = tensor4("data", codes, c.kind == "int4", c.raw)
        zp_t = tensor4("zero_points", zp, c.kind == "int4", c.raw) if zp is not None else None
    inits = [data_t, tensor("scales", scales.astype(sdt))]
    names = ["data", "indices", "scales"]
    if zp is not None:
        inits.append(zp_t)
        names.append("zero_points")
    attrs = dict(bits=c.bits, block_size=c.bs, gather_axis=c.gather_axis,
                 quantize_axis=c.quantize_axis)
    node = helper.make_node("GatherBlockQuantized", names, ["output"], domain="com.microsoft",
                            **attrs)
    g_in = [helper.make_tensor_value_info("indices", helper.np_dtype_to_tensor_dtype(idx.dtype),
                                          idx.shape)]
    g_out = [helper.make_tensor_value_info("output", ELEM[sdt], None)]
    graph = helper.make_graph([node], c.name, g_in, g_out, inits)
    # The definition, for what ONNX Runtime refuses.
    z = np.zeros(s_shape) + (1 << (c.bits - 1) if c.kind == "uint8" else 0) if zp is None else zp
    rep = lambda t: np.repeat(t, c.bs, axis=qa).take(range(shape[qa]), axis=qa)
    deq = (codes - rep(z)) * rep(scales.astype(sdt).astype(np.float64))
    safe = np.where(idx < 0, idx + shape[ga], idx)
    ok = (safe >= 0) & (safe < shape[ga])
    out = np.take(deq, np.where(ok, safe, 0), axis=ga)
    mask = ok.reshape([1] * ga + list(idx.shape) + [1] * (len(shape) - ga - 1))
    definition = np.where(mask, out, 0).astype(sdt)
    return graph, [("indices", idx)], definition


def gbq_cases():
    G = GBQCase
    cases = []
    for bits in (4, 8, 2):
        for zp in (False, True):
            cases.append(G(f"gbq_u8_b{bits}_{'zp' if zp else 'nozp'}", (20, 96), "uint8", bits,
                           32, zp=zp))
    cases += [
        G("gbq_u8_bs128_rows", (7, 300), "uint8", 4, 128, zp=True, idx=[[6, 0, -1, 3]]),
        G("gbq_u8_rank3", (5, 3, 64), "uint8", 4, 16, zp=True),
        G("gbq_u8_out_of_range", (6, 64), "uint8", 4, 32, zp=True, idx=[0, 6, -7, 5, 100]),
        G("gbq_u8_int32_scalar", (6, 64), "uint8", 8, 32, idx=4, idx_dtype=np.int32),
        G("gbq_u8_f16", (9, 80), "uint8", 4, 16, zp=True, sdtype=np.float16),
        G("gbq_u8_bf16", (9, 80), "uint8", 4, 16, sdtype=BF16),
    ]
    for kind in ("int4", "uint4"):
        for ga, qa in ((0, 2), (1, 2), (2, 0), (0, 1), (1, 0), (2, 2)):
            for zp in (False, True):
                cases.append(G(f"gbq_{kind}_g{ga}_q{qa}_{'zp' if zp else 'nozp'}", (6, 10, 40),
                               kind, 4, 16, ga, qa, zp))
    cases.append(G("gbq_int4_f16", (8, 48), "int4", 4, 16, zp=True, sdtype=np.float16))
    # raw_data, and an odd element count (the last byte half used)
    cases.append(G("gbq_int4_raw", (5, 7, 33), "int4", 4, 16, 1, 2, zp=True, raw=True))
    cases.append(G("gbq_uint4_raw", (7, 3, 21), "uint4", 4, 16, 0, 0, zp=True, raw=True))
    return cases


# ------------------------------------------------------------------ writing

def save_case(out_dir, name, graph, feeds, expected):
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="onyx-parity")
    model.ir_version = 10
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate(feeds):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(tensor(n, a).SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(tensor(graph.output[0].name, expected).SerializeToString())


def run_ort(graph, feeds):
    """ONNX Runtime's output, or None where it refuses the model (then the definition)."""
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, dict(feeds))[0]
    except Exception:  # noqa: BLE001 - any refusal means: use the definition
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true", help="print each case and its oracle")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    written = by_def = 0
    for c in nb_cases():
        if args.only not in c.name:
            continue
        rng = rng_for(args.seed, c.name)
        data = nb_data(c, rng)
        graph, feeds = nb_model(c, *data)
        ort_feeds = [(n, v) for n, v in feeds if v.dtype != BF16]
        want = run_ort(graph, feeds) if len(ort_feeds) == len(feeds) else None
        name = c.name
        if want is None:
            want, name, by_def = nb_definition(c, *data), name + "_def", by_def + 1
            graph.name = name
        save_case(args.out, name, graph, feeds, np.asarray(want).astype(c.dtype))
        written += 1
        if args.list:
            print(name)
    for c in gbq_cases():
        if args.only not in c.name:
            continue
        rng = rng_for(args.seed, c.name)
        graph, feeds, definition = gbq_build(c, rng)
        want = run_ort(graph, feeds) if c.sdtype != BF16 else None
        name = c.name
        if want is None:
            want, name, by_def = definition, name + "_def", by_def + 1
            graph.name = name
        save_case(args.out, name, graph, feeds, np.asarray(want).astype(c.sdtype))
        written += 1
        if args.list:
            print(name)
    print(f"{written} cases in {args.out} ({by_def} from the definition where ONNX Runtime "
          "refuses them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
