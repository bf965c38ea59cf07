"""YAML for recipes, with aliases bounded: a 461-byte file whose anchors nest nine deep expands to
gigabytes wherever it is printed or copied (an error message, the run's provenance). The document
is composed first (anchors shared, nothing expanded), its expanded size is counted over the node
graph, and only a document within the bounds is built into Python values."""
from __future__ import annotations

import re

import yaml

from djx.core.errors import RecipeError
from djx.core.io.regular_file import FileRefused, read_regular

MAX_RECIPE_BYTES = 4 << 20  # a recipe is a page of YAML; this is a cap against a device or a dump
MAX_ALIASES = 10_000
MAX_EXPANDED = 10_000_000  # nodes (16 units each) plus scalar characters, as if every alias were copied


class RecipeLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading `2e5`, `1.5e3` and `1e-3` as numbers, as Data-Juicer's config
    parser (jsonargparse) and YAML 1.2 do; PyYAML alone (YAML 1.1) wants a dot and a signed exponent
    (`2.0e+5`) and reads them as strings. Data-Juicer's own recipes write `max_len: 2e5`."""


RecipeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+.0123456789"))


class YamlTooLarge(ValueError):
    """The document's aliases exceed the bounds; the message says which and by how much."""


def read_recipe_file(path: str):
    """The YAML value of the recipe file at `path`, opened as a regular file under a cap (a FIFO
    or device there is refused at once); RecipeError saying what to change."""
    try:
        return safe_load_bounded(read_regular(path, MAX_RECIPE_BYTES).decode("utf-8"))
    except FileRefused as e:
        if e.kind == "a folder":
            raise RecipeError(f"recipe {path} is a folder; give the path of the recipe file (.yaml)") from None
        raise RecipeError(f"recipe {path}: {e}; give the path of a recipe file (.yaml)") from None
    except YamlTooLarge as e:
        raise RecipeError(f"recipe {path}: {e}") from None
    except FileNotFoundError:
        raise RecipeError(f"recipe not found: {path}") from None
    except UnicodeDecodeError as e:
        raise RecipeError(f"recipe {path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    except OSError as e:
        raise RecipeError(f"cannot read recipe {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise RecipeError(f"{path}: not valid YAML: {e}") from None


def safe_load_bounded(text: str, max_aliases: int = MAX_ALIASES, max_expanded: int = MAX_EXPANDED):
    """`yaml.safe_load(text)`, refusing (YamlTooLarge) a document with more than `max_aliases`
    aliases, recursive aliases, or an expanded size over `max_expanded`."""
    loader = RecipeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooLarge("the YAML nests too deep to read") from None
        if node is None:
            return None
        _check_expansion(node, max_aliases, max_expanded)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root, max_aliases: int, max_expanded: int) -> None:
    """Expanded size of each node once (memoized, iteratively: no recursion limit), in post-order."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    aliases = 0
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 16 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > max_expanded:
                raise YamlTooLarge(f"its aliases expand it past {max_expanded} units (nodes and characters); "
                                   f"write the repeated values out, or fewer of them")
            continue
        if key in sizes or key in on_path:
            if key in on_path:
                raise YamlTooLarge("an alias refers to a node that contains it (a recursive alias)")
            aliases += 1
            if aliases > max_aliases:
                raise YamlTooLarge(f"more than {max_aliases} aliases (*name); write the values out")
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 16 + len(node.value)
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
