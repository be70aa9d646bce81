"""Linearizability checking: WGL search with P-compositionality, models, witnesses, SVG.

Entry points: :func:`check` (library), :func:`checker` (harness), ``python -m
checkers.linearizable`` (command line), :func:`render_html` (visual explanation).
"""

from checkers.linearizable.engine import Budget, LinResult, PartResult, check
from checkers.linearizable.history import (
    UNKNOWN,
    LinHistory,
    Operation,
    from_ops,
    parse_porcupine_etcd,
    parse_porcupine_kv,
    read_file,
)
from checkers.linearizable.models import MODELS, Model, ModelError, get_model
from checkers.linearizable.svg import render_html
from checkers.linearizable.wrapper import checker, to_result

__all__ = [
    "MODELS", "UNKNOWN", "Budget", "LinHistory", "LinResult", "Model", "ModelError",
    "Operation", "PartResult", "check", "checker", "from_ops", "get_model",
    "parse_porcupine_etcd", "parse_porcupine_kv", "read_file", "render_html", "to_result",
]
