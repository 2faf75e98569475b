"""UpdateItem and condition expressions in the embedded moto server without moto's repeated work.

Measured on the local stack (`make bench-local`, CPU per request in the moto server process):
an UpdateItem cost ~8.5 ms, four times a 2-item transaction, and the workers send four of them
per job. In moto 5.2.5 almost all of it is expression handling that does not depend on the
request's values:

- **The UpdateExpression parse** runs twice per request (the handler, to find the names and
  values it uses; the backend, to apply it). The tree is a function of the string alone — names
  and values are bound later, on the validator's own copy, and the handler only reads it — so
  it is remembered per string (bounded; an expression that fails to parse raises every time).
- **The validator's copy** of that tree (`copy.deepcopy` in `Validator.__init__`, ~0.8 ms for a
  claim's tree): a remembered tree is also kept pickled, and its copy is an unpickle (~0.08 ms)
  — the same tree, node for node. Any other tree is deep-copied as before.
- **The validator's ten tree walks** (`DepthFirstTraverser.traverse`) rebuilt the walker's
  processing map twice at every node and asked the abstract base class of every node whether
  it was a node. The walk here visits the same nodes in the same order, calls the same
  `pre_processing_of_child` hook and the same processor, and puts the result in the same place;
  it builds the map once per walk and answers "is this a node, and which processor takes it"
  once per node class.
- **Two of those walks check every clause node against its whole subtree** (quadratic in the
  size of the expression): `ActionCountValidator` counts the ADD, REMOVE and SET clauses under
  each node, and `OverlappingPathsValidator` compares the paths of every action under each node.
  The counts are gathered here in one pass, node by node in the same order, raising the same
  error at the same node; the path check runs at the root, whose actions include every other
  node's (a duplicate or overlap anywhere is one at the root), and only when the root finds one
  does moto's own walk run, to raise exactly the error moto raises.
- **The ConditionExpression lexer** tries seven regular expressions at every token; the tokens
  depend on the string alone (names and values are looked up after lexing), so they are
  remembered per string and every parse gets fresh nodes.

None of this changes an answer moto gives, with one known exception: an update of roughly
160–190 SET actions, which moto's recursive `deepcopy` fails with RecursionError, succeeds here
(the unpickle is not recursive), as it would on DynamoDB; deeper ones fail as moto's do (a
strict xfail test pins the window). `tests/integration/test_moto_expressions.py` sends the same
updates and conditions (fixed lists, more shapes alone and in a transaction, and hypothesis-made
streams) through patched and unpatched moto and compares every answer and item.
"""

from __future__ import annotations

import copy
import pickle
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from leasehold_dev.local.moto.transactions import require_pinned_moto

MAX_EXPRESSIONS = 512
"""Distinct expressions remembered (of each kind); past this a memo is cleared and starts again."""

_saved: dict[str, Any] = {}  # moto's originals, once install() replaced them
_trees: dict[str, Any] = {}  # UpdateExpression → its parsed tree
_pickled: dict[int, tuple[Any, bytes]] = {}  # id(tree) → (tree, its pickle)
_tokens: dict[str, tuple[tuple[str, str, str, str], ...]] = {}
_lock = threading.Lock()


def _parse_update_expression(original: Callable[[str], Any]) -> Callable[[str], Any]:
    def make(expression_str: str) -> Any:
        tree = _trees.get(expression_str)
        if tree is not None:
            return tree
        tree = original(expression_str)  # raises for a bad expression: nothing remembered
        try:
            blob = pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)
        except RecursionError:  # too deep to pickle: not remembered, so the validator's own
            return tree  # deepcopy meets it, and fails, where moto's does
        with _lock:
            if len(_trees) >= MAX_EXPRESSIONS:
                _trees.clear()
                _pickled.clear()
            _trees[expression_str] = tree
            _pickled[id(tree)] = (tree, blob)
        return tree

    make.__wrapped__ = original  # type: ignore[attr-defined]
    return make


def _deepcopy(value: Any, memo: Any = None) -> Any:
    """moto's validators' `deepcopy`: a remembered tree is unpickled, anything else deep-copied."""
    kept = _pickled.get(id(value))
    if memo is None and kept is not None and kept[0] is value:
        return pickle.loads(kept[1])
    return copy.deepcopy(value, memo)


def _traverse(node_class: type) -> Callable[[Any, Any], Any]:
    """`DepthFirstTraverser.traverse` with the same visits, hooks and results as moto's
    `traverse_node_recursively`, without its per-node overheads."""
    from moto.dynamodb.parsing import ast_nodes

    plain_hook = getattr(ast_nodes, "DepthFirstTraverser").pre_processing_of_child  # noqa: B009
    is_node: dict[type, bool] = {}

    def traverse(self: Any, root: Any) -> Any:
        mapping = self._processing_map()
        kinds = tuple(mapping)
        chosen: dict[type, Any] = {}  # node class → its processor (None: not processed)
        hook = (
            None
            if type(self).pre_processing_of_child is plain_hook
            else self.pre_processing_of_child
        )

        def processor_for(cls: type) -> Any:
            if cls not in chosen:
                chosen[cls] = None
                if issubclass(cls, kinds):
                    for class_key, processor in mapping.items():
                        if issubclass(cls, class_key):
                            chosen[cls] = processor
                            break
            return chosen[cls]

        def visit(node: Any, child_id: int) -> Any:
            cls = type(node)
            node_like = is_node.get(cls)
            if node_like is None:
                node_like = is_node[cls] = isinstance(node, node_class)
            if not node_like:
                return node
            parent_node = node.parent
            children = node.children
            if children is not None:
                for i, child_node in enumerate(children):
                    if hook is not None:
                        hook(node, i)
                    visit(child_node, i)
            processor = processor_for(cls)
            if processor is not None:
                node = processor(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
            return node

        return visit(root, -1)

    return traverse


def _count_actions(node_class: type) -> Callable[[Any, Any], Any]:
    """`ActionCountValidator.traverse`: moto's check of every UpdateExpression node (more than one
    ADD, REMOVE or SET clause found by `find_clauses` under it raises TooManyClauses, in that
    order), with each node's counts built from its children's instead of searched again."""
    from moto.dynamodb.exceptions import TooManyClauses
    from moto.dynamodb.parsing import ast_nodes

    clauses = (
        getattr(ast_nodes, "UpdateExpressionAddClause"),  # noqa: B009
        getattr(ast_nodes, "UpdateExpressionRemoveClause"),  # noqa: B009
        getattr(ast_nodes, "UpdateExpressionSetClause"),  # noqa: B009
    )
    searched = (getattr(ast_nodes, "Expression"), getattr(ast_nodes, "UpdateExpressionFunction"))  # noqa: B009
    checked = getattr(ast_nodes, "UpdateExpression")  # noqa: B009
    names = ("ADD", "REMOVE", "SET")

    def traverse(self: Any, root: Any) -> Any:
        def visit(node: Any) -> list[int]:
            found = [0, 0, 0]  # what find_clauses finds under `node`, per clause type
            for child in node.children or []:
                below = visit(child) if isinstance(child, node_class) else [0, 0, 0]
                kind = type(child)
                searchable = isinstance(child, searched)
                for n, clause in enumerate(clauses):
                    if kind is clause:
                        found[n] += 1
                    elif searchable:
                        found[n] += below[n]
            if isinstance(node, checked):
                for n, name in enumerate(names):
                    if found[n] > 1:
                        raise TooManyClauses(name)
            return found

        if isinstance(root, node_class):
            visit(root)
        return root

    return traverse


def _paths_at_the_root(moto_traverse: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`OverlappingPathsValidator.traverse`: the check at the root first; moto's walk only when
    it fails (to raise moto's error from moto's node) or the root is not an UpdateExpression."""
    from moto.dynamodb.parsing import ast_nodes

    checked = getattr(ast_nodes, "UpdateExpression")  # noqa: B009

    def traverse(self: Any, root: Any) -> Any:
        if isinstance(root, checked):
            try:
                self.check_for_overlapping_paths(root)
                return root
            except Exception:  # noqa: BLE001 - moto's own walk raises moto's own error
                pass
        return moto_traverse(self, root)

    return traverse


def _lex_condition_expression(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def lex(self: Any) -> Any:
        tokens = _tokens.get(self.condition_expression)
        if tokens is None:
            nodes = original(self)  # raises for a bad expression: nothing remembered
            if any(node.children for node in nodes):  # not moto 5.2.5's lexer: do not keep
                return nodes
            tokens = tuple((n.nonterminal, n.kind, n.text, n.value) for n in nodes)
            with _lock:
                if len(_tokens) >= MAX_EXPRESSIONS:
                    _tokens.clear()
                _tokens[self.condition_expression] = tokens
        return deque(self.Node(term, kind, text, value, []) for term, kind, text, value in tokens)

    lex.__wrapped__ = original  # type: ignore[attr-defined]
    return lex


def _modules() -> tuple[Any, Any, Any, Any]:
    from moto.dynamodb import comparisons
    from moto.dynamodb.parsing import ast_nodes, expressions, validators

    return comparisons, ast_nodes, expressions, validators


def installed() -> bool:
    return "parse" in _saved


def install() -> None:
    """Use the memos, the fast copy and the fast walk in this process's moto. Idempotent.
    Raises MotoVersionError, changing nothing, on any moto but the pinned release."""
    require_pinned_moto("expressions", "expression parsers and validators")
    if installed():
        return
    comparisons, ast_nodes, expressions, validators = _modules()
    parser = expressions.UpdateExpressionParser
    lexer = comparisons.ConditionExpressionParser
    walker = ast_nodes.DepthFirstTraverser
    _saved["parse"] = parser.__dict__["make"]  # a classmethod
    _saved["deepcopy"] = validators.deepcopy
    _saved["traverse"] = walker.__dict__["traverse"]
    _saved["lex"] = lexer.__dict__["_lex_condition_expression"]
    counter, paths = validators.ActionCountValidator, validators.OverlappingPathsValidator
    fast_walk = _traverse(ast_nodes.Node)
    setattr(parser, "make", staticmethod(_parse_update_expression(parser.make)))  # noqa: B010
    setattr(validators, "deepcopy", _deepcopy)  # noqa: B010
    setattr(walker, "traverse", fast_walk)  # noqa: B010
    setattr(counter, "traverse", _count_actions(ast_nodes.Node))  # noqa: B010
    setattr(paths, "traverse", _paths_at_the_root(fast_walk))  # noqa: B010
    lex = _lex_condition_expression(_saved["lex"])
    setattr(lexer, "_lex_condition_expression", lex)  # noqa: B010


def uninstall() -> None:
    """Put moto's own code back (tests compare both)."""
    if not installed():
        return
    comparisons, ast_nodes, expressions, validators = _modules()
    setattr(expressions.UpdateExpressionParser, "make", _saved.pop("parse"))  # noqa: B010
    setattr(validators, "deepcopy", _saved.pop("deepcopy"))  # noqa: B010
    setattr(ast_nodes.DepthFirstTraverser, "traverse", _saved.pop("traverse"))  # noqa: B010
    for validator in (validators.ActionCountValidator, validators.OverlappingPathsValidator):
        if "traverse" in validator.__dict__:
            delattr(validator, "traverse")  # inherited from the walker again
    lex = _saved.pop("lex")
    setattr(comparisons.ConditionExpressionParser, "_lex_condition_expression", lex)  # noqa: B010
    with _lock:
        _trees.clear()
        _pickled.clear()
        _tokens.clear()
