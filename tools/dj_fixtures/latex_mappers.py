"""Regenerate tests/assets/dj_fixtures/latex_mappers.json: Data-Juicer 1.6.1's own output of the ops of
its RedPajama arXiv and code recipes that djx added (remove_header_mapper, remove_comments_mapper,
remove_bibliography_mapper, expand_macro_mapper, suffix_filter), with the parameters below, on the
LaTeX texts and suffixes below, run through `dj-process`; and of the arXiv recipe's whole chain.

    /work/dj-venv/bin/python tools/dj_fixtures/latex_mappers.py [--dj-venv /work/dj-venv]

Each configuration is one Data-Juicer run (np 1, no fusion, no cache, op errors not skipped). A
mapper's export must hold one row per input text, in order; a filter's, the ids it kept, in order;
otherwise the script exits with status 1. The "tokens" texts hold djx's special tokens: Data-Juicer
maps them as ordinary text, and the test compares djx to it where Data-Juicer keeps them (docs/ops.md,
"Mappers and special tokens").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "tests" / "assets" / "dj_fixtures" / "latex_mappers.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}

PAPER = r"""\documentclass{article}
\usepackage{amsmath} % for align
\newcommand{\R}{\mathbb{R}}
\newcommand*{\eps}{\varepsilon}
\newcommand{\norm}[1]{\lVert #1 \rVert}
\def\half{\frac{1}{2}}
\def \N {\mathbb{N}}
\begin{document}
\title{A Paper}
\maketitle
%% a full-line comment
\section{Introduction}\label{sec:intro}
We work in $\R^n$ with $\eps > 0$ and $\half$ of $\N$. % inline comment
Only 50\% of the time, \R\R and \Rn.
\subsection*{Setting}
Text. \cite{a}
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
"""
PLAIN = [
    PAPER,
    "",
    "no header, no macro, just prose.\n",
    "\n\n  \t\n",
    # headers: every command, stars, short titles, braces that do not balance, look-alikes
    "Preamble text\n\\chapter{One}\nBody of chapter.\n\\section{Later}",
    "intro \\part*{Part I} rest",
    "x \\paragraph{P} y \\subparagraph{SP} z",
    "lead \\subparagraph{SP} tail",
    "lead \\paragraph*[p]{P} tail",
    "lead \\subsection{S} then \\section{T}",
    "lead \\subsubsection*{S} then \\chapter{C}",
    "pre \\subsubsection[short]{Long title} body",
    "pre \\section[short title with ] bracket]{Title} body",
    "pre \\section[unclosed short title {Title} \\section{Real} body",
    "pre \\sections{Not a header} \\sectionx{no} \\section{Yes} tail",
    "pre \\section{Unclosed title without its brace",
    "pre \\section{A {nested} title} after } brace",
    "pre \\section*[s]{t}",
    "a \\section[x]{y without close",
    "\\section{First} at the very start\n% comment at a line start\n",
    "line one\r\n\\section{CRLF}\r\nbody % note\r\n% whole line\r\nend\r\n",
    # comments: escaped %, %% , a lone %, indented, at the very start, after an escaped backslash
    "% comment at the very start\nline % trailing comment\n  % indented comment\nlast",
    "50\\% of all cases, 10% more % really a comment\nnext",
    "a%\nb%%c\n%\n%%\n\\\\% after a line break command\nend%",
    "tab\t% comment\tafter tab\nx",
    "multiple\n%one\n%two\n%three\nlines",
    # bibliographies and appendices
    "Body.\n\\appendix\n\\section{Proofs}\n",
    "Body.\n\\begin{thebibliography}{9}\n\\bibitem{a} A.\n\\end{thebibliography}\n",
    "Body.\n\\begin{references}\nR\n\\end{references}",
    "Body.\n\\begin{REFERENCES}\nR\n",
    "Body.\n\\bibliographystyle{plain}\n\\bibliography{refs} trailing\n\n",
    "Body \\bibliography{refs without a close",
    "Body \\bibliography{refs} then \\appendixes later",
    # macros: with and without arguments, \def spacing, lines that do not end in }, order, redefinition
    "\\newcommand{\\a}{A}\n\\newcommand{\\b}{\\a\\a B}\n\\a \\b. \\a\\a \\a1 \\a_x \\b",
    "\\newcommand{\\x}{X} % trailing comment\n\\x.",
    "\\newcommand{\\x}{X}\r\n\\x.\r\n",
    "\\newcommand{\\x}{1}\n\\newcommand{\\x}{2}\n\\def\\x{3}\n\\x.",
    "\\renewcommand{\\x}{X}\n\\providecommand{\\y}{Y}\n\\x \\y.",
    "\\newcommand{\\set}[1]{\\{#1\\}}\n\\newcommand{\\bb}{{\\bf b}}\n\\bb \\set{x}.",
    "\\def\\one{1}\\def\\two{2}\n\\one\\two.",
    "\\def\n\\spaced\n{value}\n\\spaced!",
    "\\def\x1c\\sep{S}\n\\sep.",
    "\\def\u2028\\ls{L}\n\\ls.",
    "\\newcommand{\\zh}{中文}\n\\newcommand{\\acc}{é\tà}\n\\zh, \\acc.",
    "\\newcommand{\\esc}{\\1 \\g<0> \\\\}\n\\esc.",
    "\\newcommand{\\last}{L}\nends with \\last",
    "\\newcommand{\\e}{}\nempty \\e value",
    "\\newcommand{\\self}{\\self}\n\\self.",
    "\\newcommand{\\p}{\\q}\n\\newcommand{\\q}{Q}\n\\p.",
    # CJK
    "前言\n\\section{引言}\n这是正文。% 注释\n\\newcommand{\\名}{x}\n\\bibliography{参考}\n",
]
TOKENS = [
    "<__dj__image>\n\\section{Intro} caption <|__dj__eoc|>",
    "\\section{A} <__dj__image> caption % comment\nmore <|__dj__eoc|>",
    "\\section{A} text %<__dj__image> a comment around a token\nmore",
    "<__dj__image>% comment glued to a token\nbody",
    "\\section{S}\nbody <__dj__image>\n\\bibliography{x}\n<__dj__image> after",
    "\\section{S}\nbody <__dj__image> text <|__dj__eoc|>\n\\appendix\nproof",
    "\\newcommand{\\img}{<__dj__image>}\n\\section{S} \\img text",
    "\\def\\cap{A caption}\n\\section{S} <__dj__image> \\cap.\n<|__dj__eoc|>",
    "<__dj__image> an image without any header",
    "\\section{<__dj__image>} title holds a token",
]

MAPPER_CASES = [
    ("remove_header_mapper", {}),
    ("remove_header_mapper", {"drop_no_head": False}),
    ("remove_comments_mapper", {}),
    ("remove_comments_mapper", {"inline": False}),
    ("remove_comments_mapper", {"multiline": False}),
    ("remove_comments_mapper", {"inline": False, "multiline": False}),
    ("remove_comments_mapper", {"doc_type": "md"}),
    ("remove_comments_mapper", {"doc_type": ["md", "tex"]}),
    ("remove_bibliography_mapper", {}),
    ("expand_macro_mapper", {}),
]
SUFFIXES = [".py", "py", "Dockerfile", "", ".C", ".c", ".PY", ".jsonl", "Makefile", ".tar.gz", " .py"]
SUFFIX_CASES = [
    {"suffixes": ".py"},
    {"suffixes": "py"},
    {"suffixes": [".py", "Dockerfile", ".C"]},
    {"suffixes": [".py", ""]},
    {"suffixes": []},
    {},
    {"suffixes": [".py", "Dockerfile"], "reversed_range": True},
    {"suffixes": [], "reversed_range": True},
    {"suffixes": ["nothing"]},
]
# configs/reproduced_redpajama/redpajama-arxiv.yaml's process list (tests/assets/dj_recipes/)
ARXIV = [{"remove_header_mapper": {"drop_no_head": True}},
         {"remove_comments_mapper": {"doc_type": ["md", "tex"], "inline": True, "multiline": True}},
         {"remove_bibliography_mapper": None}, {"expand_macro_mapper": None},
         {"text_length_filter": {"min_len": 1}}]


def run_dj(venv: Path, records: list[dict], process: list[dict], work: Path) -> list[dict]:
    """Data-Juicer's export rows of `records` through `process`, as dj-process writes them."""
    import yaml
    work.mkdir(parents=True)
    (work / "in.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                                   encoding="utf-8")
    recipe = {"project_name": "latex_fixture", "dataset_path": str(work / "in.jsonl"),
              "export_path": str(work / "out.jsonl"), "work_dir": str(work), "np": 1,
              "skip_op_error": False, "op_fusion": False, "use_cache": False, "open_monitor": False,
              "open_tracer": False, "keep_stats_in_res_ds": True, "process": process}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    proc = subprocess.run([str(venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                          env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"Data-Juicer failed on {process}:\n{proc.stderr[-3000:]}")
    out = work / "out.jsonl"
    return [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n") if line] if out.exists() else []


def mapped(venv: Path, texts: list[str], op: str, params: dict, work: Path) -> list[str]:
    rows = run_dj(venv, [{"id": i, "text": t} for i, t in enumerate(texts)], [{op: params}], work)
    if [r["id"] for r in rows] != list(range(len(texts))):
        sys.exit(f"{op} {params}: Data-Juicer's export has ids {[r['id'] for r in rows]}, not one row per input")
    return [r["text"] for r in rows]


def kept_ids(rows: list[dict], n: int, what: str) -> list[int]:
    ids = [r["id"] for r in rows]
    if ids != sorted(set(ids)) or not set(ids) <= set(range(n)):
        sys.exit(f"{what}: Data-Juicer's export has ids {ids}, not the kept inputs in order")
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dj-venv", default="/work/dj-venv", type=Path)
    args = ap.parse_args()
    import data_juicer
    texts = {"plain": PLAIN, "tokens": TOKENS}
    cases, suffix_cases = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (op, params) in enumerate(MAPPER_CASES):
            both = mapped(args.dj_venv, PLAIN + TOKENS, op, params, Path(tmp) / f"m{n}")
            cases.append({"op": op, "params": params, "output": {"plain": both[:len(PLAIN)], "tokens": both[len(PLAIN):]}})
            print(f"{op} {params}: done", flush=True)
        records = [{"id": i, "text": f"code {i}", "__dj__suffix__": s} for i, s in enumerate(SUFFIXES)]
        for n, params in enumerate(SUFFIX_CASES):
            rows = run_dj(args.dj_venv, records, [{"suffix_filter": params}], Path(tmp) / f"s{n}")
            suffix_cases.append({"params": params, "kept": kept_ids(rows, len(records), f"suffix_filter {params}")})
            print(f"suffix_filter {params}: done", flush=True)
        rows = run_dj(args.dj_venv, [{"id": i, "text": t} for i, t in enumerate(PLAIN)], ARXIV, Path(tmp) / "arxiv")
        kept_ids(rows, len(PLAIN), "the arXiv recipe")
        arxiv = {"kept": {str(r["id"]): r["text"] for r in rows}}
        print("the arXiv recipe: done", flush=True)
    fixture = {"data_juicer": data_juicer.__version__, "texts": texts, "cases": cases, "suffixes": SUFFIXES,
               "suffix_cases": suffix_cases, "arxiv_recipe": arxiv}
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
