"""wgml: Python bindings of libwgml.so, the wgml inference engine (include/wgml.h).

    import wgml
    with wgml.Model("models/stories260K.gguf", backend="cpu") as m:
        print(m.generate("Once upon a time", max_tokens=40, temperature=0))
        for piece in m.generate("Once upon a time", stream=True):
            print(piece, end="", flush=True)

One class, :class:`Model`, loads any model file the library reads (GGUF, or
whisper.cpp's .bin) and offers the tasks of its family: ``generate`` and
``chat`` (LLMs), ``embed`` and ``rerank`` (BERT family; ``embed`` also for
CLIP/SigLIP text towers), ``speak`` (Kokoro), ``transcribe`` (Whisper),
``embed_images`` and ``classify`` (CLIP, SigLIP, ViT). ``Model.tasks`` says
which.

The package is pure Python over ctypes: no compiler is needed. It loads
libwgml.so from $WGML_LIBRARY, else beside the package, else the source
tree's build/ folder, else the system loader's search path.

Threads: every call into the library releases the GIL (ctypes' CDLL does so
for each foreign call), so two threads with two models compute at once. One
model is used by one thread at a time: each Model has a lock that its calls
take, so calls from several threads on one model wait their turn.

Errors: a failed call raises a subclass of :class:`Error` (``InvalidArgument``,
``FileError``, ``FormatError``, ``Unsupported``, ...) whose ``message`` is the
library's own.

Ctrl-C: a KeyboardInterrupt during ``generate`` (streamed or not), ``chat``,
``speak`` or ``transcribe`` stops the library's work at its next token, chunk
or segment, and is raised once the call has returned; the model stays usable.
"""
from __future__ import annotations

import ctypes
import json
import os
import queue
import threading
import time
import weakref
from ctypes import POINTER, byref, c_char_p, c_float, c_int32, c_uint8, c_void_p
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union)

import numpy as np

from . import _lib
from ._errors import (ContextFull, DeviceLost, Error, FileError, FormatError, GpuError, InvalidArgument, NetworkError,
                      NoAdapter, OutOfMemory, TemplateError, TokenizerError, Unsupported, error_for)

__version__ = "0.1.0"

__all__ = ["Model", "ModelInfo", "Error", "InvalidArgument", "FileError", "FormatError", "Unsupported", "OutOfMemory",
           "ContextFull", "GpuError", "DeviceLost", "NoAdapter", "TokenizerError", "TemplateError", "NetworkError",
           "version", "library_path", "fetch", "is_remote", "TASKS"]

PathLike = Union[str, "os.PathLike[str]"]

#: The task names of :attr:`Model.tasks`, by the wgml_task bit of include/wgml.h.
TASKS = {1 << 0: "generate", 1 << 1: "embed", 1 << 2: "rerank", 1 << 3: "speech", 1 << 4: "transcribe",
         1 << 5: "embed_image", 1 << 6: "classify"}

_BACKENDS = {"auto": 0, "cpu": 1, "gpu": 2, "webgpu": 2}
_POOLING = {"model": 0, "mean": 1, "cls": 2, "last": 3}
_FINISH = {1: "stop", 2: "length", 3: "length", 4: "stop"}  # wgml_stop_reason -> OpenAI finish_reason


def version() -> str:
    """The version of this package, which is that of the C library it was made
    with (WGML_VERSION_MAJOR.MINOR.PATCH of include/wgml.h)."""
    return __version__


def library_path() -> str:
    """The file of the libwgml.so loaded (loading it if need be)."""
    return _lib.lib()._name


def _check(status: int, err: _lib.wgml_error) -> None:
    if status != 0:
        L = _lib.lib()
        name = (L.wgml_status_name(status) or b"").decode("utf-8", "replace")
        msg = err.message.decode("utf-8", "replace") or name
        raise error_for(status, msg, name)


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def _enc(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise TypeError("%s must be a str, not %s" % (what, type(s).__name__))
    b = s.encode("utf-8")
    if b"\0" in b:
        raise InvalidArgument("%s contains a NUL character" % what)
    return b


@dataclass(frozen=True)
class ModelInfo:
    """What wgml_model_get_info says of a model (fields of wgml_model_info)."""
    family: str
    tasks: Tuple[str, ...]
    architecture: str
    name: str
    backend: str
    adapter: str
    n_threads: int
    n_params: int
    weights_bytes: int
    matmul_type: str
    bos: int
    eos: int
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    head_dim: int
    matmul_params: int
    tied_embeddings: bool
    pooling: int
    causal: bool
    sample_rate: int
    n_voices: int


class _Interrupt:
    """Holds an exception raised inside a library callback (KeyboardInterrupt,
    or an error of the caller's own code), so that the callback can return
    non-zero (stop) and the exception be raised once the C call has returned."""

    def __init__(self) -> None:
        self.exc: Optional[BaseException] = None

    def run(self, fn: Callable[[], int]) -> int:
        if self.exc is not None:
            return 1
        try:
            return fn()
        except BaseException as e:  # noqa: B902 - KeyboardInterrupt included on purpose
            self.exc = e
            return 1

    def reraise(self) -> None:
        if self.exc is not None:
            e, self.exc = self.exc, None
            raise e


def _blocking(fn: Callable[[], Any], cancel: threading.Event) -> Any:
    """Runs fn (a call into the library) on a worker thread and waits for it.
    Signal handlers run in the main thread only, so a Ctrl-C lands here, in
    the wait, never inside a library callback: it sets cancel (which the
    callbacks check, stopping the work at its next token, chunk or segment),
    the wait goes on until the call has returned, and KeyboardInterrupt is
    raised then."""
    box: Dict[str, Any] = {}

    def work() -> None:
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: B902 - handed to the caller
            box["e"] = e

    t = threading.Thread(target=work, daemon=True, name="wgml-call")
    t.start()
    interrupted: Optional[BaseException] = None
    while t.is_alive():
        try:
            t.join()
        except BaseException as e:  # noqa: B902 - KeyboardInterrupt: stop the work, then raise it
            cancel.set()
            if interrupted is None:
                interrupted = e
    if interrupted is not None:
        raise interrupted
    if "e" in box:
        raise box["e"]
    return box.get("v")


class _StopMatcher:
    """Cuts the generated text at the first of the stop strings, holding back
    the end of the text that could begin one until it is decided."""

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop = [s for s in stop if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.buf = ""
        self.done = False

    def feed(self, text: str) -> str:
        """Adds text; returns what may be emitted now. Sets done at a stop string."""
        if not self.stop:
            return text
        self.buf += text
        cut = min((i for i in (self.buf.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            out, self.buf, self.done = self.buf[:cut], "", True
            return out
        keep = min(self.hold, len(self.buf))
        out, self.buf = self.buf[:len(self.buf) - keep], self.buf[len(self.buf) - keep:]
        return out

    def flush(self) -> str:
        out, self.buf = self.buf, ""
        return out


def _image(img: Any, keep: List[Any]) -> _lib.wgml_image:
    a = np.asarray(img)
    if a.ndim != 3 or a.shape[2] != 3:
        raise InvalidArgument("an image must be an H x W x 3 array (RGB), not of shape %s" % (a.shape,))
    if a.dtype != np.uint8:
        raise InvalidArgument("an image's pixels must be uint8, not %s" % a.dtype)
    a = np.ascontiguousarray(a)
    keep.append(a)
    return _lib.wgml_image(int(a.shape[1]), int(a.shape[0]), int(a.strides[0]),
                           a.ctypes.data_as(POINTER(c_uint8)))


def _images(images: Any) -> Tuple[Any, int, List[Any], bool]:
    """(wgml_image array, n, arrays to keep alive, single): a list of images or one H x W x 3 array."""
    single = isinstance(images, np.ndarray) and images.ndim == 3
    seq = [images] if single else list(images)
    if not seq:
        raise InvalidArgument("no images")
    keep: List[Any] = []
    arr = (_lib.wgml_image * len(seq))(*[_image(x, keep) for x in seq])
    return arr, len(seq), keep, single


def is_remote(model: PathLike) -> bool:
    """True when ``model`` names a model by URL or Hugging Face name (see
    :func:`fetch`) rather than an existing local path."""
    return bool(_lib.lib().wgml_model_is_remote(os.fsencode(os.fspath(model))))


def fetch(model: PathLike, offline: bool = False, cache_dir: Optional[PathLike] = None, token: Optional[str] = None,
          progress: Optional[Callable[[str, int, int], None]] = None,
          log: Optional[Callable[[str], None]] = None) -> str:
    """The local path of ``model``, downloading it into the cache when it is
    not there yet (wgml_model_fetch). ``model`` is a local path (returned as it
    is), ``https://host/path/model.gguf``, ``hf://owner/repo/file.gguf``,
    ``hf://owner/repo:Q4_K_M`` or ``owner/repo:Q4_K_M`` (that quantization of
    the repository's GGUF files), or ``hf://owner/repo`` (its Q4_K_M, else
    Q8_0, else first GGUF; or its config.json and safetensors as a folder).

    Downloads resume after a dropped connection or an interrupted run and are
    checked against the size and SHA-256 the server gives. ``offline``: the
    cache only (also WGML_OFFLINE=1). ``cache_dir``: where models are kept
    (default $WGML_CACHE_DIR/models, else $XDG_CACHE_HOME/wgml/models, else
    ~/.cache/wgml/models). ``token``: a Hugging Face token (default
    $HF_TOKEN), sent to Hugging Face only. ``progress(stage, done, total)``:
    stage "download" in bytes, then "verify". Ctrl-C stops the download and
    keeps what came for the next call to resume. Raises :class:`NetworkError`
    when the model cannot be had."""
    L = _lib.lib()
    fp = L.wgml_fetch_default_params()
    fp.offline = 1 if offline else 0
    bdir = os.fsencode(os.fspath(cache_dir)) if cache_dir is not None else None
    btoken = token.encode() if token else None
    fp.cache_dir = bdir
    fp.hf_token = btoken
    cancel = threading.Event()

    def on_progress(user: Any, stage: bytes, done: int, total: int) -> int:
        if progress is not None:
            try:
                progress(_s(stage), int(done), int(total))
            except BaseException:  # noqa: B902 - a callback must not raise through C
                pass
        return 1 if cancel.is_set() else 0

    progress_cb = _lib.progress_fn(on_progress)
    fp.progress = progress_cb
    log_cb = None
    if log is not None:
        def on_log(user: Any, line: bytes) -> None:
            try:
                log(_s(line))
            except BaseException:  # noqa: B902
                pass
        log_cb = _lib.log_fn(on_log)
        fp.log = log_cb
    out = ctypes.create_string_buffer(4096)
    err = _lib.wgml_error()
    bmodel = os.fsencode(os.fspath(model))
    st = _blocking(lambda: L.wgml_model_fetch(bmodel, byref(fp), out, len(out), byref(err)), cancel)
    _check(st, err)
    return os.fsdecode(out.value)


class Model:
    """A model file loaded on a backend, with the tasks of its family.

    ``path`` is a local file: a GGUF (memory-mapped), whisper.cpp's ggml .bin,
    or a Hugging Face folder; or a model by URL or Hugging Face name
    (``https://...``, ``hf://owner/repo/file.gguf``, ``owner/repo:Q4_K_M``),
    fetched into the cache first as :func:`fetch` does (``offline``,
    ``cache_dir`` and ``token`` are passed to it). ``backend``: "auto" (a
    hardware GPU adapter if there is one, else the CPU), "cpu", or "gpu"
    (WebGPU; "webgpu" is the same). ``adapter``: a substring of the WebGPU
    adapter's name ("llvmpipe", "swiftshader", ...). ``threads``: CPU threads
    (0: one per core). ``n_ctx``: the context of text generation (0: the
    model's training context, at most 4096). ``log``: a function called with
    each note of the library (a fallback, a truncated text), else they are
    dropped.

    Use it as a context manager, or call :meth:`close`; the memory is also
    freed when the object is collected.
    """

    def __init__(self, path: PathLike, backend: str = "auto", adapter: Optional[str] = None, n_ctx: int = 0,
                 threads: int = 0, log: Optional[Callable[[str], None]] = None, offline: bool = False,
                 cache_dir: Optional[PathLike] = None, token: Optional[str] = None) -> None:
        self._handle: Optional[int] = None
        self._session: Optional[int] = None
        #: the last generation's token counts, finish reason and times (generate, chat)
        self.last_stats: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._streams: "weakref.WeakSet[_Stream]" = weakref.WeakSet()
        spath = os.fspath(path)
        if backend not in _BACKENDS:
            raise InvalidArgument("backend '%s': auto, cpu or gpu" % backend, InvalidArgument.code)
        if not isinstance(n_ctx, int) or n_ctx < 0:
            raise InvalidArgument("n_ctx %r: 0 (the model's) or a positive count of tokens" % (n_ctx,))
        if is_remote(spath):
            spath = fetch(spath, offline=offline, cache_dir=cache_dir, token=token, log=log)
        L = _lib.lib()
        self._L = L
        self._n_ctx = n_ctx
        mp = L.wgml_model_default_params()
        mp.backend = _BACKENDS[backend]
        self._adapter = adapter.encode() if adapter else None
        mp.adapter = self._adapter
        mp.n_threads = int(threads)
        self._log_cb = None
        if log is not None:
            def on_log(user: Any, line: bytes) -> None:
                try:
                    log(_s(line))
                except BaseException:  # noqa: B902 - a callback must not raise through C
                    pass
            self._log_cb = _lib.log_fn(on_log)
            mp.log = self._log_cb
        # Loading runs on a worker thread too (_blocking): a Ctrl-C cancels it through the progress callback.
        cancel = threading.Event()
        self._progress_cb = _lib.progress_fn(lambda user, stage, done, total: 1 if cancel.is_set() else 0)
        mp.progress = self._progress_cb
        handle = c_void_p()
        err = _lib.wgml_error()
        bpath = os.fsencode(spath)
        try:
            st = _blocking(lambda: L.wgml_model_load(bpath, byref(mp), byref(handle), byref(err)), cancel)
        except BaseException:
            if handle.value:  # loaded just as the interrupt came
                L.wgml_model_free(handle.value)
            raise
        _check(st, err)
        self._handle = handle.value
        self._path = spath
        info = _lib.wgml_model_info()
        L.wgml_model_get_info(self._handle, byref(info))
        self._info = ModelInfo(
            family=_s(info.family), tasks=tuple(n for bit, n in sorted(TASKS.items()) if info.tasks & bit),
            architecture=_s(info.architecture), name=_s(info.name), backend=_s(info.backend),
            adapter=_s(info.adapter), n_threads=info.n_threads, n_params=info.n_params,
            weights_bytes=info.weights_bytes, matmul_type=_s(info.matmul_type), bos=info.bos, eos=info.eos,
            n_vocab=info.n_vocab, n_ctx_train=info.n_ctx_train, n_embd=info.n_embd, n_layer=info.n_layer,
            n_head=info.n_head, n_head_kv=info.n_head_kv, n_ff=info.n_ff, head_dim=info.head_dim,
            matmul_params=info.matmul_params, tied_embeddings=bool(info.tied_embeddings), pooling=info.pooling,
            causal=bool(info.causal), sample_rate=info.sample_rate, n_voices=info.n_voices)

    # ---- lifetime ----------------------------------------------------------------

    def close(self) -> None:
        """Frees the model (and its session). Streams still open are stopped
        first. Safe to call twice; using the model afterwards is an error."""
        for st in list(self._streams):
            st.close()
        with self._lock:
            if self._session is not None:
                self._L.wgml_session_free(self._session)
                self._session = None
            if self._handle is not None:
                self._L.wgml_model_free(self._handle)
                self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_handle", None) is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._handle is None:
            return "<wgml.Model (closed)>"
        i = self._info
        return "<wgml.Model %s (%s) on %s, tasks %s>" % (i.name or i.architecture, i.family, i.backend,
                                                         ",".join(i.tasks))

    def _h(self) -> int:
        if self._handle is None:
            raise InvalidArgument("the model is closed", InvalidArgument.code)
        return self._handle

    def _check_streams(self) -> None:
        """Refuses to wait for a stream that this very thread holds open (it would wait forever)."""
        me = threading.get_ident()
        for st in list(self._streams):
            if not st._done and st._owner == me:
                raise InvalidArgument("a streamed generation of this model is still open in this thread: read it "
                                      "to the end or close() it first", InvalidArgument.code)

    def _need(self, task: str) -> None:
        if task not in self._info.tasks:
            raise Unsupported("a %s model (%s) has no task '%s' (its tasks: %s)" % (
                self._info.family, self._info.architecture, task, ", ".join(self._info.tasks) or "none"),
                Unsupported.code)

    # ---- what it is -----------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        """The model's :class:`ModelInfo` (family, architecture, backend, sizes ...)."""
        return self._info

    @property
    def tasks(self) -> Tuple[str, ...]:
        """What the model can do: some of "generate", "embed", "rerank", "speech",
        "transcribe", "embed_image", "classify"."""
        return self._info.tasks

    @property
    def path(self) -> str:
        return self._path

    def tokenize(self, text: str, add_bos: bool = False) -> List[int]:
        """The token ids of text (wgml_tokenize)."""
        h = self._h()
        b = _enc(text, "text")
        err = _lib.wgml_error()
        n = self._L.wgml_tokenize(h, b, len(b), int(add_bos), None, 0, byref(err))
        if n < 0:
            _check(err.code or 1, err)
        buf = (c_int32 * max(n, 1))()
        n = self._L.wgml_tokenize(h, b, len(b), int(add_bos), buf, n, byref(err))
        if n < 0:
            _check(err.code or 1, err)
        return list(buf[:n])

    @property
    def chat_template(self) -> Optional[str]:
        """The model's chat template (the GGUF's, else a built-in fallback), or None."""
        t = self._L.wgml_model_chat_template(self._h(), None)
        return _s(t) if t else None

    @property
    def voices(self) -> List[str]:
        """The names of a speech model's voices."""
        out = []
        while True:
            v = self._L.wgml_speech_voice(self._h(), len(out))
            if not v:
                return out
            out.append(_s(v))

    @property
    def labels(self) -> List[str]:
        """The labels of a classifier (a ViT with its head); [] for others."""
        h = self._h()
        return [_s(self._L.wgml_model_label(h, i)) for i in range(self._L.wgml_model_n_labels(h))]

    # ---- text generation --------------------------------------------------------------

    def _gen_params(self, max_tokens: Optional[int], temperature: float, top_k: int, top_p: float, min_p: float,
                    repeat_penalty: float, repeat_last_n: int, seed: Optional[int], add_bos: bool,
                    ignore_eos: bool) -> Any:
        gp = self._L.wgml_generate_default_params()
        gp.n_predict = -1 if max_tokens is None else int(max_tokens)
        gp.add_bos = int(add_bos)
        gp.ignore_eos = int(ignore_eos)
        sp = gp.sampler
        sp.temperature = float(temperature)
        sp.top_k = int(top_k)
        sp.top_p = float(top_p)
        sp.min_p = float(min_p)
        sp.repeat_penalty = float(repeat_penalty)
        sp.repeat_last_n = int(repeat_last_n)
        sp.seed = int.from_bytes(os.urandom(8), "little") if seed is None else int(seed) & (2**64 - 1)
        gp.sampler = sp
        return gp

    def _grammar(self, grammar: Optional[str], json_schema: Any) -> Optional[int]:
        if grammar is not None and json_schema is not None:
            raise InvalidArgument("give grammar or json_schema, not both", InvalidArgument.code)
        if grammar is None and json_schema is None:
            return None
        g = c_void_p()
        err = _lib.wgml_error()
        if grammar is not None:
            b = _enc(grammar, "grammar")
            _check(self._L.wgml_grammar_create(b, len(b), byref(g), byref(err)), err)
        else:
            b = _enc(json_schema if isinstance(json_schema, str) else json.dumps(json_schema), "json_schema")
            _check(self._L.wgml_grammar_from_json_schema(b, len(b), byref(g), byref(err)), err)
        return g.value

    def _run_generate(self, prompt: str, gp: Any, grammar: Optional[int], stop: Sequence[str],
                      emit: Callable[[str], Optional[bool]], intr: _Interrupt) -> Dict[str, Any]:
        """wgml_generate on the model's session (reset first), each piece of text
        through emit (after the stop strings; emit returning True stops). The
        caller holds the lock."""
        h = self._h()
        L = self._L
        err = _lib.wgml_error()
        if self._session is None:
            sp = L.wgml_session_default_params()
            sp.n_ctx = self._n_ctx
            s = c_void_p()
            _check(L.wgml_session_create(h, byref(sp), byref(s), byref(err)), err)
            self._session = s.value
        else:
            L.wgml_session_reset(self._session)
        matcher = _StopMatcher(stop)

        def body(data: Any, n: int) -> int:
            # the library hands over whole UTF-8 characters (bytes of one split across tokens are held
            # back until it is complete); invalid bytes a model made become U+FFFD
            out = matcher.feed(ctypes.string_at(data, n).decode("utf-8", "replace") if n else "")
            if out and emit(out):
                return 1
            return 1 if matcher.done else 0

        def on_token(user: Any, token: int, data: Any, n: int) -> int:
            return intr.run(lambda: body(data, n))

        cb = _lib.token_fn(on_token)
        gp.on_token = cb
        gp.grammar = grammar
        res = _lib.wgml_generate_result()
        st = L.wgml_generate(self._session, _enc(prompt, "prompt"), byref(gp), byref(res), byref(err))
        intr.reraise()
        _check(st, err)
        rest = matcher.flush()
        if rest and not matcher.done:
            emit(rest)
        stop_reason = "stop" if matcher.done else _FINISH.get(res.stop, "stop")
        return {"prompt_tokens": res.n_prompt, "completion_tokens": res.n_generated, "finish_reason": stop_reason,
                "stop": _s(L.wgml_stop_reason_name(res.stop)), "prompt_ms": res.prompt_ms,
                "generate_ms": res.generate_ms, "ttft_ms": res.ttft_ms}

    def generate(self, prompt: str, max_tokens: Optional[int] = 128, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                 seed: Optional[int] = None, stop: Union[str, Sequence[str], None] = None, stream: bool = False,
                 add_bos: bool = True, ignore_eos: bool = False, grammar: Optional[str] = None,
                 json_schema: Any = None) -> Union[str, Iterator[str]]:
        """Generates text after ``prompt`` (task "generate"; wgml_generate).

        Returns the generated text (the prompt not included), or with
        ``stream=True`` an iterator of its pieces as they are made (whole
        UTF-8 characters). ``max_tokens``: at most that many tokens (None or
        -1: until end of sequence or a full context). Sampling as the library's
        (``temperature`` 0 is greedy); ``seed`` None: a random one. ``stop``: a
        string or strings that end the text (not included). ``grammar`` (GBNF
        text) or ``json_schema`` (a dict or JSON text) constrain the text
        (docs/grammar.md). The statistics of the last generation are in
        :attr:`last_stats`.

        Ctrl-C stops the generation (at its next token) and raises
        KeyboardInterrupt; leaving a stream early (break, close()) stops it too.
        """
        self._need("generate")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        gp = self._gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
                              add_bos, ignore_eos)
        if stream:
            return self._stream(prompt, gp, grammar, json_schema, stops)
        parts: List[str] = []
        self.last_stats = self._collect(prompt, gp, grammar, json_schema, stops, parts)
        return "".join(parts)

    def _collect(self, prompt: str, gp: Any, grammar: Optional[str], json_schema: Any, stops: List[str],
                 parts: List[str]) -> Dict[str, Any]:
        """A whole generation into parts, on a worker thread (_blocking: Ctrl-C stops it)."""
        self._check_streams()
        g = self._grammar(grammar, json_schema)
        cancel = threading.Event()

        def emit(t: str) -> bool:
            parts.append(t)
            return cancel.is_set()

        def run() -> Dict[str, Any]:
            with self._lock:
                return self._run_generate(prompt, gp, g, stops, emit, _Interrupt())
        try:
            return _blocking(run, cancel)
        finally:
            if g:
                self._L.wgml_grammar_free(g)

    def _stream(self, prompt: str, gp: Any, grammar: Optional[str], json_schema: Any,
                stops: List[str]) -> Iterator[str]:
        self._check_streams()
        g = self._grammar(grammar, json_schema)
        st = _Stream(self, prompt, gp, g, stops)
        self._streams.add(st)
        return st

    def chat(self, messages: Sequence[Dict[str, Any]], max_tokens: Optional[int] = 256, temperature: float = 0.8,
             top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
             seed: Optional[int] = None, stop: Union[str, Sequence[str], None] = None, stream: bool = False,
             tools: Optional[Sequence[Dict[str, Any]]] = None, json_schema: Any = None,
             template: Optional[str] = None, now: Optional[str] = None) -> Union[Dict[str, Any],
                                                                                Iterator[Dict[str, Any]]]:
        """A chat completion, shaped as OpenAI's (task "generate").

        ``messages``: [{"role": "system"|"user"|"assistant", "content": ...}, ...],
        rendered by the model's chat template (or ``template``, Jinja text) as
        Hugging Face's apply_chat_template does (wgml_chat_render). ``tools``
        are handed to the template (their calls are not parsed here).
        Returns {"object": "chat.completion", "choices": [{"message":
        {"role": "assistant", "content": ...}, "finish_reason": ...}], "usage":
        ...}; with ``stream=True`` an iterator of "chat.completion.chunk"
        dicts whose choices[0]["delta"] hold the pieces. Other arguments as
        :meth:`generate`."""
        self._need("generate")
        prompt = self.render_chat(messages, template=template, now=now, tools=tools)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        gp = self._gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, 64, seed, False, False)
        cid = "chatcmpl-" + os.urandom(12).hex()
        created = int(time.time())
        model = self._info.name or os.path.basename(self._path)
        if stream:
            pieces = self._stream(prompt, gp, None, json_schema, stops)

            def chunks() -> Iterator[Dict[str, Any]]:
                base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
                yield dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                           "finish_reason": None}])
                try:
                    for p in pieces:
                        yield dict(base, choices=[{"index": 0, "delta": {"content": p}, "finish_reason": None}])
                finally:
                    pieces.close()  # type: ignore[attr-defined]
                yield dict(base, choices=[{"index": 0, "delta": {},
                                           "finish_reason": self.last_stats.get("finish_reason", "stop")}])
            return chunks()
        parts: List[str] = []
        stats = self._collect(prompt, gp, None, json_schema, stops, parts)
        self.last_stats = stats
        return {"id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(parts)},
                             "finish_reason": stats["finish_reason"]}],
                "usage": {"prompt_tokens": stats["prompt_tokens"], "completion_tokens": stats["completion_tokens"],
                          "total_tokens": stats["prompt_tokens"] + stats["completion_tokens"]}}

    def render_chat(self, messages: Sequence[Dict[str, Any]], template: Optional[str] = None,
                    add_generation_prompt: bool = True, now: Optional[str] = None,
                    tools: Optional[Sequence[Dict[str, Any]]] = None) -> str:
        """The prompt text the chat template makes of the messages (wgml_chat_render)."""
        L = self._L
        cp = L.wgml_chat_default_params()
        cp.add_generation_prompt = int(add_generation_prompt)
        cp.model = self._h()
        nowb = _enc(now, "now") if now else None
        cp.now = nowb
        extra = _enc(json.dumps({"tools": list(tools)}), "tools") if tools else None
        cp.extra_json = extra
        out = c_void_p()
        err = _lib.wgml_error()
        tb = _enc(template, "template") if template is not None else None
        _check(L.wgml_chat_render(tb, _enc(json.dumps(list(messages)), "messages"), byref(cp), byref(out),
                                  byref(err)), err)
        try:
            return ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            _lib.c_free(out.value)

    # ---- embeddings and reranking -----------------------------------------------------

    def embed(self, texts: Union[str, Sequence[str]], normalize: bool = True, pooling: str = "model",
              dimensions: Optional[int] = None, truncate: bool = False, batch: int = 0) -> np.ndarray:
        """Embeds texts (task "embed"; wgml_embed): a float32 array [n, dim]
        (for one str, [dim]). ``normalize``: unit length (L2); ``pooling``:
        "model" (the file's), "mean", "cls" or "last"; ``dimensions``: keep the
        first N values (Matryoshka models); ``truncate``: cut a text longer
        than the context instead of raising."""
        self._need("embed")
        single = isinstance(texts, str)
        seq = [texts] if single else list(texts)
        if pooling not in _POOLING:
            raise InvalidArgument("pooling '%s': model, mean, cls or last" % pooling, InvalidArgument.code)
        L = self._L
        ep = L.wgml_embed_default_params()
        ep.pooling = _POOLING[pooling]
        ep.normalize = 0 if normalize else 1
        ep.dimensions = int(dimensions or 0)
        ep.truncate = int(truncate)
        ep.n_batch = int(batch)
        with self._lock:
            dim = L.wgml_embed_dim(self._h(), byref(ep))
            if dim <= 0:
                raise InvalidArgument("dimensions %r is out of range for this model" % (dimensions,),
                                      InvalidArgument.code)
            out = np.zeros((len(seq), dim), dtype=np.float32)
            if seq:
                arr = (c_char_p * len(seq))(*[_enc(t, "a text") for t in seq])
                err = _lib.wgml_error()
                _check(L.wgml_embed(self._h(), arr, len(seq), byref(ep), out.ctypes.data_as(POINTER(c_float)), dim,
                                    byref(err)), err)
        return out[0] if single else out

    def rerank(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """Relevance scores of documents for a query (task "rerank": a
        cross-encoder; wgml_rerank): float32 [n] logits, higher is more relevant."""
        self._need("rerank")
        docs = list(documents)
        scores = np.zeros(len(docs), dtype=np.float32)
        if not docs:
            return scores
        arr = (c_char_p * len(docs))(*[_enc(d, "a document") for d in docs])
        err = _lib.wgml_error()
        with self._lock:
            _check(self._L.wgml_rerank(self._h(), _enc(query, "query"), arr, len(docs),
                                       scores.ctypes.data_as(POINTER(c_float)), byref(err)), err)
        return scores

    # ---- images ---------------------------------------------------------------------------

    def embed_images(self, images: Any, normalize: bool = True, batch: int = 0) -> np.ndarray:
        """Embeds images (task "embed_image": CLIP, SigLIP, ViT; wgml_embed_images).
        ``images``: a list of H x W x 3 uint8 RGB arrays (or one such array:
        then the result is [dim]); each is preprocessed as the model's Hugging
        Face image processor does. Returns float32 [n, dim]."""
        self._need("embed_image")
        arr, n, keep, single = _images(images)
        L = self._L
        ep = L.wgml_embed_default_params()
        ep.normalize = 0 if normalize else 1
        ep.n_batch = int(batch)
        with self._lock:
            dim = L.wgml_embed_dim(self._h(), byref(ep))
            if dim <= 0:
                raise Unsupported("the model gives no image vectors", Unsupported.code)
            out = np.zeros((n, dim), dtype=np.float32)
            err = _lib.wgml_error()
            _check(L.wgml_embed_images(self._h(), arr, n, byref(ep), out.ctypes.data_as(POINTER(c_float)), dim,
                                       byref(err)), err)
        del keep
        return out[0] if single else out

    def classify(self, images: Any, labels: Optional[Sequence[str]] = None, top: Optional[int] = 5,
                 probs: bool = False) -> Any:
        """Classifies images. Without ``labels``, over the model's own labels
        (task "classify": a ViT classifier; wgml_classify_images); with
        ``labels`` (texts such as "a photo of a cat"), zero-shot by a model with
        an image and a text tower (CLIP: softmax over the labels; SigLIP: each
        label's sigmoid; wgml_zero_shot_classify). Returns for each image a list
        of (label, probability), the most probable first, at most ``top``
        (None: all); for one H x W x 3 array, that image's list. ``probs=True``:
        the float32 array [n, n_labels] instead, in the labels' order."""
        arr, n, keep, single = _images(images)
        L = self._L
        err = _lib.wgml_error()
        with self._lock:
            if labels is None:
                self._need("classify")
                names = self.labels
                out = np.zeros((n, len(names)), dtype=np.float32)
                _check(L.wgml_classify_images(self._h(), arr, n, out.ctypes.data_as(POINTER(c_float)), len(names),
                                              byref(err)), err)
            else:
                names = list(labels)
                if not names:
                    raise InvalidArgument("no labels", InvalidArgument.code)
                larr = (c_char_p * len(names))(*[_enc(x, "a label") for x in names])
                out = np.zeros((n, len(names)), dtype=np.float32)
                _check(L.wgml_zero_shot_classify(self._h(), arr, n, larr, len(names),
                                                 out.ctypes.data_as(POINTER(c_float)), byref(err)), err)
        del keep
        if probs:
            return out[0] if single else out
        res = []
        for row in out:
            order = sorted(range(len(names)), key=lambda j: (-float(row[j]), j))
            res.append([(names[j], float(row[j])) for j in (order if top is None else order[:top])])
        return res[0] if single else res

    # ---- speech ---------------------------------------------------------------------------

    def speak(self, text: str, voice: Optional[str] = None, speed: float = 1.0, lang: str = "en-us",
              phonemes: bool = False, seed: int = 0, split: str = "sentences",
              on_chunk: Optional[Callable[[np.ndarray, Dict[str, Any]], Any]] = None
              ) -> Tuple[np.ndarray, int, List[Dict[str, Any]]]:
        """Speaks text (task "speech": Kokoro; wgml_speak). Returns (samples,
        sample_rate, words): mono float32 audio in [-1, 1], its rate (24000),
        and each word with when it is spoken ({"word", "phonemes", "start",
        "end", "offset", "length"}, seconds and bytes of the input).

        ``voice``: a voice of the model by name ("af_heart"), a voice file, or
        a blend ("af_heart:0.6,am_adam:0.4"); None: the model's first.
        ``phonemes=True``: text is phonemes (the model's symbols); otherwise the
        text goes through espeak-ng (a separate program, $WGML_ESPEAK or on
        PATH). ``split``: "sentences" (each sentence made on its own) or
        "none". ``on_chunk(samples, info)``: called with each piece of audio
        as soon as it is made (return True to stop)."""
        self._need("speech")
        if split not in ("sentences", "none"):
            raise InvalidArgument("split '%s': sentences or none" % split, InvalidArgument.code)
        L = self._L
        sp = L.wgml_speak_default_params()
        sp.speed = float(speed)
        langb = _enc(lang, "lang")
        sp.lang = langb
        sp.phonemes = int(phonemes)
        sp.seed = int(seed) & (2**64 - 1)
        sp.split = 0 if split == "sentences" else 1
        chunks: List[np.ndarray] = []
        words: List[Dict[str, Any]] = []
        rate = [self._info.sample_rate]
        intr = _Interrupt()
        cancel = threading.Event()

        def body(c: Any) -> int:
            if cancel.is_set():
                return 1
            ch = c.contents
            a = np.ctypeslib.as_array(ch.samples, shape=(ch.n_samples,)).copy() if ch.n_samples > 0 else \
                np.zeros(0, np.float32)
            chunks.append(a)
            rate[0] = ch.sample_rate
            ws = [{"word": _s(w.word), "phonemes": _s(w.phonemes), "start": w.start, "end": w.end,
                   "offset": w.offset, "length": w.length} for w in ch.words[:ch.n_words]] if ch.n_words else []
            words.extend(ws)
            if on_chunk is not None:
                info = {"index": ch.index, "start": ch.start, "sample_rate": ch.sample_rate,
                        "phonemes": _s(ch.phonemes), "words": ws}
                return 1 if on_chunk(a, info) else 0
            return 0

        cb = _lib.audio_fn(lambda user, c: intr.run(lambda: body(c)))
        err = _lib.wgml_error()
        vb = _enc(voice, "voice") if voice else None
        res = _lib.wgml_speak_result()
        tb = _enc(text, "text")

        def run() -> int:
            with self._lock:
                return L.wgml_speak(self._h(), tb, vb, byref(sp), cb, None, byref(res), byref(err))
        st = _blocking(run, cancel)
        intr.reraise()
        _check(st, err)
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return audio.astype(np.float32, copy=False), int(rate[0]), words

    # ---- speech recognition ----------------------------------------------------------------

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: Optional[str] = None,
                   translate: bool = False, timestamps: bool = True, word_timestamps: bool = False,
                   beam_size: int = 0, temperature: float = 0.0, fallback: bool = True,
                   prompt: Optional[str] = None, condition_on_previous_text: bool = True, max_tokens: int = 0,
                   seed: int = 0, on_segment: Optional[Callable[[Dict[str, Any]], Any]] = None) -> Dict[str, Any]:
        """Transcribes (or with ``translate`` translates into English) mono
        audio (task "transcribe": Whisper; wgml_transcribe), decoded as the
        official transcribe() does. ``audio``: samples in [-1, 1] (any float
        or int16 array; int16 is scaled by 1/32768) at ``sample_rate`` Hz.
        Returns {"text", "language", "duration", "segments": [{"id", "start",
        "end", "text", "tokens", "temperature", "avg_logprob",
        "compression_ratio", "no_speech_prob", ("words")}]}.
        ``on_segment(segment)`` is called with each as soon as it is decoded
        (return True to stop). ``language``: "en", "de", ... (None: detected);
        ``fallback=False``: keep each window's first decoding (no retries at
        higher temperatures); ``max_tokens``: per window (0: 224)."""
        self._need("transcribe")
        a = np.asarray(audio)
        if a.ndim != 1:
            raise InvalidArgument("audio must be one channel: a 1-D array, not of shape %s" % (a.shape,),
                                  InvalidArgument.code)
        if a.dtype == np.int16:
            a = a.astype(np.float32) / 32768.0
        a = np.ascontiguousarray(a, dtype=np.float32)
        L = self._L
        tp = L.wgml_transcribe_default_params()
        langb = _enc(language, "language") if language else None
        tp.language = langb
        tp.translate = int(translate)
        tp.without_timestamps = 0 if timestamps else 1
        tp.word_timestamps = int(word_timestamps)
        tp.beam_size = int(beam_size)
        tp.temperature = float(temperature)
        tp.no_fallback = 0 if fallback else 1
        promptb = _enc(prompt, "prompt") if prompt else None
        tp.prompt = promptb
        tp.condition_on_previous_text = int(condition_on_previous_text)
        tp.max_tokens = int(max_tokens)
        tp.seed = int(seed) & (2**64 - 1)
        segs: List[Dict[str, Any]] = []
        intr = _Interrupt()
        cancel = threading.Event()

        def body(p: Any) -> int:
            if cancel.is_set():
                return 1
            s = p.contents
            d: Dict[str, Any] = {"id": s.index, "seek": s.seek, "start": s.start, "end": s.end, "text": _s(s.text),
                                 "tokens": list(s.tokens[:s.n_tokens]) if s.n_tokens else [],
                                 "temperature": s.temperature, "avg_logprob": s.avg_logprob,
                                 "compression_ratio": s.compression_ratio, "no_speech_prob": s.no_speech_prob}
            if s.words:
                d["words"] = [{"word": _s(w.text), "start": w.start, "end": w.end, "probability": w.probability}
                              for w in s.words[:s.n_words]]
            segs.append(d)
            if on_segment is not None and on_segment(d):
                return 1
            return 0

        cb = _lib.segment_fn(lambda user, p: intr.run(lambda: body(p)))
        res = _lib.wgml_transcribe_result()
        err = _lib.wgml_error()
        def run() -> int:
            with self._lock:
                return L.wgml_transcribe(self._h(), a.ctypes.data_as(POINTER(c_float)), a.size, int(sample_rate),
                                         byref(tp), cb, None, byref(res), byref(err))
        st = _blocking(run, cancel)
        intr.reraise()
        _check(st, err)
        return {"text": "".join(s["text"] for s in segs), "language": _s(res.language),
                "duration": res.duration, "segments": segs}


class _Stream:
    """The iterator generate(stream=True) returns: the library's generation runs
    on a worker thread (the GIL released) and hands each piece over a bounded
    queue, so that a slow reader holds the generation back instead of letting
    it run ahead. Leaving it early (close(), break, an exception, Ctrl-C in the
    reader, or dropping the last reference) stops the generation at its next
    token and waits for it. Until then the stream holds the model's lock."""

    _END = object()

    def __init__(self, model: Model, prompt: str, gp: Any, grammar: Optional[int], stops: List[str]) -> None:
        self._model = model
        self._q: "queue.Queue[Any]" = queue.Queue(maxsize=16)
        self._stop = threading.Event()
        self._done = False
        self._box: Dict[str, Any] = {}
        self._grammar = grammar
        self._owner = threading.get_ident()
        self._locked = False
        model._lock.acquire()
        self._locked = True
        # the worker holds the queue, the event and the box, never the stream itself: a stream
        # dropped unfinished is collected, and its __del__ stops the worker
        self._thread = threading.Thread(target=_Stream._work, daemon=True, name="wgml-generate",
                                        args=(model, self._q, self._stop, self._box, prompt, gp, grammar, stops))
        try:
            self._thread.start()
        except BaseException:
            self._release()
            raise

    @staticmethod
    def _work(model: Model, q: "queue.Queue[Any]", stop: threading.Event, box: Dict[str, Any], prompt: str,
              gp: Any, grammar: Optional[int], stops: List[str]) -> None:
        def put(item: Any) -> bool:
            """Hands an item to the reader; False once the reader has gone."""
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False
        try:
            model.last_stats = model._run_generate(prompt, gp, grammar, stops, lambda t: not put(t), _Interrupt())
        except BaseException as e:  # noqa: B902 - handed to the reader
            box["e"] = e
        put(_Stream._END)

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> str:
        if self._done:
            raise StopIteration
        try:
            item = self._q.get()
        except BaseException:
            self.close()
            raise
        if item is _Stream._END:
            self.close()
            if "e" in self._box:
                raise self._box.pop("e")
            raise StopIteration
        return item

    def close(self) -> None:
        """Stops the generation (if it still runs) and waits for it to end."""
        if self._done:
            return
        self._done = True
        self._stop.set()
        interrupted: Optional[BaseException] = None
        while self._thread.is_alive():  # a second Ctrl-C does not leave the generation running
            try:
                self._thread.join()
            except BaseException as e:  # noqa: B902
                interrupted = interrupted or e
        self._release()
        if interrupted is not None:
            raise interrupted

    def _release(self) -> None:
        if self._locked:
            self._locked = False
            if self._grammar:
                self._model._L.wgml_grammar_free(self._grammar)
                self._grammar = None
            self._model._lock.release()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
