#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora and dictionary under fuzz/ from the test
programs and examples: the programs as they are (for compile_bytes), each as
one byte per token of fuzz/src/lib.rs's TOKENS (for compile_tokens), and
fuzz/frontend.dict, the tokens as a libFuzzer dictionary."""
import glob
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
fuzz = os.path.join(root, "fuzz")
lib = open(os.path.join(fuzz, "src", "lib.rs")).read()
body = lib[lib.index("pub const TOKENS"):]
body = body[:body.index("];")]
tokens = [bytes(t, "utf-8").decode("unicode_escape") for t in re.findall(r'"((?:[^"\\]|\\.)*)"', body)]
index = {t: i for i, t in enumerate(tokens)}

programs = sorted(glob.glob(os.path.join(root, "tests", "programs", "*.ab"))
                  + glob.glob(os.path.join(root, "examples", "*.ab")))
lexeme = re.compile(r'\s+|//[^\n]*|"[^"]*"|[A-Za-z_][A-Za-z0-9_]*!?|[0-9][0-9_.a-z]*|<<=|>>=|\.\.=|::|->|=>|==|!=|<=|>=|&&|\|\||<<|>>|[-+*/%&|^]=|\.\.|.', re.S)


def token_bytes(src):
    out = bytearray()
    for m in lexeme.finditer(src):
        word = m.group(0)
        if word.isspace() or word.startswith("//"):
            continue
        if word not in index:
            # An unknown name becomes `x`, an unknown number `1`.
            word = "1" if word[0].isdigit() else ("x" if word[0].isalpha() or word[0] == "_" else None)
        if word is not None and word in index:
            out.append(index[word])
    return bytes(out)


for target in ("compile_bytes", "compile_tokens"):
    os.makedirs(os.path.join(fuzz, "seeds", target), exist_ok=True)
os.makedirs(os.path.join(fuzz, "seeds", "compile_grammar"), exist_ok=True)
for path in programs:
    name = os.path.basename(path)
    src = open(path, encoding="utf-8").read()
    open(os.path.join(fuzz, "seeds", "compile_bytes", name), "w", encoding="utf-8").write(src)
    open(os.path.join(fuzz, "seeds", "compile_tokens", name), "wb").write(token_bytes(src))

with open(os.path.join(fuzz, "frontend.dict"), "w", encoding="utf-8") as d:
    for t in tokens:
        if t.strip():
            d.write('"' + t.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\x0A") + '"\n')
print(f"{len(programs)} seed programs, {len(tokens)} tokens")
