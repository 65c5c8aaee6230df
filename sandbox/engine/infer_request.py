"""KServe v2 inference requests to a fixed-cost Triton model, parsed and checked as tritonserver does.

The JSON body is parsed as Triton's HTTP frontend parses it (triton-inference-server/server src/http_server.cc
ParseJsonTritonIO and ReadDataFromJson, TritonJson's messages) and the request is checked as
InferenceRequest::Normalize checks it (infer_request.cc), each refusal with Triton's status and message. Outputs
are [batch, *dims] with data fixed by the inputs.
Cited sources are triton-inference-server/core src/<file> <function> unless another repository is named.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fixed_model import FixedCostModel, Tensor

# triton-inference-server/common src/model_config.cc DataTypeToProtocolString
DATATYPES = {"TYPE_BOOL": "BOOL", "TYPE_UINT8": "UINT8", "TYPE_UINT16": "UINT16", "TYPE_UINT32": "UINT32",
             "TYPE_UINT64": "UINT64", "TYPE_INT8": "INT8", "TYPE_INT16": "INT16", "TYPE_INT32": "INT32",
             "TYPE_INT64": "INT64", "TYPE_FP16": "FP16", "TYPE_FP32": "FP32", "TYPE_FP64": "FP64",
             "TYPE_STRING": "BYTES", "TYPE_BF16": "BF16"}


class InferError(Exception):
    """An inference Triton refuses: HTTP status (http_server.cc HttpCodeFromError) and its message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class _Input:
    name: str
    datatype: str
    shape: list[int]
    data: list[Any]


class InferRequest:
    """One parsed inference request; raises InferError as Triton's HTTP frontend and core would."""

    def __init__(self, model: FixedCostModel, rid: str, inputs: list[_Input], requested: list[str]) -> None:
        self.model, self.id, self.inputs, self.requested = model, rid, inputs, requested
        self.batch = 0
        self.key: Hashable = None  # equal_key(), once normalized

    @property
    def log(self) -> str:  # infer_request.h LogRequest
        return f"[request id: {self.id or '<id_unknown>'}] "

    @classmethod
    def parse(cls, model: FixedCostModel, body: bytes) -> InferRequest:
        try:
            doc = json.loads(body or b"{}")
        except ValueError as err:
            raise InferError(500, f"failed to parse the request JSON buffer: {err}") from None
        rid = _member(doc, "id", str, "id", required=False) or ""
        inputs: list[_Input] = []
        for obj in _member(doc, "inputs", list, "inputs"):
            inputs.append(_parse_input(obj, rid, inputs))
        outs = _member(doc, "outputs", list, "outputs", required=False) or []
        requested = [_member(o, "name", str, "name") for o in outs]
        req = cls(model, rid, inputs, requested)
        req.normalize()
        req.key = req.equal_key()
        return req

    def normalize(self) -> None:
        """infer_request.cc InferenceRequest::Normalize (and ValidateRequestInputs, model.cc GetInput/GetOutput)."""
        m = self.model
        by_name = {t.name: t for t in m.inputs}
        for name in self.requested:
            if name not in {t.name for t in m.outputs}:
                raise InferError(400, f"unexpected inference output '{name}' for model '{m.name}'")
        required = [t.name for t in m.inputs if not t.optional]
        given = {i.name for i in self.inputs}
        if len(self.inputs) > len(m.inputs) or len(self.inputs) < len(required):
            missing = "[" + ",".join(f"'{n}'" for n in required if n not in given)
            missing = missing[:-1] + "]" if missing == "[" else missing + "]"  # Triton's pop_back of an empty list
            got = "[" + ",".join(f"'{i.name}'" for i in self.inputs) + "]"
            span = (f"expected {len(m.inputs)} inputs" if len(required) == len(m.inputs) else
                    f"expected number of inputs between {len(required)} and {len(m.inputs)}")
            raise InferError(400, f"{self.log}{span} but got {len(self.inputs)} inputs for model '{m.name}'. Got "
                             f"input(s) {got}, but missing required input(s) {missing}. Please provide all required "
                             "input(s).")
        for i in self.inputs:
            if i.name not in by_name:
                raise InferError(400, f"unexpected inference input '{i.name}' for model '{m.name}'")
            if m.max_batch_size > 0:
                if not i.shape:
                    raise InferError(400, f"{self.log}input '{i.name}' has no shape but model requires batch "
                                     f"dimension for '{m.name}'")
                if self.batch == 0:
                    self.batch = i.shape[0]
                elif i.shape[0] != self.batch:
                    raise InferError(400, f"{self.log}input '{i.name}' batch size does not match other inputs for "
                                     f"'{m.name}'")
        if self.batch > m.max_batch_size:
            raise InferError(400, f"{self.log}inference request batch-size must be <= {m.max_batch_size} for "
                             f"'{m.name}'")
        for i in self.inputs:
            self._check_input(i, by_name[i.name])

    def _check_input(self, i: _Input, t: Tensor) -> None:
        m = self.model
        if i.datatype != t.datatype:
            raise InferError(400, f"{self.log}inference input '{i.name}' data-type is '{i.datatype}', but model "
                             f"'{m.name}' expects '{t.datatype}'")
        dims = i.shape[1:] if m.max_batch_size > 0 else i.shape
        if len(dims) != len(t.dims) or any(c not in (-1, d) for c, d in zip(t.dims, dims, strict=False)):
            full, note = list(t.dims), ""
            if m.max_batch_size > 0:
                full = [-1, *full]
                note = ("NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to "
                        "be prepended to each input shape. If you want to specify the full shape including the "
                        "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
                        "configuration docs for more info on max_batch_size.")
            raise InferError(400, f"{self.log}unexpected shape for input '{i.name}' for model '{m.name}'. Expected "
                             f"{_dims(full)}, got {_dims(i.shape)}. {note}")
        want = math.prod(i.shape)
        if i.datatype == "BYTES" and len(i.data) != want:  # infer_request.cc ValidateBytesInputs
            if len(i.data) > want:
                raise InferError(400, f"{self.log}unexpected number of string elements {want + 1} for inference "
                                 f"input '{i.name}' for model '{m.name}', expecting {want}")
            raise InferError(400, f"{self.log}expected {want} string elements for inference input '{i.name}' for "
                             f"model '{m.name}', got {len(i.data)}")

    @property
    def size(self) -> int:
        return max(1, self.batch)  # dynamic_batch_scheduler.cc: max(1U, request->BatchSize())

    def equal_key(self) -> Hashable:
        """Inputs with a variable dim batch only with requests of the same shape (backend_model.cc
        SetConfiguredScheduler enforce_equal_shape_tensors; scheduler_utils.cc RequiredEqualInputs)."""
        m = self.model
        varying = {t.name for t in m.inputs if -1 in t.dims}
        shapes = tuple(sorted((i.name, tuple(i.shape[1:])) for i in self.inputs if i.name in varying))
        if any(t.optional for t in m.inputs):
            return shapes, tuple(sorted(i.name for i in self.inputs))
        return shapes

    def output(self, t: Tensor) -> dict[str, Any]:
        """[batch, *dims], each -1 taken from the first input's second dimension; data deterministic per item."""
        first = self.inputs[0].shape if self.inputs else [1]
        batching = self.model.max_batch_size > 0
        fill = (first[1] if len(first) > 1 else 1) if batching else (first[0] if first else 1)
        dims = [fill if d == -1 else d for d in t.dims]
        items = self.size if batching else 1
        per_item = math.prod(dims)
        data: list[Any] = []
        for b in range(items):
            seed = zlib.crc32(json.dumps([i.data[b * len(i.data) // items:(b + 1) * len(i.data) // items]
                                          for i in self.inputs]).encode())
            data += _item_data(t.datatype, seed, per_item)
        return {"name": t.name, "datatype": t.datatype, "shape": ([self.batch] if batching else []) + dims,
                "data": data}


_TABLE = [round(math.sin(0.37 * (k + 1)), 6) for k in range(1009)]  # a prime period


def _item_data(datatype: str, seed: int, n: int) -> list[Any]:
    """n finite values, not all zero, fixed by seed: the table rotated by the seed (list operations, so a large
    embedding output stays cheap to build)."""
    r = seed % len(_TABLE)
    rot = _TABLE[r:] + _TABLE[:r]
    vals = (rot * (n // len(rot) + 1))[:n]
    if datatype.startswith(("FP", "BF")):
        return vals
    if datatype == "BOOL":
        return [v > 0 for v in vals]
    if datatype == "BYTES":
        return [f"sim-{r}-{j}" for j in range(n)]
    return [int(abs(v) * 100) + 1 for v in vals]  # integer types


def _dims(dims: Sequence[int]) -> str:  # triton-inference-server/common model_config.cc DimsListToString
    return "[" + ",".join(str(d) for d in dims) + "]"


_JSON_KIND: dict[type, str] = {list: "JSON non-array as array", str: "JSON non-string as string"}


def _member(obj: Any, key: str, kind: type, what: str, required: bool = True) -> Any:
    """TritonJson MemberAs* under RETURN_MSG_IF_ERR("Unable to parse '<what>'"): INTERNAL, so HTTP 500."""
    if not isinstance(obj, dict) or key not in obj:
        if not required:
            return None
        raise InferError(500, f"Unable to parse '{what}': attempt to access non-existing object member '{key}'")
    if not isinstance(obj[key], kind):
        raise InferError(500, f"Unable to parse '{what}': attempt to access {_JSON_KIND[kind]}")
    return obj[key]


def _parse_input(obj: Any, rid: str, seen: list[_Input]) -> _Input:
    """http_server.cc ParseJsonTritonIO and ReadDataFromJson: JSON tensors, element count against 'shape'.
    A JSON tensor's 'data' holds product(shape) elements, flat or nested (KServe v2 protocol, Tensor Data:
    https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/)."""
    name = _member(obj, "name", str, "name")
    datatype = _member(obj, "datatype", str, "datatype")
    shape = _member(obj, "shape", list, "shape")
    if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in shape):
        raise InferError(500, "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as "
                         "unsigned-integer")
    if any(i.name == name for i in seen):  # infer_request.cc AddOriginalInput
        raise InferError(400, f"[request id: {rid or '<id_unknown>'}] input '{name}' already exists in request")
    count = math.prod(shape) if shape else 0  # triton-inference-server/server common.cc GetElementCount: [] is 0
    if count == 0:
        return _Input(name, datatype, shape, [])
    data = _member(obj, "data", list, "data")
    if datatype in ("FP16", "BF16"):
        raise InferError(400, f"receiving {datatype} data via JSON is not supported. Please use the binary data "
                         f"format for input {name}")
    if datatype not in DATATYPES.values():
        raise InferError(400, f"invalid datatype for input {name}")
    flat: list[Any] = []
    _flatten(data, flat)
    if datatype == "BYTES":  # counted in bytes by the frontend; the element count is core's (ValidateBytesInputs)
        if not all(isinstance(v, str) for v in flat):
            raise InferError(500, "Unable to parse JSON bytes array: attempt to access JSON non-string as string")
        return _Input(name, datatype, shape, flat)
    for n, v in enumerate(flat):
        if n >= count:
            raise InferError(500, "Unable to parse 'data': Shape does not match true shape of 'data' field")
        problem = _element_problem(datatype, v)
        if problem:
            raise InferError(500, f"Unable to parse 'data': attempt to access JSON {problem}")
    if len(flat) != count:
        raise InferError(500, "Failed to parse 'data' field: shape does not match true shape")
    return _Input(name, datatype, shape, flat)


def _flatten(v: Any, out: list[Any]) -> None:
    if isinstance(v, list):
        for e in v:
            _flatten(e, out)
    else:
        out.append(v)


def _element_problem(datatype: str, v: Any) -> str:
    """TritonJson AsBool/AsInt/AsUInt/AsDouble failures."""
    is_int = isinstance(v, int) and not isinstance(v, bool)
    if datatype == "BOOL":
        return "" if isinstance(v, bool) else "non-boolean as boolean"
    if datatype.startswith("UINT"):
        return "" if is_int and v >= 0 else "non-unsigned-integer as unsigned-integer"
    if datatype.startswith("INT"):
        return "" if is_int else "non-signed-integer as signed-integer"
    return "" if is_int or isinstance(v, float) else "non-number as double"

