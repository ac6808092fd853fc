"""Greedy tokens of an export whose MatMulNBits quantize activations to int8
(accuracy_level 4), for tests/decoder/exported_parity.py.

With int8 activations a product is discontinuous: an activation x whose x·127/amax lies
within rounding of a half-integer quantizes to one code or the next depending on its
last bit, and one code is a whole quantization step (about 1% of the block's largest
value). ONNX Runtime and Onyx compute every float to within rounding of each other, in
different orders, so once in a while such an activation rounds differently, the product
moves by a step, and the logits move by far more than float rounding. Where a greedy token
flips, two things show that this is all that happened:

- per step, the largest logit difference between Onyx and ONNX Runtime on the same
  sequence (the model run once over prompt + tokens so far, the last position's logits;
  ONNX Runtime's session and onyx-run on the same files), and ONNX Runtime's margin between
  its token and Onyx's where they part: Onyx's pick is explained when that margin is at
  most twice the logit difference;
- the same export with accuracy_level 0 on every MatMulNBits (float32 activations, no
  discontinuity) gives exactly ONNX Runtime GenAI's tokens (checked by the caller).
"""
import json
import os
import re
import shutil
import subprocess

import numpy as np


def uses_int8(folder):
    """True when some MatMulNBits of the folder's model has accuracy_level 4."""
    import onnx
    model = onnx.load(os.path.join(folder, _model_file(folder)), load_external_data=False)
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            for a in node.attribute:
                if a.name == "accuracy_level" and a.i == 4:
                    return True
    return False


def uses_float16(folder):
    """True when the folder's model gives float16 logits (float16 activations)."""
    import onnx
    model = onnx.load(os.path.join(folder, _model_file(folder)), load_external_data=False)
    return any(o.name == "logits" and o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
               for o in model.graph.output)


def _model_file(folder):
    with open(os.path.join(folder, "genai_config.json")) as f:
        return json.load(f)["model"]["decoder"]["filename"]


def copy_with_accuracy(folder, dest, level):
    """A copy of the export folder with every MatMulNBits at accuracy_level `level`."""
    import onnx
    from onnx import helper
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(folder, dest)
    path = os.path.join(dest, _model_file(folder))
    model = onnx.load(path, load_external_data=False)
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            keep = [a for a in node.attribute if a.name != "accuracy_level"]
            del node.attribute[:]
            node.attribute.extend(keep + [helper.make_attribute("accuracy_level", level)])
    onnx.save(model, path)
    return dest


def _last_logits_model(folder, dest):
    """The export's model with one output: the last position's logits (the data stays
    external, beside it)."""
    import onnx
    from onnx import TensorProto, helper
    model = onnx.load(os.path.join(folder, _model_file(folder)), load_external_data=False)
    g = model.graph
    logits = next(o for o in g.output if o.name == "logits")
    elem = logits.type.tensor_type.elem_type
    g.node.append(helper.make_node("Constant", [], ["onyx_last_index"],
                                   value=helper.make_tensor("i", TensorProto.INT64, [], [-1])))
    g.node.append(helper.make_node("Gather", ["logits", "onyx_last_index"], ["last_logits"],
                                   axis=1))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("last_logits", elem, None))
    os.makedirs(dest, exist_ok=True)
    onnx.save(model, os.path.join(dest, "model.onnx"))
    for f in os.listdir(folder):
        if f.endswith(".data"):
            shutil.copy(os.path.join(folder, f), os.path.join(dest, f))
    return os.path.join(dest, "model.onnx")


def _feeds(sess, folder, ids):
    with open(os.path.join(folder, "genai_config.json")) as f:
        dec = json.load(f)["model"]["decoder"]
    kv, head = dec["num_key_value_heads"], dec["head_size"]
    feeds = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = np.array([ids], np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, len(ids)), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(len(ids), dtype=np.int64)[None]
        else:  # an empty past
            dt = np.float16 if "float16" in i.type else np.float32
            feeds[i.name] = np.zeros((1, kv, 0, head), dt)
    return feeds


def explain(folder, prompt, want, got, onyx_run, work):
    """Per-step logit differences up to the first step where the tokens part, and whether
    ONNX Runtime's margin there is within them. Returns (explained, text)."""
    import onnxruntime as ort
    from onnx import numpy_helper
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if first is None:  # one stopped early: its last step decided eos
        first = min(len(got), len(want)) - 1 if min(len(got), len(want)) > 0 else 0
    case = os.path.join(work, "logits_case")
    shutil.rmtree(case, ignore_errors=True)
    model = _last_logits_model(folder, case)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    ort_logits = []
    for step in range(first + 1):
        feeds = _feeds(sess, folder, list(prompt) + list(want[:step]))
        out = sess.run(None, feeds)[0][0].astype(np.float64)
        ort_logits.append(out)
        d = os.path.join(case, f"test_data_set_{step}")
        os.makedirs(d)
        for k, n in enumerate(names):
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(sess.run(None, feeds)[0], "last_logits")
                    .SerializeToString())
    p = subprocess.run([onyx_run, case], capture_output=True, text=True)
    deltas = {}
    for line in (p.stdout + p.stderr).splitlines():
        m = re.search(r"test_data_set_(\d+) output 0 'last_logits': \w+ worst abs ([0-9.e+-]+)",
                      line)
        if m:
            deltas[int(m.group(1))] = float(m.group(2))
    if len(deltas) != first + 1:
        return False, f"onyx-run gave no logits for every step:\n    {p.stdout[-800:]}"
    a = want[first] if first < len(want) else None
    b = got[first] if first < len(got) else None
    lg = ort_logits[first]
    margin = lg[a] - lg[b] if a is not None and b is not None else 0.0
    steps = ", ".join(f"{s}: {deltas[s]:.2g}" for s in range(first + 1))
    explained = margin <= 2.0 * deltas[first]
    text = (f"at step {first} ONNX Runtime prefers {a} over Onyx's {b} by {margin:.3g}, "
            f"{'within' if explained else 'NOT within'} twice the largest logit difference "
            f"{deltas[first]:.3g}; largest |logit difference| per step: {steps}")
    return explained, text
