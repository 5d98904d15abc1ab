# A small reader of Rust source for the metric scripts beside it (code-metrics,
# module-cycles): no parser crate, no dependencies beyond Python 3's standard library.
# It blanks out comments, string and char literals (keeping line breaks), so braces and
# paths can be found by plain scanning, and it finds the brace that closes a block.

import re


def strip(text):
    """`text` with comments and string/char literals replaced by spaces (newlines
    kept), so that line numbers and braces of the code stay where they are."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif re.match(r'b?r#*"', text[i:i + 8]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + blank(text[i + 2:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('""' + blank(text[i + 2:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '{') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", text[i:])
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def close_of(code, open_at):
    """Index of the brace closing the one at `open_at` (or len(code))."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def line_of(code, at):
    return code.count("\n", 0, at) + 1


def without_test_modules(code):
    """`code` with `#[cfg(test)] mod name { ... }` blocks blanked out (test-only code)."""
    for m in list(re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)):
        open_at = m.end() - 1
        close = close_of(code, open_at)
        code = code[:m.start()] + "".join("\n" if c == "\n" else " " for c in code[m.start():close + 1]) + code[close + 1:]
    return code
