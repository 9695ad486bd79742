"""Hugging Face model folders written from a vision-tower GGUF, for the tests of `wgml -m DIR`.

write_hf_folder(gguf_path, out_dir, shards) writes what transformers' save_pretrained
writes for the same weights (config.json, preprocessor_config.json, model.safetensors or
shards with model.safetensors.index.json), under the checkpoint names of CLIPModel,
SiglipModel or ViTForImageClassification: the mapping of src/model/clip/clip_hf.c, the
other way round and written separately from it, so that a wrong name on either side
shows. Tensors keep the GGUF's type (F32 or F16). A GGUF with a text tower gives its
tensors (CLIPModel's text_model + text_projection + logit_scale, SiglipModel's text_model
with its head + logit_scale + logit_bias) and a tokenizer as the model ships it
(hf_tokenizer_files.py: CLIP's tokenizer.json, SigLIP's spiece.model); CLIP's int64
position_ids buffers are there for the reader to skip.

The safetensors writer is this file's own (the format: an 8-byte little-endian header
length, the JSON header, the tensors' bytes back to back).
"""

import json
import os
import struct

import numpy as np

from gguf_reader import GGUFFile
from hf_tokenizer_files import write_clip_tokenizer, write_siglip_tokenizer

_DT = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.tobytes()
        header[name] = {"dtype": _DT[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def _text_tower(g, arch, t, out):
    """The text tower's tensors (CLIPModel's text_model + text_projection + logit_scale; SiglipModel's
    text_model with its head + logit_scale and logit_bias) into out; its text_config."""
    a = arch + ".text."
    D, F = g.get(a + "embedding_length"), g.get(a + "feed_forward_length")
    L, H, ctx = g.get(a + "block_count"), g.get(a + "attention.head_count"), g.get(a + "context_length")
    V = g.tensors["t.token_embd.weight"].shape[1]
    siglip = arch == "siglip"
    pre = "text_model."
    out[pre + "embeddings.token_embedding.weight"] = t("t.token_embd.weight")
    out[pre + "embeddings.position_embedding.weight"] = t("t.position_embd.weight", np.float32)
    if not siglip:
        out[pre + "embeddings.position_ids"] = np.arange(ctx, dtype=np.int64)[None, :]
    names = {"attn_norm": "layer_norm1", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_out": "self_attn.out_proj", "ffn_norm": "layer_norm2",
             "ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2"}
    for i in range(L):
        for ours, theirs in names.items():
            for wb in ("weight", "bias"):
                out[pre + "encoder.layers.%d.%s.%s" % (i, theirs, wb)] = t("t.blk.%d.%s.%s" % (i, ours, wb))
    out[pre + "final_layer_norm.weight"] = t("t.post_norm.weight")
    out[pre + "final_layer_norm.bias"] = t("t.post_norm.bias")
    if siglip:
        out[pre + "head.weight"] = t("t.proj.weight")
        out[pre + "head.bias"] = t("t.proj.bias")
        out["logit_scale"] = np.array([g.get(arch + ".logit_scale")], dtype=np.float32)
        out["logit_bias"] = np.array([g.get(arch + ".logit_bias")], dtype=np.float32)
    else:
        out["text_projection.weight"] = t("t.proj.weight")
        out["logit_scale"] = np.array(g.get(arch + ".logit_scale"), dtype=np.float32)
    return {"model_type": arch + "_text_model", "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
            "num_attention_heads": H, "max_position_embeddings": ctx, "vocab_size": V,
            "layer_norm_eps": float(g.get(a + "attention.layer_norm_epsilon")),
            "hidden_act": "gelu_pytorch_tanh" if siglip else "quick_gelu"}


def _hf_tensors(g):
    """The checkpoint's tensors (name -> array) and config.json / preprocessor_config.json."""
    arch = g.get("general.architecture")
    a = arch + ".vision."
    D, P, S = g.get(a + "embedding_length"), g.get(a + "patch_size"), g.get(a + "image_size")
    F, L, H = g.get(a + "feed_forward_length"), g.get(a + "block_count"), g.get(a + "attention.head_count")
    f16 = g.tensors["v.blk.0.attn_q.weight"].type == 1
    mdt = np.float16 if f16 else np.float32

    def t(name, dt=None):
        return g.tensor(name).astype(dt or (mdt if len(g.tensors[name].shape) > 1 else np.float32))

    out = {}
    vcfg = {"hidden_size": D, "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
            "image_size": S, "patch_size": P, "num_channels": 3,
            "layer_norm_eps": float(g.get(a + "attention.layer_norm_epsilon"))}
    if arch == "vit":
        pre = "vit."
        out[pre + "embeddings.cls_token"] = t("v.class_embd").reshape(1, 1, D)
        out[pre + "embeddings.position_embeddings"] = t("v.position_embd.weight").reshape(1, -1, D)
        out[pre + "embeddings.patch_embeddings.projection.weight"] = t("v.patch_embd.weight").reshape(D, 3, P, P)
        out[pre + "embeddings.patch_embeddings.projection.bias"] = t("v.patch_embd.bias")
        names = {"attn_norm": "layernorm_before", "attn_q": "attention.attention.query",
                 "attn_k": "attention.attention.key", "attn_v": "attention.attention.value",
                 "attn_out": "attention.output.dense", "ffn_norm": "layernorm_after",
                 "ffn_up": "intermediate.dense", "ffn_down": "output.dense"}
        layer = pre + "encoder.layer.%d."
        post = pre + "layernorm"
    else:
        pre = "vision_model."
        w = t("v.patch_embd.weight").reshape(D, 3, P, P)
        out[pre + "embeddings.patch_embedding.weight"] = w
        if arch == "siglip":
            out[pre + "embeddings.patch_embedding.bias"] = t("v.patch_embd.bias")
        else:
            out[pre + "embeddings.class_embedding"] = t("v.class_embd")
            out[pre + "embeddings.position_ids"] = np.arange(g.tensors["v.position_embd.weight"].shape[1],
                                                             dtype=np.int64)[None, :]
            out[pre + "pre_layrnorm.weight"] = t("v.pre_norm.weight")
            out[pre + "pre_layrnorm.bias"] = t("v.pre_norm.bias")
        out[pre + "embeddings.position_embedding.weight"] = t("v.position_embd.weight", np.float32)
        names = {"attn_norm": "layer_norm1", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_out": "self_attn.out_proj", "ffn_norm": "layer_norm2",
                 "ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2"}
        layer = pre + "encoder.layers.%d."
        post = pre + "post_layernorm"
    for i in range(L):
        for ours, theirs in names.items():
            for wb in ("weight", "bias"):
                out[(layer % i) + theirs + "." + wb] = t("v.blk.%d.%s.%s" % (i, ours, wb))
    out[post + ".weight"] = t("v.post_norm.weight")
    out[post + ".bias"] = t("v.post_norm.bias")

    tcfg = _text_tower(g, arch, t, out) if "t.token_embd.weight" in g.tensors else None
    if arch == "clip":
        out["visual_projection.weight"] = t("v.proj.weight")
        if tcfg is None:  # a vision-only GGUF: a text tower's names the reader must not take for one
            out["logit_scale"] = np.array(2.6592, dtype=np.float32)
        config = {"model_type": "clip", "architectures": ["CLIPModel"], "projection_dim": g.get(a + "projection_dim"),
                  "vision_config": dict(vcfg, hidden_act="quick_gelu", model_type="clip_vision_model"),
                  "text_config": tcfg or {"hidden_size": 8, "model_type": "clip_text_model"}}
        prep = {"crop_size": S, "do_center_crop": True, "do_normalize": True, "do_resize": True,
                "feature_extractor_type": "CLIPFeatureExtractor",
                "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
                "resample": 3, "size": S}
    elif arch == "siglip":
        h = "vision_model.head."
        out[h + "probe"] = t("v.head.probe").reshape(1, 1, D)
        out[h + "attention.in_proj_weight"] = np.vstack([t("v.head.attn_%s.weight" % k) for k in "qkv"])
        out[h + "attention.in_proj_bias"] = np.concatenate([t("v.head.attn_%s.bias" % k) for k in "qkv"])
        for ours, theirs in (("attn_out", "attention.out_proj"), ("ffn_norm", "layernorm"),
                             ("ffn_up", "mlp.fc1"), ("ffn_down", "mlp.fc2")):
            out[h + theirs + ".weight"] = t("v.head.%s.weight" % ours)
            out[h + theirs + ".bias"] = t("v.head.%s.bias" % ours)
        config = {"model_type": "siglip", "architectures": ["SiglipModel"],
                  "vision_config": dict(vcfg, hidden_act="gelu_pytorch_tanh", model_type="siglip_vision_model"),
                  "text_config": tcfg or {"hidden_size": D, "model_type": "siglip_text_model"}}
        prep = {"do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
                "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5],
                "processor_class": "SiglipProcessor", "resample": 3, "rescale_factor": 0.00392156862745098,
                "size": {"height": S, "width": S}}
    else:
        out["classifier.weight"] = t("v.classifier.weight")
        out["classifier.bias"] = t("v.classifier.bias")
        labels = g.get(arch + ".classifier.output_labels")
        config = dict(vcfg, model_type="vit", architectures=["ViTForImageClassification"], hidden_act="gelu",
                      qkv_bias=True, id2label={str(i): s for i, s in enumerate(labels)},
                      label2id={s: i for i, s in enumerate(labels)})
        prep = {"do_normalize": True, "do_resize": True, "feature_extractor_type": "ViTFeatureExtractor",
                "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2, "size": S}
    return out, config, prep


def write_hf_folder(gguf_path, out_dir, shards=1):
    g = GGUFFile(gguf_path)
    tensors, config, prep = _hf_tensors(g)
    os.makedirs(out_dir, exist_ok=True)
    if "t.token_embd.weight" in g.tensors:  # a text tower: its tokenizer as the model ships it
        V = g.tensors["t.token_embd.weight"].shape[1]
        if g.get("general.architecture") == "siglip":
            write_siglip_tokenizer(out_dir, n_vocab=V, form="spiece")
        else:
            write_clip_tokenizer(out_dir, n_vocab=V)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w") as f:
        json.dump(prep, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
        return out_dir
    names = list(tensors)
    weight_map, total = {}, 0
    for s in range(shards):
        part = names[s::shards]
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        write_safetensors(os.path.join(out_dir, fname), {n: tensors[n] for n in part})
        for n in part:
            weight_map[n] = fname
            total += tensors[n].nbytes
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return out_dir
