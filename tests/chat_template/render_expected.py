#!/usr/bin/env python3
"""Renders chat templates with Python's Jinja2 the way Hugging Face transformers does.

Usage: render_expected.py TEMPLATE_DIR CONVERSATIONS_JSON OUT_JSON

Environment as in transformers' chat template utilities: ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, a {% generation %} tag that renders
its body, tojson = json.dumps(ensure_ascii=False, ...), raise_exception raising TemplateError,
and strftime_now. strftime_now reports a FIXED time (2024-07-26 09:30:15) so that the output is
deterministic; the C++ test fixes tarmac's clock to the same moment.

Writes a JSON list of {template, conversation, add_generation_prompt, ok, output | error}.
The templates are not ours (../shared); neither they nor these renderings are committed.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime(2024, 7, 26, 9, 30, 15)


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: renders the body (transformers tracks its span)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    tdir, conv_path, out_path = sys.argv[1:4]
    with open(conv_path, encoding="utf-8") as f:
        convs = json.load(f)["conversations"]
    env = make_env()
    results = []
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(tdir, name), encoding="utf-8") as f:
            source = f.read()
        try:
            tmpl = env.from_string(source)
            parse_error = None
        except Exception as e:  # noqa: BLE001 - any Jinja2 failure is an expected error
            tmpl, parse_error = None, f"{type(e).__name__}: {e}"
        for cname, conv in convs.items():
            for agp in (False, True):
                entry = {"template": name, "conversation": cname, "add_generation_prompt": agp}
                if tmpl is None:
                    entry.update(ok=False, error=parse_error)
                else:
                    variables = dict(conv)
                    variables["add_generation_prompt"] = agp
                    try:
                        entry.update(ok=True, output=tmpl.render(**variables))
                    except Exception as e:  # noqa: BLE001
                        entry.update(ok=False, error=f"{type(e).__name__}: {e}")
                results.append(entry)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=True, indent=1)


if __name__ == "__main__":
    main()
