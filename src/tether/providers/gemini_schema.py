"""JSON Schema -> the OpenAPI 3.0 subset Gemini accepts for ``functionDeclarations[].parameters``.

Gemini's ``Schema`` object knows ``type`` (upper case), ``format``, ``description``, ``nullable``, ``enum``
(strings only), ``properties``, ``required``, ``items``, ``anyOf``, the size and range bounds (``minItems``,
``maxItems``, ``minLength``, ``maxLength``, ``minProperties``, ``maxProperties``, ``minimum``, ``maximum``),
``pattern``, ``default``, ``example`` and ``propertyOrdering``; an unknown field fails the whole request. So
the translation keeps a whitelist and rewrites what it can:

* ``$ref`` is inlined from ``$defs`` / ``definitions`` (a reference to itself, a recursive schema, becomes an
  untyped value: Gemini has no references);
* ``anyOf`` / ``oneOf`` with a ``{"type": "null"}`` branch, ``type: [X, "null"]`` and an enum holding
  ``None`` become ``nullable: true``; one branch left is merged into its parent, several stay ``anyOf``
  (``oneOf`` is read as ``anyOf``); ``allOf`` is merged into one schema;
* ``const`` becomes a one-value ``enum``; enums of non-strings, which Gemini cannot express, are dropped and
  listed in the description instead; an enum without a type is a string;
* ``exclusiveMinimum`` / ``exclusiveMaximum`` become ``minimum`` / ``maximum`` (one step inside for integers);
* tuple forms (``prefixItems``, ``items`` as a list) become ``items`` of ``anyOf`` the element schemas;
* ``format`` is kept only where Gemini accepts it (``enum``, ``date-time``; ``float``, ``double``;
  ``int32``, ``int64``); ``required`` keeps only names that are properties;
* everything else (``additionalProperties``, ``$schema``, ``$id``, ``title``, ``examples``, ``multipleOf``,
  ``uniqueItems``, ``not``, ``if``/``then``/``else``, ``patternProperties``, ...) is dropped.

A tool's schema may come from anywhere (an MCP server included), so the translation is total: any JSON value
gives a schema Gemini can read, never an exception. A keyword of the wrong JSON type (``required: 5``, a
``$defs`` that is a list, a ``description`` that is a number, a ``$ref`` to something that is not a schema)
is left out, and nodes nested deeper than :data:`MAX_DEPTH` become untyped values.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["to_gemini_schema"]

TYPES = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
FORMATS = {"STRING": {"enum", "date-time"}, "NUMBER": {"float", "double"}, "INTEGER": {"int32", "int64"}}
"""The formats Gemini accepts, by type; others are rejected by the API, so they are dropped."""
COPIED = (
    "description",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "pattern",
    "default",
    "example",
    "propertyOrdering",
)
"""Keywords Gemini knows under the same name and meaning."""
_NULL = {"type": "null"}
MAX_DEPTH = 48
"""Schema nodes nested deeper than this become untyped values (no real tool nests its arguments so deep)."""
_NUMBER_KEYWORDS = frozenset(
    {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "minimum", "maximum"}
)


def to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (JSON Schema) as a Gemini ``Schema`` object; see the module docstring."""
    if not isinstance(schema, dict):
        return {}
    definitions: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        if isinstance(found := schema.get(key), dict):
            definitions.update(found)
    return _Translator(definitions).node(schema, ())


class _Translator:
    __slots__ = ("definitions",)

    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions

    def node(self, schema: Any, seen: tuple[str, ...], depth: int = 0) -> dict[str, Any]:
        """One schema node, with ``$ref``s resolved; ``seen`` holds the references being expanded."""
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return {}  # ``true`` (anything), other degenerate forms, and nesting past the limit: untyped
        depth += 1
        schema, seen = self.resolve(schema, seen)
        schema = self.merge_all_of(schema, seen, depth)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if not isinstance(branches, list):
            return _finish(self.plain(schema, seen, depth))
        resolved = [self.resolve(b, seen) if isinstance(b, dict) else ({}, seen) for b in branches]
        kept = [(branch, deeper) for branch, deeper in resolved if branch != _NULL]
        rest = self.plain({k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}, seen, depth)
        if len(kept) == 1:
            # One branch left: it is the node; the outer keywords (a field's description, default) win.
            out = {**self.node(*kept[0], depth), **rest}
        else:
            out = {**rest, "anyOf": [self.node(branch, deeper, depth) for branch, deeper in kept]}
        if len(kept) < len(resolved):
            out["nullable"] = True
        return _finish(out)

    def resolve(self, schema: dict[str, Any], seen: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The schema a ``$ref`` points at with the sibling keywords laid over it, and the references seen."""
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema, seen
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        target = self.definitions.get(ref.rsplit("/", 1)[-1])
        if not isinstance(target, dict) or ref in seen:  # unknown or recursive: Gemini cannot say it: left open
            return siblings, seen
        resolved, deeper = self.resolve(target, (*seen, ref))
        return {**resolved, **siblings}, deeper

    def merge_all_of(self, schema: dict[str, Any], seen: tuple[str, ...], depth: int) -> dict[str, Any]:
        """``allOf`` folded into its parent: properties and required lists joined, other keywords laid over."""
        parts = schema.get("allOf")
        if not isinstance(parts, list) or depth > MAX_DEPTH:
            return schema
        merged: dict[str, Any] = {}
        for part in [*parts, {k: v for k, v in schema.items() if k != "allOf"}]:
            if not isinstance(part, dict):
                continue
            part = self.merge_all_of(self.resolve(part, seen)[0], seen, depth + 1)
            for key, value in part.items():
                if key == "properties":  # of the wrong type: left out, not laid over the others
                    if isinstance(value, dict):
                        merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    if isinstance(value, list):
                        known = merged.setdefault("required", [])
                        known += [name for name in value if isinstance(name, str) and name not in known]
                else:
                    merged[key] = value
        return merged

    def plain(self, schema: dict[str, Any], seen: tuple[str, ...], depth: int) -> dict[str, Any]:
        """A node without ``anyOf``: its type, enum, children and the keywords Gemini knows."""
        out: dict[str, Any] = {}
        kind = _type_of(schema, out)
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if isinstance(values, list):
            kind = _enum(values, kind, out, schema.get("description"))
        if kind is not None:
            out["type"] = kind
        for key in COPIED:
            if key in schema and key not in out and _fits(key, schema[key]):
                out[key] = schema[key]
        _exclusive_bounds(schema, kind, out)
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in FORMATS.get(kind or "", ()):
            out["format"] = fmt
        if isinstance(properties := schema.get("properties"), dict):
            out["properties"] = {name: self.node(sub, seen, depth) for name, sub in properties.items()}
            listed = schema.get("required")
            names = listed if isinstance(listed, list) else []
            if required := [name for name in names if isinstance(name, str) and name in properties]:
                out["required"] = required
        items = schema.get("prefixItems") or schema.get("items")
        if isinstance(items, list):
            elements = [self.node(item, seen, depth) for item in items]
            unique = [element for i, element in enumerate(elements) if element not in elements[:i]]
            out["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
        elif isinstance(items, dict):
            out["items"] = self.node(items, seen, depth)
        return out


def _fits(key: str, value: Any) -> bool:
    """Whether a copied keyword's value has the JSON type Gemini wants for it (else it is left out)."""
    if key in _NUMBER_KEYWORDS:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key in ("description", "pattern"):
        return isinstance(value, str)
    if key == "propertyOrdering":
        return isinstance(value, list) and all(isinstance(name, str) for name in value)
    return True  # default, example: any value


def _finish(out: dict[str, Any]) -> dict[str, Any]:
    """Turn the ``_nullable`` mark left by a type list or an enum into Gemini's ``nullable``."""
    if out.pop("_nullable", False):
        out["nullable"] = True
    return out


def _type_of(schema: dict[str, Any], out: dict[str, Any]) -> str | None:
    """The Gemini type of a node; ``type: [X, "null"]`` marks ``out`` nullable."""
    kind = schema.get("type")
    if isinstance(kind, list):
        named = [t for t in kind if t != "null"]
        if len(named) < len(kind):
            out["_nullable"] = True
        kind = named[0] if len(named) == 1 else None  # several types without anyOf: leave it open
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    if kind is None and ("items" in schema or "prefixItems" in schema):
        kind = "array"
    return TYPES.get(kind) if isinstance(kind, str) else None


def _enum(values: list[Any], kind: str | None, out: dict[str, Any], description: Any) -> str | None:
    """Put an enum (or a const) in ``out`` as Gemini takes it; returns the node's type."""
    if None in values:
        out["_nullable"] = True
        values = [v for v in values if v is not None]
    if values and all(isinstance(v, str) for v in values):
        out["enum"] = values
        return kind or "STRING"
    if values:  # numbers or booleans: Gemini enums are strings, so the choice goes into the description
        allowed = "Allowed values: " + ", ".join(json.dumps(v) for v in values) + "."
        out["description"] = f"{description} {allowed}" if isinstance(description, str) and description else allowed
    return kind


def _exclusive_bounds(schema: dict[str, Any], kind: str | None, out: dict[str, Any]) -> None:
    """``exclusiveMinimum`` / ``exclusiveMaximum`` (numbers, as JSON Schema 2019+ writes them) as bounds."""
    step = 1 if kind == "INTEGER" else 0
    low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(low, int | float) and not isinstance(low, bool) and "minimum" not in out:
        out["minimum"] = low + step
    if isinstance(high, int | float) and not isinstance(high, bool) and "maximum" not in out:
        out["maximum"] = high - step
