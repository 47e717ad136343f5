"""The OpenAPI document. Routes read their bodies themselves (so that every failure is an OpenAI
error, see app.read_request), so the request models are added to the document by hand."""
from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from chatlab._thirdparty import Jsonable
from chatlab.engine.request import ChatRequest, CompletionRequest

REF = "#/components/schemas/{model}"


def body_doc(cls: type) -> dict[str, Jsonable]:
    schema = {"$ref": REF.format(model=cls.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def openapi_schema(app: FastAPI) -> dict[str, Jsonable]:
    if app.openapi_schema is None:
        doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
        _, defs = models_json_schema([(ChatRequest, "validation"), (CompletionRequest, "validation")],
                                     ref_template=REF)
        doc.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        app.openapi_schema = doc
    return app.openapi_schema
