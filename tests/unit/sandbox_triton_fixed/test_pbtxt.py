"""The stdlib protobuf-text reader against what google.protobuf text_format writes for Triton's ModelConfig."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2 as mc

from sandbox.engine import pbtxt


def as_lists(msg: Message) -> dict[str, list[Any]]:
    """The reader's shape from a protobuf message: every set field -> list of values; enums by name."""
    out: dict[str, list[Any]] = {}
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            out[fd.name] = [{"key": [k], "value": [as_lists(v) if isinstance(v, Message) else v]}
                            for k, v in sorted(value.items())]
            continue
        values = list(value) if fd.is_repeated else [value]
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            values = [as_lists(v) for v in values]
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            values = [fd.enum_type.values_by_number[v].name for v in values]
        out[fd.name] = values
    return out


def full_config() -> mc.ModelConfig:
    cfg = mc.ModelConfig(name="bge-small", platform="onnxruntime_onnx", backend="onnxruntime", max_batch_size=64,
                         default_model_filename="model.onnx")
    cfg.input.add(name="input_ids", data_type=mc.TYPE_INT64, dims=[-1])
    cfg.input.add(name="attention_mask", data_type=mc.TYPE_INT64, dims=[-1], optional=True)
    cfg.output.add(name="last_hidden_state", data_type=mc.TYPE_FP32, dims=[-1, 384])
    cfg.instance_group.add(name="gpu0", count=2, kind=mc.ModelInstanceGroup.KIND_GPU, gpus=[0, 1])
    cfg.instance_group.add(count=3, kind=mc.ModelInstanceGroup.KIND_CPU)
    db = cfg.dynamic_batching
    db.preferred_batch_size.extend([8, 16])
    db.max_queue_delay_microseconds = 500
    db.default_queue_policy.max_queue_size = 7
    db.default_queue_policy.timeout_action = mc.ModelQueuePolicy.DELAY
    db.preserve_ordering = True
    cfg.version_policy.latest.num_versions = 1
    cfg.parameters["x"].string_value = 'quote " backslash \\ tab \t newline \n unicode é'
    cfg.parameters["ENABLE"].string_value = "yes"
    return cfg


def test_round_trip_of_text_format_output():
    cfg = full_config()
    text = text_format.MessageToString(cfg)
    got = pbtxt.parse(text)
    got["parameters"] = sorted(got["parameters"], key=lambda e: e["key"])
    assert got == as_lists(cfg)
    # and the reader's reading is what protobuf reads back
    assert pbtxt.first(got, "max_batch_size") == text_format.Parse(text, mc.ModelConfig()).max_batch_size
    assert pbtxt.string_map(got, "parameters")["x"] == {"string_value": [cfg.parameters["x"].string_value]}


def test_as_utf8_and_one_line_forms():
    cfg = full_config()
    for text in (text_format.MessageToString(cfg, as_utf8=True), text_format.MessageToString(cfg, as_one_line=True)):
        got = pbtxt.parse(text)
        got["parameters"] = sorted(got["parameters"], key=lambda e: e["key"])
        assert got == as_lists(cfg)


def test_hand_written_forms():
    text = """# a comment
    name: 'bge'  # trailing comment
    input: { name: "ids", data_type: TYPE_INT64, dims: [ -1, 0x10 ] };
    output < name: "o" dims: [] >
    instance_group [ { kind: KIND_GPU }, { kind: KIND_CPU count: 2 } ]
    parameters { key: "k" value: { string_value: "a" 'b' "\\x41\\101\\n" } }
    optimization { input_pinned_memory { enable: true } }
    dynamic_batching { }
    """
    got = pbtxt.parse(text)
    assert pbtxt.first(got, "name") == "bge"
    assert pbtxt.values(pbtxt.first(got, "input"), "dims") == [-1, 16]
    assert pbtxt.first(got, "output") == {"name": ["o"], "dims": []}
    assert [pbtxt.first(g, "kind") for g in pbtxt.values(got, "instance_group")] == ["KIND_GPU", "KIND_CPU"]
    assert pbtxt.string_map(got, "parameters") == {"k": {"string_value": ["abAA\n"]}}
    assert pbtxt.sub(pbtxt.sub(got, "optimization"), "input_pinned_memory") == {"enable": [True]}
    assert pbtxt.has(got, "dynamic_batching") and pbtxt.sub(got, "dynamic_batching") == {}
    assert pbtxt.sub(got, "sequence_batching") == {} and not pbtxt.has(got, "sequence_batching")
    # protobuf parses the same text
    assert text_format.Parse(text, mc.ModelConfig()).input[0].dims == [-1, 16]


@pytest.mark.parametrize(("text", "where"), [
    ("name: ", "1:7"),
    ('name: "x"\ninput {\n  name: "a"\n', "4:1"),
    ("max_batch_size 8", "1:16"),
    ('name: "x" }', "1:11"),
    ('name: "unterminated\n', "1:7"),
    ('input { dims: [1, 2 }', "1:21"),
])
def test_syntax_errors_name_line_and_column(text, where):
    with pytest.raises(ValueError, match=rf"^{where}: "):
        pbtxt.parse(text)
    with pytest.raises(text_format.ParseError):  # protobuf refuses them too
        text_format.Parse(text, mc.ModelConfig())


def test_invalid_escape_is_an_error():
    """C++ protobuf's tokenizer (Triton's ReadTextProto) refuses an unknown escape; Python's only warns."""
    with pytest.raises(ValueError, match=r"^1:7: invalid escape \\q"):
        pbtxt.parse('name: "bad \\q escape"')
