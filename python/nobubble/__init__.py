"""nobubble from Python: train and tokenize through the installed C library (ctypes over libnobubble.so).

Nothing is compiled here: the package finds libnobubble.so (the environment variable NOBUBBLE_LIB, else the
loader's search path, else the repository's build/ folder) and calls its public API. Every setting is one of
`nobubble train`'s flags, given as a keyword argument with dashes written as underscores:

    import nobubble
    nobubble.prepare(out="data/mine", inputs=["corpus.txt"], vocab=4096)      # as `nobubble prepare`
    result = nobubble.train(data="data/bible", model="tiny", optimizer="muon", delay="2bw", ef=1,
                            steps=300, out="runs/first")
    for m in nobubble.train_iter(data="data/bible", steps=100, out="runs/second"):
        print(m["step"], m["train_loss"])        # each line of metrics.jsonl, as the run writes it
    loss = nobubble.evaluate("runs/first/hf", data="data/bible")["val_loss"]   # runs/first/hf: train's export
    text = nobubble.sample("runs/first/hf", "In the beginning", tokens=40, temperature=0)
    ids = nobubble.tokenize("In the beginning", data="data/bible")
    text = nobubble.decode(ids, data="data/bible")
    bad = [r for r in nobubble.verify("runs/first/hf") if not r["ok"]]   # every file read whole, as `nobubble verify`

A value is passed as the flag's text (True: the flag alone; False: its --no- form); a value of another
type raises TypeError naming the setting; a setting the library refuses raises nobubble.Error with the
library's message, which names the flag and what was expected. docs/python.md.
"""
import ctypes
import ctypes.util
import json
import os
import threading
import time

__all__ = ["Error", "TrainResult", "prepare", "train", "train_iter", "evaluate", "sample", "tokenize", "decode", "verify",
           "library_path"]


class Error(RuntimeError):
    """A failure that the library reported (its message names the setting, file or value)."""


class TrainResult(ctypes.Structure):
    """nb_train_result (include/nobubble/train.h), field for field."""
    _fields_ = [("steps", ctypes.c_int), ("final_train_loss", ctypes.c_double),
                ("final_val_loss", ctypes.c_double), ("tokens_per_s", ctypes.c_double),
                ("seconds", ctypes.c_double), ("weights_hash", ctypes.c_uint64), ("primary", ctypes.c_int),
                ("already_complete", ctypes.c_int), ("summary_rebuilt", ctypes.c_int),
                ("tokenizer_exported", ctypes.c_int)]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


def library_path():
    """Where libnobubble.so is taken from."""
    if os.environ.get("NOBUBBLE_LIB"):
        return os.environ["NOBUBBLE_LIB"]
    found = ctypes.util.find_library("nobubble")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "build", "libnobubble.so")


class _EvalOptions(ctypes.Structure):
    """nb_eval_options (include/nobubble/train.h)."""
    _fields_ = [("checkpoint", ctypes.c_char_p), ("data_dir", ctypes.c_char_p), ("val_pattern", ctypes.c_char_p),
                ("batch", ctypes.c_int), ("seq", ctypes.c_int), ("batches", ctypes.c_int),
                ("memory_check", ctypes.c_int), ("gemm", ctypes.c_char_p)]


class _EvalResult(ctypes.Structure):
    _fields_ = [("val_loss", ctypes.c_double), ("tokens", ctypes.c_int), ("val_pattern", ctypes.c_char * 4200)]


_ON_TEXT = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t, ctypes.c_void_p)


class _SampleOptions(ctypes.Structure):
    """nb_sample_options (include/nobubble/train.h)."""
    _fields_ = [("checkpoint", ctypes.c_char_p), ("prompt", ctypes.c_char_p), ("tokenizer", ctypes.c_char_p),
                ("tokens", ctypes.c_int), ("top_k", ctypes.c_int), ("temperature", ctypes.c_float),
                ("seed", ctypes.c_uint64), ("memory_check", ctypes.c_int), ("gemm", ctypes.c_char_p),
                ("on_text", _ON_TEXT), ("ctx", ctypes.c_void_p)]


class _PrepareOptions(ctypes.Structure):
    """nb_prepare_opts (include/nobubble/data.h), field for field."""
    _fields_ = [("inputs", ctypes.POINTER(ctypes.c_char_p)), ("n_inputs", ctypes.c_int), ("format", ctypes.c_char_p),
                ("text_field", ctypes.c_char_p), ("skip_bad_lines", ctypes.c_int), ("special_as_text", ctypes.c_int),
                ("corpus", ctypes.c_char_p), ("gcide_path", ctypes.c_char_p), ("out_dir", ctypes.c_char_p),
                ("tokenizer", ctypes.c_char_p), ("name", ctypes.c_char_p), ("vocab_size", ctypes.c_int),
                ("val_fraction", ctypes.c_double), ("seed", ctypes.c_uint64), ("shard_tokens", ctypes.c_size_t),
                ("force", ctypes.c_int), ("verbose", ctypes.c_int)]


class _PrepareStats(ctypes.Structure):
    """nb_prepare_stats (include/nobubble/data.h)."""
    _fields_ = [("train_tokens", ctypes.c_size_t), ("val_tokens", ctypes.c_size_t), ("train_docs", ctypes.c_size_t),
                ("val_docs", ctypes.c_size_t), ("input_bytes", ctypes.c_size_t), ("train_shards", ctypes.c_int),
                ("val_shards", ctypes.c_int), ("seconds_tokenizer", ctypes.c_double),
                ("seconds_total", ctypes.c_double)]


_ON_REPORT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)


class _VerifyOptions(ctypes.Structure):
    """nb_verify_options (include/nobubble/train.h)."""
    _fields_ = [("path", ctypes.c_char_p), ("memory_check", ctypes.c_int), ("report", _ON_REPORT),
                ("ctx", ctypes.c_void_p)]


class _SampleResult(ctypes.Structure):
    _fields_ = [("generated", ctypes.c_int), ("refused", ctypes.c_int)]


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(library_path())
    lib.nb_last_error.restype = ctypes.c_char_p
    lib.nb_run_new.restype = ctypes.c_void_p
    lib.nb_run_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.nb_run_train.argtypes = [ctypes.c_void_p, ctypes.POINTER(TrainResult)]
    lib.nb_run_free.argtypes = [ctypes.c_void_p]
    lib.nb_tokenizer_load.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.nb_tokenizer_free.argtypes = [ctypes.c_void_p]
    lib.nb_tokenizer_vocab_size.argtypes = [ctypes.c_void_p]
    lib.nb_tokenizer_special_as_text.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.nb_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_uint32)]
    lib.nb_tokenizer_encode.restype = ctypes.c_size_t
    lib.nb_tokenizer_decode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_size_t,
                                        ctypes.c_char_p, ctypes.c_size_t]
    lib.nb_tokenizer_decode.restype = ctypes.c_size_t
    lib.nb_eval_defaults.argtypes = [ctypes.POINTER(_EvalOptions)]
    lib.nb_eval.argtypes = [ctypes.POINTER(_EvalOptions), ctypes.POINTER(_EvalResult)]
    lib.nb_sample_defaults.argtypes = [ctypes.POINTER(_SampleOptions)]
    lib.nb_sample.argtypes = [ctypes.POINTER(_SampleOptions), ctypes.POINTER(_SampleResult)]
    lib.nb_prepare_defaults.argtypes = [ctypes.POINTER(_PrepareOptions)]
    lib.nb_prepare.argtypes = [ctypes.POINTER(_PrepareOptions), ctypes.POINTER(_PrepareStats)]
    lib.nb_verify_defaults.argtypes = [ctypes.POINTER(_VerifyOptions)]
    lib.nb_verify.argtypes = [ctypes.POINTER(_VerifyOptions)]
    _lib = lib
    return lib


def _error(lib):
    return Error(lib.nb_last_error().decode("utf-8", "replace"))


def _text(value, what):
    """value (str or bytes) as the library reads it: a C string, which would end at a NUL character."""
    if "\0" in (value if isinstance(value, str) else value.decode("latin-1")):
        raise ValueError("%s: %r holds a NUL character, which the library would take as its end" % (what, value))
    return value


def _flags(settings):
    """(flag, value) pairs of train's flags from keyword arguments."""
    pairs = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            pairs.append((flag if value else "--no-" + key.replace("_", "-"), None))
        elif isinstance(value, (int, float, str, os.PathLike)):
            pairs.append((flag, _text(os.fspath(value) if isinstance(value, os.PathLike) else str(value), key)))
        elif key == "set" and isinstance(value, dict):
            pairs.extend(("--set", _text("%s=%s" % (k, v), "set")) for k, v in value.items())
        else:
            raise TypeError("nobubble.train: %s=%r: expected a number, a string, a path or a bool%s"
                            % (key, value, " (set: a dict of model fields)" if key == "set" else ""))
    return pairs


def _choice(value, what, choices):
    if value not in choices:
        raise ValueError("%s: %r: expected %s" % (what, value, " or ".join(map(repr, choices))))
    return value


def prepare(out=None, inputs=None, corpus=None, vocab=4096, val_fraction=0.05, seed=1337, tokenizer=None, name=None,
            format=None, text_field=None, skip_bad_lines=False, special_tokens="id", gcide_file=None,
            shard_tokens=None, force=False, quiet=False):
    """Token shards, a tokenizer and a manifest in the folder out, as `nobubble prepare` writes them (each
    argument is its flag of that name; inputs: a path or a list of paths, else the corpus, "bible" by
    default, and out then defaults to data/CORPUS). Returns the counts `prepare` prints, as a dict."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [_path(p, "inputs") for p in (inputs or [])]
    if inputs and corpus is not None:
        raise ValueError("nobubble.prepare: give inputs or corpus, not both")
    if gcide_file is not None and (inputs or corpus is None or "gcide" not in corpus):
        raise ValueError("nobubble.prepare: gcide_file goes with corpus='gcide' or 'bible+gcide'")
    if text_field == "":
        raise ValueError("nobubble.prepare: text_field: expected a member's name, not an empty one")
    if out is None:
        if inputs:
            raise TypeError("nobubble.prepare: out=DIR is required with inputs")
        out = {None: "data/bible", "bible": "data/bible", "gcide": "data/gcide"}.get(corpus, "data/bible-gcide")
    lib = _load()
    o = _PrepareOptions()
    lib.nb_prepare_defaults(ctypes.byref(o))
    array = (ctypes.c_char_p * max(1, len(inputs)))(*inputs)
    o.inputs, o.n_inputs = array, len(inputs)
    o.out_dir, o.tokenizer, o.gcide_path = _path(out, "out"), _path(tokenizer, "tokenizer"), _path(gcide_file, "gcide_file")
    for field, value in (("corpus", corpus), ("name", name), ("text_field", text_field)):
        setattr(o, field, None if value is None else _text(str(value), field).encode())
    o.format = None if format is None else _choice(format, "format", ("text", "jsonl", "auto")).encode()
    o.special_as_text = _choice(special_tokens, "special_tokens", ("id", "text")) == "text"
    o.vocab_size, o.seed = _int(vocab, "vocab"), _int(seed, "seed", 0, 2**64 - 1)
    if not isinstance(val_fraction, (int, float)) or isinstance(val_fraction, bool):
        raise TypeError("val_fraction: expected a number, not %r" % (val_fraction,))
    o.val_fraction = float(val_fraction)
    o.shard_tokens = 0 if shard_tokens is None else _int(shard_tokens, "shard_tokens", 1, 2**31 - 1)
    o.skip_bad_lines, o.force, o.verbose = int(bool(skip_bad_lines)), int(bool(force)), int(not quiet)
    stats = _PrepareStats()
    if lib.nb_prepare(ctypes.byref(o), ctypes.byref(stats)):
        raise _error(lib)
    result = {name: getattr(stats, name) for name, _ in stats._fields_}
    result["out"] = os.fspath(out)
    return result


def train(**settings):
    """Trains as `nobubble train` with these flags; returns the result (a dict of nb_train_result's fields).
    Raises Error with the library's message when a setting is refused or the run fails."""
    lib = _load()
    pairs = _flags(settings)
    run = lib.nb_run_new()
    if not run:
        raise _error(lib)
    try:
        for flag, value in pairs:
            if lib.nb_run_set(run, flag.encode(), None if value is None else value.encode()):
                raise _error(lib)
        result = TrainResult()
        if lib.nb_run_train(run, ctypes.byref(result)):
            raise _error(lib)
        return result.as_dict()
    finally:
        lib.nb_run_free(run)


def train_iter(poll=0.2, **settings):
    """Trains in a thread and yields each line of the run's metrics.jsonl (a dict) as it is written; needs
    out=DIR. The result dict is the iterator's return value (StopIteration.value); errors are raised."""
    out = settings.get("out")
    if not out:
        raise TypeError("nobubble.train_iter: needs out=DIR (its metrics.jsonl is what it yields)")
    box = {}

    def work():
        try:
            box["result"] = train(**settings)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    path, done, offset = os.path.join(os.fspath(out), "metrics.jsonl"), False, 0
    while not done:
        done = not thread.is_alive()
        if os.path.exists(path):
            with open(path) as f:
                f.seek(offset)
                while True:
                    line = f.readline()
                    if not line.endswith("\n"):
                        break
                    offset += len(line.encode())
                    yield json.loads(line)
        if not done:
            time.sleep(poll)
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _path(value, what):
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError("%s: expected a path, not %s" % (what, type(value).__name__))
    return _text(os.fspath(value), what).encode()


def _int(value, what, lo=-2**31, hi=2**31 - 1):
    """value for a C int field (ctypes would keep its low 32 bits: 2**32 + 8 would be read as 8)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("%s: expected a whole number, not %r" % (what, value))
    if not lo <= value <= hi:
        raise ValueError("%s: %d is out of range (expected %d to %d)" % (what, value, lo, hi))
    return value


def evaluate(checkpoint, data=None, val=None, batch=8, seq=0, batches=8, memory_check=True):
    """The validation loss of a saved model (a Hugging Face folder), as `nobubble eval`: a dict with
    val_loss, perplexity, tokens and the shards read."""
    lib = _load()
    o = _EvalOptions()
    lib.nb_eval_defaults(ctypes.byref(o))
    o.checkpoint, o.data_dir, o.val_pattern = _path(checkpoint, "checkpoint"), _path(data, "data"), _path(val, "val")
    o.batch, o.seq, o.batches = _int(batch, "batch"), _int(seq, "seq"), _int(batches, "batches")
    o.memory_check = 1 if memory_check else 0
    r = _EvalResult()
    if lib.nb_eval(ctypes.byref(o), ctypes.byref(r)):
        raise _error(lib)
    import math
    return {"val_loss": r.val_loss, "perplexity": math.exp(r.val_loss), "tokens": r.tokens,
            "val_pattern": r.val_pattern.decode()}


def sample(checkpoint, prompt, tokens=64, temperature=0.8, top_k=40, seed=1, tokenizer=None, memory_check=True,
           on_text=None):
    """Text continued from prompt by a saved model, as `nobubble sample` (the continuation alone, decoded
    as UTF-8 with replacement); on_text(str), if given, receives each piece as it is generated."""
    if not isinstance(prompt, str):
        raise TypeError("nobubble.sample: prompt must be str, not %s" % type(prompt).__name__)
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
        raise TypeError("nobubble.sample: temperature: expected a number, not %r" % (temperature,))
    lib = _load()
    o = _SampleOptions()
    lib.nb_sample_defaults(ctypes.byref(o))
    pieces = []

    def collect(data, n, ctx):
        piece = ctypes.string_at(data, n)
        pieces.append(piece)
        if on_text:
            on_text(piece.decode("utf-8", "replace"))

    callback = _ON_TEXT(collect)  # kept alive for the call
    o.checkpoint, o.prompt, o.tokenizer = (_path(checkpoint, "checkpoint"), _text(prompt, "prompt").encode(),
                                            _path(tokenizer, "tokenizer"))
    o.tokens, o.top_k, o.seed = _int(tokens, "tokens"), _int(top_k, "top_k"), _int(seed, "seed", 0, 2**64 - 1)
    o.temperature, o.memory_check, o.on_text = float(temperature), 1 if memory_check else 0, callback
    r = _SampleResult()
    if lib.nb_sample(ctypes.byref(o), ctypes.byref(r)):
        raise _error(lib)
    return b"".join(pieces).decode("utf-8", "replace")


def verify(path, memory_check=True):
    """Saved files checked as `nobubble verify` checks them: a .safetensors file, a checkpoint or export
    folder, or a save folder, every tensor read whole against its checksum, each header against its own, and
    a folder's model loaded as evaluate loads it. A list with a dict for each file and folder checked:
    path, ok (bool) and message (what was checked, or why it failed). Damage is reported, not raised."""
    lib = _load()
    o = _VerifyOptions()
    lib.nb_verify_defaults(ctypes.byref(o))
    reports = []

    def collect(ctx, where, failure, what):
        text = failure if failure is not None else what
        reports.append({"path": where.decode("utf-8", "replace"), "ok": failure is None,
                        "message": text.decode("utf-8", "replace")})

    callback = _ON_REPORT(collect)  # kept alive for the call
    o.path, o.memory_check, o.report = _path(path, "path"), 1 if memory_check else 0, callback
    if o.path is None:
        raise TypeError("nobubble.verify: expected a path, not None")
    lib.nb_verify(ctypes.byref(o))
    return reports


class _Tokenizer:
    def __init__(self, data, tokenizer, special_as_text):
        if (data is None) == (tokenizer is None):
            raise TypeError("give data=DIR or tokenizer=FILE (one of them)")
        self.lib = _load()
        path = os.path.join(os.fspath(data), "tokenizer.json") if data is not None else os.fspath(tokenizer)
        _text(path, "data" if data is not None else "tokenizer")
        self.t = ctypes.c_void_p()
        if self.lib.nb_tokenizer_load(ctypes.byref(self.t), path.encode()):
            raise _error(self.lib)
        self.lib.nb_tokenizer_special_as_text(self.t, 1 if special_as_text else 0)

    def close(self):
        self.lib.nb_tokenizer_free(self.t)


def tokenize(text, data=None, tokenizer=None, special_as_text=False):
    """The ids of text (str, or bytes as they are) under DIR/tokenizer.json or FILE, as `nobubble tokenize`."""
    if not isinstance(text, (str, bytes)):
        raise TypeError("nobubble.tokenize: text must be str or bytes, not %s" % type(text).__name__)
    raw = text.encode("utf-8") if isinstance(text, str) else text
    tok = _Tokenizer(data, tokenizer, special_as_text)
    try:
        ids = (ctypes.c_uint32 * (len(raw) + 1))()
        n = tok.lib.nb_tokenizer_encode(tok.t, raw, len(raw), ids)
        if n == ctypes.c_size_t(-1).value:
            raise _error(tok.lib)
        return list(ids[:n])
    finally:
        tok.close()


def decode(ids, data=None, tokenizer=None, errors="strict"):
    """The text of ids (a str, UTF-8 decoded with `errors`); ids outside the vocabulary raise ValueError."""
    tok = _Tokenizer(data, tokenizer, False)
    try:
        vocab = tok.lib.nb_tokenizer_vocab_size(tok.t)
        ids = list(ids)
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab:
                raise ValueError("nobubble.decode: id %r: expected a whole number from 0 to %d" % (i, vocab - 1))
        arr = (ctypes.c_int * max(1, len(ids)))(*ids)
        n = tok.lib.nb_tokenizer_decode(tok.t, arr, len(ids), None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        tok.lib.nb_tokenizer_decode(tok.t, arr, len(ids), buf, n)
        return buf.raw[:n].decode("utf-8", errors)
    finally:
        tok.close()
