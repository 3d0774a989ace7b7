#!/usr/bin/env python3
"""Seed corpus for a fuzz target from the tests: every C++ string literal (raw R"(...)" and
ordinary "..." with its escapes decoded) in the given source files that passes the target's
filter becomes one seed file in OUT_DIR; files that are not C++ are copied whole.
  fuzz_seeds.py OUT_DIR FILTER FILE...     FILTER: json | yaml | grammar | http | any
With FILTER dict, OUT_DIR is a libFuzzer dictionary file written from the short printable
literals of the (source) files: the field names and keywords a parser looks for.
The http filter prefixes each seed with the fuzzer's configuration byte (read size 8).
"""
import hashlib
import os
import re
import sys

RAW = re.compile(r'R"([^(\s]{0,16})\((.*?)\)\1"', re.S)
PLAIN = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
ESC = {'n': '\n', 't': '\t', 'r': '\r', '0': '\0', '\\': '\\', '"': '"', "'": "'", '?': '?', 'a': '\a', 'b': '\b', 'f': '\f', 'v': '\v'}


def unescape(s):
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != '\\' or i + 1 == len(s):
            out += c.encode('utf-8')
            i += 1
            continue
        n = s[i + 1]
        if n == 'x':
            m = re.match(r'[0-9a-fA-F]{1,2}', s[i + 2:])
            if m:
                out.append(int(m.group(0), 16))
                i += 2 + len(m.group(0))
                continue
        if n == 'u' and re.match(r'[0-9a-fA-F]{4}', s[i + 2:i + 6]):
            out += chr(int(s[i + 2:i + 6], 16)).encode('utf-8')
            i += 6
            continue
        out += ESC.get(n, n).encode('utf-8')
        i += 2
    return bytes(out)


def literals(text):
    for m in RAW.finditer(text):
        yield m.group(2).encode('utf-8')
    without_raw = RAW.sub('""', text)
    for m in PLAIN.finditer(without_raw):
        yield unescape(m.group(1))


def keep(flt, s):
    if len(s) < 2:
        return False
    if flt == 'json':
        return s.lstrip()[:1] in (b'{', b'[')
    if flt == 'yaml':
        return b':' in s and b'\n' in s
    if flt == 'grammar':
        return True
    if flt == 'http':
        return b'HTTP/1.' in s
    return True


def write_dict(out, files):
    words = set()
    for f in files:
        with open(f, 'rb') as fh:
            for s in literals(fh.read().decode('utf-8', 'replace')):
                if 1 < len(s) <= 32 and all(0x20 <= b < 0x7f for b in s):
                    words.add(s)
    with open(out, 'w') as fh:
        for w in sorted(words):
            fh.write('"' + ''.join('\\x%02x' % b if b in (0x22, 0x5c) else chr(b) for b in w) + '"\n')
    print(len(words))


def main():
    out, flt, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    if flt == 'dict':
        return write_dict(out, files)
    os.makedirs(out, exist_ok=True)
    n = 0
    for f in files:
        with open(f, 'rb') as fh:
            data = fh.read()
        if f.endswith(('.cc', '.h')):
            found = [s for s in literals(data.decode('utf-8', 'replace')) if keep(flt, s)]
        else:
            found = [data]
        for s in found:
            if flt == 'http':
                s = b'\x07' + s
            name = hashlib.sha1(s).hexdigest()[:16]
            with open(os.path.join(out, name), 'wb') as fh:
                fh.write(s)
            n += 1
    print(n)


if __name__ == '__main__':
    main()
