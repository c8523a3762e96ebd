"""The base of every model: validators built on first use, field docs read for JSON Schema only.

A model's validator and serializer are built the first time it validates or serializes
(`defer_build`), so importing a model costs its class and fields only. The docstring under
each field is its description in the JSON Schema; reading the docstrings means reading and
parsing the models' source, which nothing but JSON Schema needs, so `model_json_schema` reads
them (once, for every model) before it generates a schema.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema, JsonSchemaMode

MODULES = ("attempt", "report", "plan", "ledger", "comparison", "regressions", "suite")
"""Every module of models, each after the modules whose models it uses."""

_documented = False


class SchemaModel(BaseModel):
    """A record model of the contract (see the module's documentation)."""

    model_config = ConfigDict(defer_build=True)

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool = True,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
        mode: JsonSchemaMode = "validation",
        *,
        union_format: Literal["any_of", "primitive_type_array"] = "any_of",
    ) -> dict[str, Any]:
        """Return the model's JSON Schema, every field described by its docstring."""
        document_fields()
        return super().model_json_schema(
            by_alias, ref_template, schema_generator, mode, union_format=union_format
        )


def field_docstrings(source: str) -> dict[str, dict[str, str]]:
    """Return class name -> field name -> docstring (cleaned) of a module's top-level classes.

    A field's docstring is the string statement right after its annotated assignment.
    """
    classes: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = classes.setdefault(node.name, {})
        for statement, following in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return classes


def document_fields() -> None:
    """Describe every field of every model by its docstring, and rebuild the models.

    A field with a description of its own keeps it; an inherited field keeps the one it has
    in the model it comes from. Models are rebuilt in the order they were defined (`MODULES`),
    so a model is rebuilt after the models it holds and its schema carries their descriptions.
    """
    global _documented
    if _documented:
        return
    package = __name__.rpartition(".")[0]
    models: list[type[SchemaModel]] = []
    for name in MODULES:
        module = importlib.import_module(f"{package}.{name}")
        try:
            docs = field_docstrings(inspect.getsource(module))
        except OSError:  # no source installed: fields are described by nothing, as in pydantic
            docs = {}
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, SchemaModel)
                and value.__module__ == module.__name__
            ):
                _describe(value, docs.get(value.__name__, {}))
                models.append(value)
    for model in models:
        model.model_rebuild(force=True, _parent_namespace_depth=0)
    _documented = True


def _describe(model: type[SchemaModel], docs: dict[str, str]) -> None:
    for name, field in model.__pydantic_fields__.items():
        if field.description is not None:
            continue
        if name in docs:
            field.description = docs[name]
            continue
        for base in model.__mro__[1:]:
            inherited = getattr(base, "__pydantic_fields__", {}).get(name)
            if inherited is not None:
                field.description = inherited.description
                break
