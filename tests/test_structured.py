#!/usr/bin/env python3
"""Structured output through `wgml serve` with the official OpenAI client (tests/serve/structured.mjs),
every reply validated with a JSON Schema validator (Debian's python3-jsonschema, the 2020-12 draft's
format checks).

  test_structured.py WGML_CLI SHARED_DIR schemas|tools

Two parts, two CTest tests that run side by side: the schemas (and json_object, grammar, the 400s)
or the tool calls.

The model: `wgml synth` stories15m with one layer and llama's SentencePiece vocabulary (32000 tokens,
byte fallback: any text can be spelled), random weights: whatever the weights, a grammar-constrained
reply must be valid, and every schema of tests/data/json_schemas.json has bounded instances, so every
reply must finish ("stop") with a whole document. Exits 77 (skipped) without node, the client or
jsonschema outside CI.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    cli, shared, part = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if jsonschema is None:  # Debian's python3-jsonschema, for an interpreter other than /usr/bin/python3
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import jsonschema
        except ImportError:
            jsonschema = None
    if jsonschema is None:
        print("test_structured: python3-jsonschema is not installed")
        return 1 if os.environ.get("CI") else 77
    node = shutil.which("node")
    if not node:
        print("test_structured: node is not installed")
        return 1 if os.environ.get("CI") else 77
    schemas_path = os.path.join(HERE, "data", "json_schemas.json")
    schemas = {e["name"]: e["schema"] for e in json.load(open(schemas_path, encoding="utf-8"))}
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        if part == "schemas":
            model = os.path.join(d, "m.gguf")
            subprocess.run([cli, "synth", "--arch", "stories15m", "--type", "Q8_0", "--layers", "1", "--vocab",
                            os.path.join(shared, "vocab", "ggml-vocab-llama-spm.gguf"), "-o", model],
                           check=True, capture_output=True)
            args = [model, schemas_path, out]
        else:
            model = os.path.join(d, "t.gguf")  # a byte-level BPE vocabulary (GPT-2's), as Qwen's and Llama 3's
            subprocess.run([cli, "synth", "--arch", "smollm2-135m", "--type", "Q8_0", "--layers", "1", "-o", model],
                           check=True, capture_output=True)
            templates = [os.path.join(shared, "chat", "templates", t) for t in
                         ("Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja")]
            args = ["-", "-", out, model] + templates
        r = subprocess.run([node, os.path.join(HERE, "serve", "structured.mjs"), cli] + args)
        if r.returncode:
            return r.returncode
        got = json.load(open(out, encoding="utf-8"))
    failures = [c["what"] for c in got["checks"] if not c["ok"]]
    fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
    n_ok = 0
    for res in got["results"]:
        schema = schemas.get(res["name"], {"type": "object"})
        what = f'{res["name"]} seed {res["seed"]}: {res["content"]!r:.300} ({res["finish_reason"]})'
        if res["name"] == "json_object" and res["finish_reason"] == "length":
            n_ok += 1  # any JSON object: unbounded (a string may run on), whole only when it stopped
            continue
        try:
            doc = json.loads(res["content"])
            jsonschema.Draft202012Validator(schema, format_checker=fc).validate(doc)
        except (ValueError, jsonschema.ValidationError) as e:
            failures.append(f"{what}: {str(e).splitlines()[0]}")
            continue
        if res["finish_reason"] != "stop":
            failures.append(f"{what}: did not finish")
            continue
        n_ok += 1
    params = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in got.get("tools", [])}
    n_calls = 0
    for c in got.get("calls", []):
        for call in c["tool_calls"]:
            what = f'{c["template"]} {c["choice"]}: {call!r:.300}'
            try:
                args = json.loads(call["function"]["arguments"])
                jsonschema.Draft202012Validator(params[call["function"]["name"]], format_checker=fc).validate(args)
                assert call["id"] and call["type"] == "function"
                n_calls += 1
            except (ValueError, KeyError, AssertionError, jsonschema.ValidationError) as e:
                failures.append(f"{what}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if part == "tools":
        print(f"test_structured: {n_calls} tool calls valid in {len(got.get('calls', []))} replies")
        if n_calls < 8:  # 2 templates x (2 required + named + parallel off) at least
            failures.append(f"only {n_calls} tool calls")
    elif not got["results"]:
        failures.append("no replies")
    if part == "schemas":
        print(f"test_structured: {n_ok} of {len(got['results'])} replies valid and finished "
              f"({len(schemas)} schemas x 3 seeds + 2 json_object)")
    print(f"test_structured: {len(got['checks']) - len([1 for c in got['checks'] if not c['ok']])} "
          f"of {len(got['checks'])} other checks passed")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
