"""One decoding rule for every request body, as Go's encoding/json applies it in AList.

The table is every ``RequestBody`` model the application defines (found, not listed),
times every field: ``null`` and a missing key give the same value, unknown keys are
ignored, and a value of the wrong JSON type is refused.
"""

from __future__ import annotations

from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

import manifold.app  # noqa: F401  (imports every route module, so every model exists)
from manifold.api.schemas import RequestBody

# A value of each JSON type; a field refuses every one that is not its own.
_SAMPLES: dict[str, Any] = {
    "string": "text",
    "number": 7,
    "bool": True,
    "array": ["a"],
    "object": {"a": 1},
}

# Defaults that differ from Go's zero value, each because the handler treats the zero
# value exactly as this default (AList cleans "" to "/", and a page below 1 to 1), or
# because Manifold fills in what AList would refuse. Anything else must be the zero value.
_NOT_ZERO = {
    ("UserBody", "base_path"): "/",
    ("SearchBody", "parent"): "/",
    ("ListBody", "path"): "/",
    ("ListBody", "page"): 1,
    ("GetBody", "path"): "/",
    ("DirsBody", "path"): "/",
    ("OtherBody", "path"): "/",
    ("ArchiveMetaBody", "path"): "/",
    ("ArchiveListBody", "path"): "/",
    ("ArchiveListBody", "page"): 1,
    ("ArchiveListBody", "inner_path"): "/",
    ("DecompressBody", "inner_path"): "/",
    ("StorageBody", "cache_expiration"): 30,
    ("StorageBody", "addition"): "{}",
    ("StorageBody", "webdav_policy"): "native_proxy",
}

# Fields AList decodes from a string or an array of strings (its StringOrArray).
_STRING_OR_ARRAY = {("DecompressBody", "name")}


def _models() -> list[type[RequestBody]]:
    found: list[type[RequestBody]] = []
    pending = list(RequestBody.__subclasses__())
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return sorted(found, key=lambda m: m.__name__)


MODELS = _models()
FIELDS = [(m, name) for m in MODELS for name in m.model_fields]
LIST_FIELDS = [(m, f) for m, f in FIELDS if get_origin(m.model_fields[f].annotation) is list]


def _kind(annotation: Any) -> str | None:
    """The JSON type a field takes, or None when it takes any JSON value."""
    origin = get_origin(annotation)
    if origin is list:
        return "array"
    if origin is not None and get_args(annotation):
        inner = get_args(annotation)[0]
        if inner in (str, int, bool):
            return _kind(inner)
    if annotation is str:
        return "string"
    if annotation is bool:
        return "bool"
    if isinstance(annotation, type) and issubclass(annotation, int | float):
        return "number"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return None


def _zero(kind: str | None) -> Any:
    return {"string": "", "number": 0, "bool": False, "array": [], "object": {}}.get(kind)


def test_the_table_covers_the_api() -> None:
    names = {m.__name__ for m in MODELS}
    assert {"LoginBody", "ListBody", "StorageBody", "UserBody", "RemoveBody"} <= names
    assert len(FIELDS) > 80
    assert len(LIST_FIELDS) >= 4


@pytest.mark.parametrize(("model", "field"), FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_missing_key_is_the_zero_value(model: type[RequestBody], field: str) -> None:
    value = getattr(model.model_validate({}), field)
    expected = _NOT_ZERO.get(
        (model.__name__, field), _zero(_kind(model.model_fields[field].annotation))
    )
    assert value == expected


@pytest.mark.parametrize(("model", "field"), FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_null_is_the_same_as_missing(model: type[RequestBody], field: str) -> None:
    assert model.model_validate({field: None}) == model.model_validate({})


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_unknown_keys_are_ignored(model: type[RequestBody]) -> None:
    assert model.model_validate({"no_such_key": [1, {"x": None}]}) == model.model_validate({})


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_null_body_sets_nothing(model: type[RequestBody]) -> None:
    assert model.model_validate(None) == model.model_validate({})


@pytest.mark.parametrize(("model", "field"), FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_wrong_json_type_is_refused(model: type[RequestBody], field: str) -> None:
    kind = _kind(model.model_fields[field].annotation)
    if kind is None:
        pytest.skip("takes any JSON value")
    for sample_kind, sample in _SAMPLES.items():
        if sample_kind == kind:
            continue
        if sample_kind == "string" and (model.__name__, field) in _STRING_OR_ARRAY:
            assert getattr(model.model_validate({field: sample}), field) == [sample]
            continue
        with pytest.raises(ValidationError) as refused:
            model.model_validate({field: sample})
        assert refused.value.errors()[0]["loc"][0] == field


@pytest.mark.parametrize(("model", "field"), LIST_FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_null_items_of_a_list_are_zero_values(model: type[RequestBody], field: str) -> None:
    decoded = getattr(model.model_validate({field: [None]}), field)
    assert len(decoded) == 1
    item = decoded[0]
    assert item in ("", 0) or (isinstance(item, BaseModel) and item == type(item)())
