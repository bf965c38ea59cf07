"""The `djx` command: process, ops, check, analyze. A thin layer over the Python API."""
from __future__ import annotations

import argparse
import os
import sys

from djx.core.errors import DjxError
from contextlib import nullcontext

from djx.core.run.stop import Stop, Stopped, StoppedNow


def _plugins(values) -> list[str]:
    """--custom-ops values: paths are relative to the current folder (modules stay names)."""
    return [os.path.abspath(v) if v.endswith(".py") or "/" in v else v for v in values or ()]


def _recipe_arg(args) -> str:
    """The recipe, given as `djx process RECIPE` or, as in Data-Juicer, `--config RECIPE`."""
    if args.config and args.recipe and os.path.abspath(args.config) != os.path.abspath(args.recipe):
        raise DjxError(f"two recipes given ({args.recipe} and --config {args.config}); give one")
    if not (args.config or args.recipe):
        raise DjxError("no recipe given: `djx process RECIPE.yaml` (or `djx process --config RECIPE.yaml`)")
    return args.config or args.recipe


def _paths_from_cwd(overrides: dict) -> None:
    """Paths typed on the command line are relative to the current folder: --set dataset_path=P
    and --set export_path=P as --export-path P, --set custom_ops=[P] as --custom-ops P (a recipe's
    own paths are relative to the recipe)."""
    from djx.core.recipe.dj_compat import refuse_mixture
    for key in ("dataset_path", "export_path"):
        value = overrides.get(key)
        if isinstance(value, str) and value:
            refuse_mixture(value)
            overrides[key] = os.path.abspath(os.path.expanduser(value))
    if isinstance(overrides.get("image_root"), str) and overrides["image_root"]:  # likewise
        overrides["image_root"] = os.path.abspath(os.path.expanduser(overrides["image_root"]))
    for key in ("custom_ops", "custom_operator_paths"):  # as --custom-ops P: files and folders typed here
        entries = overrides.get(key)
        if isinstance(entries, (list, str)):
            overrides[key] = [_from_cwd(e) for e in ([entries] if isinstance(entries, str) else entries)]


def _from_cwd(entry):
    """A plug-in path typed on the command line (a .py file, or anything with a /), made absolute from
    the current folder; a module name stays a name."""
    if isinstance(entry, str) and (entry.endswith(".py") or "/" in entry):
        return os.path.abspath(os.path.expanduser(entry))
    return entry


def _process(args, stop=None) -> int:
    from djx.core.pipeline import Pipeline
    from djx.core.recipe.overrides import parse_set
    overrides = {**getattr(args, "dj_overrides", {}), **parse_set(args.set)}
    _paths_from_cwd(overrides)
    if args.np is not None:
        overrides["np"] = args.np
    if args.export_path:
        overrides["export_path"] = os.path.abspath(args.export_path)
    if args.executor:
        overrides["executor"] = args.executor
    if args.report:
        overrides["report"] = True
    with stop.at_once() if stop is not None else nullcontext():  # recipe, plug-ins, resource files
        pipe = Pipeline.from_recipe(_recipe_arg(args), overrides, _plugins(args.custom_ops))
    if args.dry_run:
        from djx.core.plan.preflight import dry_run
        return dry_run(pipe, limit=args.limit)
    pipe.run(restart=args.restart, progress=not args.quiet, limit=args.limit, stop=stop)
    if pipe.recipe.report:  # the report's path, last: the line to open
        from djx.analyze.analysis import default_out_dir
        print(os.path.join(default_out_dir(pipe.recipe.export_path), "report.html"), flush=True)
    return 0


def _ops(args) -> int:
    from djx.core.op.base import Filter
    from djx.core.op.deduplicator import Deduplicator
    from djx.core.op.params import describe_doc, describe_params, shown
    from djx.core.op.registry import aliases, get_op_class, load_custom_ops, load_entry_point_ops, registered_ops
    load_custom_ops(_plugins(args.custom_ops), os.getcwd())
    load_entry_point_ops()
    if args.name:
        cls = get_op_class(args.name)
        names = [cls.name]
    else:
        names = list(registered_ops())
    alias_of = {}
    for a, n in aliases().items():
        alias_of.setdefault(n, []).append(a)
    for name in names:
        cls = get_op_class(name)
        kind = "deduplicator" if issubclass(cls, Deduplicator) else "filter" if issubclass(cls, Filter) else "mapper"
        lead, rest = describe_doc(cls.__doc__)
        print(f"{name}  ({kind})" + (f"  aliases: {', '.join(alias_of[name])}" if name in alias_of else ""))
        print(f"    {lead}")
        if getattr(cls, "stats_keys", ()):
            print(f"    stats: {', '.join(cls.stats_keys)}")
        for pname, ptype, default in describe_params(cls):
            print(f"    {pname}: {ptype} = {shown(default)}")
        if args.name and rest:
            print("\n".join(("    " + line.strip()).rstrip() for line in rest.splitlines()))
    return 0


def _check(args) -> int:
    from djx.core.run.check import check_outputs, written_outputs
    from djx.core.run.chain import OpChain
    from djx.core.io.output_reader import export_files
    from djx.core.io.outputs import OutputPaths
    _export_arg(args, "output", "check")
    paths = OutputPaths.for_export(args.output)
    if not export_files(paths.export):
        unfinished = os.path.isdir(paths.state_dir)  # a run stopped (killed, a full disk) before its finish
        raise DjxError(f"no such output: {paths.export} (nor shards of it)" + (
            f"; the run writing it has not finished (its work so far is in {paths.state_dir}): run the same "
            f"djx process command again to resume it" if unfinished else ""))
    input_count, dropped_count, written = args.input_count, None, ()
    if input_count is not None and input_count < 0:
        raise DjxError(f"--input-count {input_count}: give the number of input samples (0 or more)")
    summary = _check_summary(paths.summary) if os.path.exists(paths.summary) else None
    if summary is not None:
        dropped_count, written = summary.get("dropped"), written_outputs(summary)
        if input_count is None:
            input_count = summary.get("input")
            if summary.get("partial") and input_count is not None:
                print(f"note: a trial run (--limit {summary.get('limit')}): checked against its first "
                      f"{input_count} input samples")
    recipe = _check_recipe(args, summary, paths.summary)
    chain = OpChain(recipe.build_ops(load_resources=False), recipe.run_context())
    from djx.core.run.provenance import stats_key
    from djx.core.plan.resources import cpu_count
    from djx.core.run.formats import signed_form
    report = check_outputs(paths.export, paths.dropped, paths.rejected, chain.filter_stats_keys(),
                           recipe.image_key, input_count, dropped_count, ops=chain.ops, written=written,
                           verify_key=stats_key(), claimed=_claimed(summary), workers=cpu_count(),
                           signed_form=signed_form(chain.ctx))
    print(_terminal_safe(report.describe()))
    if os.path.isdir(paths.state_dir):  # a later run (--restart, new data) stopped before its finish
        print(f"note: a run writing to this export has not finished (its work so far is in {paths.state_dir}): "
              f"these outputs are an earlier run's; run the same djx process command again to finish it")
    if input_count is None:
        print("note: no input count in a run summary and no --input-count given: counts were not checked")
    return 0 if report.ok else 1


def _claimed(summary: dict | None) -> dict:
    """The kept, dropped and rejected counts a run summary states (each checked against the files)."""
    return {k: summary.get(k) for k in ("kept", "dropped", "rejected")} if summary is not None else {}


def _check_summary(path: str) -> dict:
    from djx.analyze.outputs import read_summary
    try:
        summary = read_summary(path)
    except DjxError as e:
        raise DjxError(f"{e}; give --input-count (and --recipe) to check without it") from None
    for what in summary.get("unusable") or []:
        print(f"note: the run summary {path} has no usable {what}: left out")
    return summary


def _check_recipe(args, summary: dict | None, summary_path: str):
    """--recipe when given, else the effective recipe the run's summary recorded (overrides included;
    plug-ins only those named by --custom-ops: a summary never chooses code to import)."""
    from djx.core.recipe.recipe import load_recipe
    from djx.analyze.explain import recorded_recipe, _recorded_plugins
    if args.recipe:
        return load_recipe(args.recipe, custom_ops=_plugins(args.custom_ops))
    recipe = recorded_recipe(summary, _plugins(args.custom_ops))
    if recipe is None:
        raise DjxError(f"no --recipe given and {summary_path} records no recipe (no summary, or an older "
                       f"one): give the run's recipe with --recipe")
    if _recorded_plugins(summary) and not args.custom_ops:
        raise DjxError(f"the recipe recorded in {summary_path} uses plug-ins ({', '.join(_recorded_plugins(summary))}),"
                       f" which a summary never loads: name them with --custom-ops, or give --recipe")
    return recipe


def _analyze(args, stop=None) -> int:
    from djx.analyze import analyze
    _export_arg(args, "export", "analyze")
    with stop.at_once("nothing was written: run the same command again") if stop is not None else nullcontext():
        recipe = _analyze_recipe(args)
    result = analyze(args.export, out_dir=args.out, ops=recipe.build_ops(load_resources=False) if recipe else None,
                     recipe=recipe, stop=stop)
    if args.open:
        _open_report(result.report)
    return 0


def _open_report(path: str) -> None:
    """Open report.html in the user's browser; with none (or one that fails), say where it is."""
    import pathlib
    import webbrowser
    url = pathlib.Path(path).resolve().as_uri()
    try:
        opened = webbrowser.open(url)
    except Exception:  # noqa: BLE001 - no browser is no failure of the analysis
        opened = False
    if not opened:
        print(f"no browser to open it here: open {path} ({url})")


def _analyze_recipe(args):
    """--recipe, else the effective recipe the run's summary recorded (thresholds, text and image keys)
    when its ops build without plug-ins the user did not name; else None (the summary's op names)."""
    from djx.core.recipe.recipe import load_recipe
    if args.recipe:
        return load_recipe(args.recipe, custom_ops=_plugins(args.custom_ops))
    from djx.analyze.explain import _recorded_plugins, recorded_recipe
    from djx.analyze.outputs import output_paths, read_summary
    paths = output_paths(args.export)  # no such export: the error analyze itself gives
    try:
        summary = read_summary(paths.summary)
        if _recorded_plugins(summary) and not args.custom_ops:
            return None  # a summary never chooses code to import
        recipe = recorded_recipe(summary, _plugins(args.custom_ops))
        if recipe is not None:
            recipe.build_ops(load_resources=False)
        return recipe
    except DjxError as e:
        print(f"note: the recipe recorded in the run's summary is not used ({e}): give --recipe for thresholds")
        return None


def _export_arg(args, attr: str, command: str) -> None:
    """The export given, or the one the recipe given (positional or --config) writes; that recipe
    then reads it (its thresholds and keys)."""
    from djx.analyze.export_arg import resolve_export
    export, recipe = resolve_export(command, getattr(args, attr), args.config, args.recipe, _plugins(args.custom_ops))
    setattr(args, attr, export)
    args.recipe = recipe


def _explain(args) -> int:
    from djx.analyze.explain import explain
    from djx.analyze.export_arg import is_recipe
    if args.config and args.export and not args.id and not args.where and not is_recipe(args.export):
        args.export, args.id = None, args.export  # `djx explain --config RECIPE ID`
    _export_arg(args, "export", "explain")
    print(explain(args.export, args.id, args.where, args.recipe, _plugins(args.custom_ops)))
    return 0


def _add_process(sub) -> argparse.ArgumentParser:
    """`djx process RECIPE`: run a recipe."""
    p = sub.add_parser("process", help="run a recipe")
    p.add_argument("recipe", nargs="?", help="the recipe, a YAML file in Data-Juicer's format (dataset_path, "
                   "export_path, process: [...]); its relative paths are relative to its own folder")
    p.add_argument("--config", metavar="RECIPE", help="the recipe, as Data-Juicer's `dj-process --config` takes it")
    p.add_argument("--np", type=int, help="number of workers (overrides the recipe)")
    p.add_argument("--export-path", help="where the kept samples go (overrides the recipe); relative to the current folder")
    p.add_argument("--executor", choices=["local", "ray"])
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any recipe key; dotted keys reach into ops, e.g. text_length_filter.min_len=3 "
                        "(an op the recipe has once) or process.0.text_length_filter.min_len=3; Data-Juicer's "
                        "--KEY VALUE and --OP.PARAM VALUE work too; dataset_path and export_path given here are "
                        "relative to the current folder")
    p.add_argument("--custom-ops", action="append", metavar="PATH_OR_MODULE", help="load plug-in ops")
    p.add_argument("--dry-run", action="store_true",
                   help="check what can be checked without running (dataset, models, memory, paths), print the plan; "
                        "exit 1 on a problem")
    p.add_argument("--restart", action="store_true", help="discard an unfinished run's state and start over")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--report", action="store_true", help="write the analysis (djx analyze) next to the export")
    p.add_argument("--limit", type=int, metavar="N",
                   help="a trial run: process the first N samples and estimate the whole dataset")
    p.set_defaults(fn=_process, stoppable=True)
    return p


def _split_dj_options(process: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], dict]:
    """`djx process` also takes what Data-Juicer's `dj-process` takes: `--KEY VALUE` for any recipe
    key (--dataset_path, --export_path, --np, --text_keys ...) and `--OP.PARAM VALUE`; they are
    overrides, as --set KEY=VALUE is."""
    from djx.core.recipe.overrides import dj_options
    commands = [i for i, a in enumerate(argv) if not a.startswith("-")]
    if not commands or argv[commands[0]] != "process":
        return argv, {}
    at = commands[0] + 1
    own = {o for action in process._actions for o in action.option_strings}
    rest, overrides = dj_options(argv[at:], own)
    return argv[:at] + rest, overrides


def build_parser() -> argparse.ArgumentParser:
    """djx's command line: process, ops, check, analyze, explain, convert."""
    from djx import __version__
    parser = argparse.ArgumentParser(prog="djx", description="Clean multimodal training data.")
    parser.add_argument("--version", action="version", version=f"djx {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)

    parser.process = _add_process(sub)  # kept: main() splits Data-Juicer's options by its own

    p = sub.add_parser("ops", help="list ops, or show one")
    p.add_argument("name", nargs="?")
    p.add_argument("--custom-ops", action="append", metavar="PATH_OR_MODULE")
    p.set_defaults(fn=_ops)

    p = sub.add_parser("check", help="check an output's stats completeness and counts")
    p.add_argument("output", nargs="?", help="the export path (kept samples) of a run, or its recipe (.yaml)")
    p.add_argument("--config", metavar="RECIPE", help="the run's recipe, as `djx process --config` takes it: "
                   "checks the export it writes")
    p.add_argument("--recipe", help="the run's recipe (default: the effective one its summary recorded)")
    p.add_argument("--custom-ops", action="append", metavar="PATH_OR_MODULE")
    p.add_argument("--input-count", type=int, help="input samples (default: from the run summary)")
    p.set_defaults(fn=_check)

    p = sub.add_parser("analyze", help="stats table, histograms, keep-rate curves and report.html of a run's outputs")
    p.add_argument("export", nargs="?", help="the export path (kept samples) of a finished run, or its recipe "
                   "(.yaml): the export it wrote")
    p.add_argument("--config", metavar="RECIPE", help="the run's recipe, as `djx process --config` takes it: "
                   "analyzes the export it wrote")
    p.add_argument("--recipe", help="the run's recipe: draws its thresholds, fills the galleries "
                                    "(default: the effective one its summary recorded)")
    p.add_argument("--out", help="folder for the analysis (default: <stem>.analysis/ next to the export)")
    p.add_argument("--open", action="store_true", help="open report.html in the browser when written")
    p.add_argument("--custom-ops", action="append", metavar="PATH_OR_MODULE", help="load plug-in ops")
    p.set_defaults(fn=_analyze, stoppable=True)

    p = sub.add_parser("explain", help="one sample's journey: the output it is in, each op's stats, thresholds and verdict")
    p.add_argument("export", nargs="?", help="the export path (kept samples) of a finished run, or its recipe (.yaml)")
    p.add_argument("id", nargs="?", help="the sample's __dj__pos__ (its input record index)")
    p.add_argument("--config", metavar="RECIPE", help="the run's recipe, as `djx process --config` takes it")
    p.add_argument("--where", metavar="FIELD=VALUE", help="select the sample by a field instead, e.g. id=demo-017")
    p.add_argument("--recipe", help="the run's recipe (default: the one its summary recorded)")
    p.add_argument("--custom-ops", action="append", metavar="PATH_OR_MODULE", help="load plug-in ops")
    p.set_defaults(fn=_explain)

    from djx.core.io.llava_files import add_convert_parser
    add_convert_parser(sub)
    return parser


def _terminal_safe(message: str) -> str:
    """An error message may quote what a dataset holds (a reason, a path): its lines are djx's, the
    control characters in them are shown as escapes."""
    from djx.core.io.terminal_text import safe
    return "\n".join(safe(line) for line in message.split("\n"))


def main(argv=None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # `djx` alone: the commands, not a usage error
        parser.print_help()
        return 2
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv, dj_overrides = _split_dj_options(parser.process, argv)
    except DjxError as e:
        print(f"djx: error: {e}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    args.dj_overrides = dj_overrides
    # process and analyze stop between steps on SIGTERM, saving what they did; the other commands
    # only read, and a SIGTERM ends them as it ends any program
    stop = Stop() if getattr(args, "stoppable", False) else None
    try:
        if stop is None:
            return args.fn(args)
        stop.install()
        return args.fn(args, stop)
    except DjxError as e:
        print(f"djx: error: {_terminal_safe(str(e))}", file=sys.stderr)
        return 1
    except (Stopped, StoppedNow) as e:
        print(f"djx: {e}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("djx: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `djx ops | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if stop is not None:
            stop.uninstall()


if __name__ == "__main__":
    sys.exit(main())
