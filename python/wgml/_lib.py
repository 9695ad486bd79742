"""ctypes declarations of include/wgml.h and the search for libwgml.so.

Internal: the public API is in wgml/__init__.py. Every structure here mirrors
the C header field by field; a change to a struct there needs the same change
here.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint, c_uint32, c_uint64, c_uint8, c_void_p)
from typing import List, Optional

ERROR_MESSAGE_MAX = 512


class wgml_error(Structure):
    _fields_ = [("code", c_int), ("message", c_char * ERROR_MESSAGE_MAX)]


progress_fn = CFUNCTYPE(c_int, c_void_p, c_char_p, c_uint64, c_uint64)
log_fn = CFUNCTYPE(None, c_void_p, c_char_p)


class wgml_model_params(Structure):
    _fields_ = [("backend", c_int), ("adapter", c_char_p), ("webgpu_flags", c_uint), ("n_threads", c_int),
                ("progress", progress_fn), ("progress_user", c_void_p), ("log", log_fn), ("log_user", c_void_p)]


class wgml_fetch_params(Structure):
    _fields_ = [("offline", c_int), ("cache_dir", c_char_p), ("hf_token", c_char_p), ("progress", progress_fn),
                ("progress_user", c_void_p), ("log", log_fn), ("log_user", c_void_p)]


class wgml_model_info(Structure):
    _fields_ = [("family", c_char_p), ("tasks", c_uint32), ("architecture", c_char_p), ("name", c_char_p),
                ("backend", c_char_p), ("adapter", c_char_p), ("n_threads", c_int), ("n_params", c_uint64),
                ("weights_bytes", c_uint64), ("matmul_type", c_char_p), ("bos", c_int32), ("eos", c_int32),
                ("n_vocab", c_int), ("n_ctx_train", c_int), ("n_embd", c_int), ("n_layer", c_int), ("n_head", c_int),
                ("n_head_kv", c_int), ("n_ff", c_int), ("head_dim", c_int), ("matmul_params", c_uint64),
                ("tied_embeddings", c_int), ("pooling", c_int), ("causal", c_int), ("sample_rate", c_int),
                ("n_voices", c_int)]


class wgml_session_params(Structure):
    _fields_ = [("n_ctx", c_int), ("n_batch", c_int), ("kv_type", c_int)]


class wgml_sampler_params(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_int), ("seed", c_uint64)]


token_fn = CFUNCTYPE(c_int, c_void_p, c_int32, POINTER(c_char), c_size_t)


class wgml_generate_params(Structure):
    _fields_ = [("n_predict", c_int), ("add_bos", c_int), ("ignore_eos", c_int), ("sampler", wgml_sampler_params),
                ("on_token", token_fn), ("user", c_void_p), ("grammar", c_void_p)]


class wgml_generate_result(Structure):
    _fields_ = [("n_prompt", c_int), ("n_generated", c_int), ("stop", c_int), ("prompt_ms", c_double),
                ("generate_ms", c_double), ("ttft_ms", c_double)]


class wgml_chat_params(Structure):
    _fields_ = [("add_generation_prompt", c_int), ("bos_token", c_char_p), ("eos_token", c_char_p),
                ("now", c_char_p), ("extra_json", c_char_p), ("model", c_void_p)]


class wgml_embed_params(Structure):
    _fields_ = [("pooling", c_int), ("normalize", c_int), ("dimensions", c_int), ("truncate", c_int),
                ("n_batch", c_int)]


class wgml_image(Structure):
    _fields_ = [("w", c_int), ("h", c_int), ("stride", c_size_t), ("data", POINTER(c_uint8))]


class wgml_word_time(Structure):
    _fields_ = [("word", c_char_p), ("phonemes", c_char_p), ("start", c_double), ("end", c_double),
                ("offset", c_int64), ("length", c_int64)]


class wgml_audio_chunk(Structure):
    _fields_ = [("samples", POINTER(c_float)), ("n_samples", c_int64), ("sample_rate", c_int), ("start", c_double),
                ("phonemes", c_char_p), ("words", POINTER(wgml_word_time)), ("n_words", c_int), ("index", c_int)]


audio_fn = CFUNCTYPE(c_int, c_void_p, POINTER(wgml_audio_chunk))


class wgml_speak_params(Structure):
    _fields_ = [("speed", c_float), ("lang", c_char_p), ("phonemes", c_int), ("seed", c_uint64),
                ("espeak", c_char_p), ("full_precision", c_int), ("split", c_int)]


class wgml_speak_result(Structure):
    _fields_ = [("n_samples", c_int64), ("n_chunks", c_int), ("first_audio_ms", c_double), ("total_ms", c_double)]


class wgml_transcript_word(Structure):
    _fields_ = [("text", c_char_p), ("start", c_double), ("end", c_double), ("probability", c_float)]


class wgml_transcript_segment(Structure):
    _fields_ = [("index", c_int), ("start", c_double), ("end", c_double), ("text", c_char_p),
                ("tokens", POINTER(c_int32)), ("n_tokens", c_int), ("temperature", c_float),
                ("avg_logprob", c_float), ("compression_ratio", c_float), ("no_speech_prob", c_float),
                ("words", POINTER(wgml_transcript_word)), ("n_words", c_int), ("seek", c_int)]


segment_fn = CFUNCTYPE(c_int, c_void_p, POINTER(wgml_transcript_segment))


class wgml_transcribe_params(Structure):
    _fields_ = [("language", c_char_p), ("translate", c_int), ("without_timestamps", c_int), ("beam_size", c_int),
                ("patience", c_float), ("temperature", c_float), ("no_fallback", c_int),
                ("temperature_increment", c_float), ("compression_ratio_threshold", c_float),
                ("logprob_threshold", c_float), ("no_speech_threshold", c_float),
                ("condition_on_previous_text", c_int), ("prompt", c_char_p), ("word_timestamps", c_int),
                ("max_tokens", c_int), ("seed", c_uint64), ("kv_type", c_int)]


class wgml_transcribe_result(Structure):
    _fields_ = [("language", c_char * 8), ("duration", c_double), ("n_segments", c_int), ("n_windows", c_int),
                ("n_tokens", c_int), ("encode_ms", c_double), ("decode_ms", c_double), ("total_ms", c_double)]


P = c_void_p  # opaque handles: wgml_model *, wgml_session *, wgml_grammar *
E = POINTER(wgml_error)

# name: (restype, argtypes)
_SIGNATURES = {
    "wgml_status_name": (c_char_p, [c_int]),
    "wgml_model_default_params": (wgml_model_params, []),
    "wgml_model_load": (c_int, [c_char_p, POINTER(wgml_model_params), POINTER(P), E]),
    "wgml_model_free": (None, [P]),
    "wgml_fetch_default_params": (wgml_fetch_params, []),
    "wgml_model_is_remote": (c_int, [c_char_p]),
    "wgml_model_fetch": (c_int, [c_char_p, POINTER(wgml_fetch_params), c_char_p, c_size_t, E]),
    "wgml_model_get_info": (None, [P, POINTER(wgml_model_info)]),
    "wgml_tokenize": (c_int, [P, c_char_p, c_size_t, c_int, POINTER(c_int32), c_int, E]),
    "wgml_token_to_piece": (c_int, [P, c_int32, POINTER(c_char), c_int]),
    "wgml_session_default_params": (wgml_session_params, []),
    "wgml_session_create": (c_int, [P, POINTER(wgml_session_params), POINTER(P), E]),
    "wgml_session_free": (None, [P]),
    "wgml_session_reset": (None, [P]),
    "wgml_session_n_ctx": (c_int, [P]),
    "wgml_stop_reason_name": (c_char_p, [c_int]),
    "wgml_sampler_default_params": (wgml_sampler_params, []),
    "wgml_generate_default_params": (wgml_generate_params, []),
    "wgml_generate": (c_int, [P, c_char_p, POINTER(wgml_generate_params), POINTER(wgml_generate_result), E]),
    "wgml_grammar_create": (c_int, [c_char_p, c_size_t, POINTER(P), E]),
    "wgml_grammar_from_json_schema": (c_int, [c_char_p, c_size_t, POINTER(P), E]),
    "wgml_grammar_free": (None, [P]),
    "wgml_chat_default_params": (wgml_chat_params, []),
    "wgml_chat_render": (c_int, [c_char_p, c_char_p, POINTER(wgml_chat_params), POINTER(c_void_p), E]),
    "wgml_model_chat_template": (c_char_p, [P, POINTER(c_int)]),
    "wgml_embed_default_params": (wgml_embed_params, []),
    "wgml_embed_dim": (c_int, [P, POINTER(wgml_embed_params)]),
    "wgml_embed": (c_int, [P, POINTER(c_char_p), c_int, POINTER(wgml_embed_params), POINTER(c_float), c_int, E]),
    "wgml_rerank": (c_int, [P, c_char_p, POINTER(c_char_p), c_int, POINTER(c_float), E]),
    "wgml_embed_images": (c_int, [P, POINTER(wgml_image), c_int, POINTER(wgml_embed_params), POINTER(c_float), c_int,
                                  E]),
    "wgml_model_n_labels": (c_int, [P]),
    "wgml_model_label": (c_char_p, [P, c_int]),
    "wgml_classify_images": (c_int, [P, POINTER(wgml_image), c_int, POINTER(c_float), c_int, E]),
    "wgml_zero_shot_classify": (c_int, [P, POINTER(wgml_image), c_int, POINTER(c_char_p), c_int, POINTER(c_float),
                                        E]),
    "wgml_speak_default_params": (wgml_speak_params, []),
    "wgml_speak": (c_int, [P, c_char_p, c_char_p, POINTER(wgml_speak_params), audio_fn, c_void_p,
                           POINTER(wgml_speak_result), E]),
    "wgml_speech_voice": (c_char_p, [P, c_int]),
    "wgml_transcribe_default_params": (wgml_transcribe_params, []),
    "wgml_transcribe": (c_int, [P, POINTER(c_float), c_size_t, c_int, POINTER(wgml_transcribe_params), segment_fn,
                                c_void_p, POINTER(wgml_transcribe_result), E]),
}

_SONAMES = ("libwgml.so", "libwgml.so.0")


def candidates() -> List[str]:
    """Where libwgml.so is looked for, in order: $WGML_LIBRARY, beside the
    package, the source tree's build/ (python/../build), then the system
    loader's search (LD_LIBRARY_PATH, ldconfig's cache)."""
    out: List[str] = []
    env = os.environ.get("WGML_LIBRARY")
    if env:
        out.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    out += [os.path.join(here, n) for n in _SONAMES]
    build = os.path.join(here, "..", "..", "build")
    out += [os.path.normpath(os.path.join(build, n)) for n in _SONAMES]
    out += list(_SONAMES)
    found = ctypes.util.find_library("wgml")
    if found:
        out.append(found)
    return out


def _load() -> ctypes.CDLL:
    env = os.environ.get("WGML_LIBRARY")
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            if path == env:  # asked for by name: say so rather than look elsewhere
                raise OSError("WGML_LIBRARY=%s: no such file" % env)
            continue
        try:
            return ctypes.CDLL(path)  # CDLL (not PyDLL): every call releases the GIL
        except OSError as e:
            if path == env:
                raise OSError("WGML_LIBRARY=%s: %s" % (env, e)) from None
            tried.append("%s (%s)" % (path, e))
    raise OSError("libwgml.so not found; build it (cmake --build build) or set WGML_LIBRARY. Tried: " +
                  "; ".join(tried or candidates()))


_lib: Optional[ctypes.CDLL] = None
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None


def lib() -> ctypes.CDLL:
    """The loaded library with every function's signature declared (loaded on first use)."""
    global _lib
    if _lib is None:
        lib_ = _load()
        missing = []
        for name, (res, args) in _SIGNATURES.items():
            try:
                f = getattr(lib_, name)
            except AttributeError:
                missing.append(name)
                continue
            f.restype = res
            f.argtypes = args
        if missing:
            raise OSError("%s lacks %s: an older libwgml? rebuild it" % (lib_._name, ", ".join(missing)))
        _lib = lib_
    return _lib


def c_free(p: int) -> None:
    _libc.free(p)


