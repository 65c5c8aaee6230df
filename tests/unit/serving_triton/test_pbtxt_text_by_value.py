"""config.pbtxt writing and checking (gridready/serving/triton/pbtxt.py) by exact text: scalars, nested messages,
repeated fields and the two map shapes as protobuf text, parse errors with line and column, placeholders by
position, and the parameters check's hint and empty values."""

from __future__ import annotations

import pytest

from gridready.serving.triton.pbtxt import (
    Enum,
    RepositoryError,
    _scalar,
    check_parameters,
    check_placeholders,
    dumps,
    parse,
    render,
)


def test_scalars_as_protobuf_text() -> None:
    assert _scalar(Enum("TYPE_INT32")) == "TYPE_INT32"
    assert _scalar(True) == "true"
    assert _scalar(False) == "false"
    assert _scalar(0) == "0"
    assert _scalar(64) == "64"
    assert _scalar(0.9) == "0.9"
    assert _scalar("plain") == '"plain"'
    assert _scalar('say "hi" \\ bye') == '"say \\"hi\\" \\\\ bye"'
    with pytest.raises(TypeError, match=r"^cannot print None as protobuf text$"):
        _scalar(None)
    with pytest.raises(TypeError, match=r"^cannot print \{'a': 1\} as protobuf text$"):
        _scalar({"a": 1})


def test_dumps_nests_repeats_and_writes_both_map_shapes() -> None:
    msg = {
        "name": "tensorrt_llm", "max_batch_size": 64, "skipped": None,
        "input": [{"name": "input_ids", "data_type": Enum("TYPE_INT32"), "dims": [-1]},
                  {"name": "lens", "data_type": Enum("TYPE_INT32"), "dims": [1], "optional": True}],
        "dynamic_batching": {"preferred_batch_size": [8, 16], "max_queue_delay_microseconds": 100},
        "instance_group": [{"count": 1, "kind": Enum("KIND_CPU")}],
        "parameters": {"gpt_model_path": "/engines/1", "batching_strategy": "inflight_fused_batching"},
        "ensemble_scheduling": {"step": [{"model_name": "pre", "model_version": -1,
                                          "input_map": {"QUERY": "text_input"}, "output_map": {"IDS": "_ids"}}]},
        "empty": [],
    }
    assert dumps(msg) == """\
name: "tensorrt_llm"
max_batch_size: 64
input {
  name: "input_ids"
  data_type: TYPE_INT32
  dims: [ -1 ]
}
input {
  name: "lens"
  data_type: TYPE_INT32
  dims: [ 1 ]
  optional: true
}
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 100
}
instance_group {
  count: 1
  kind: KIND_CPU
}
parameters {
  key: "gpt_model_path"
  value { string_value: "/engines/1" }
}
parameters {
  key: "batching_strategy"
  value { string_value: "inflight_fused_batching" }
}
ensemble_scheduling {
  step {
    model_name: "pre"
    model_version: -1
    input_map { key: "QUERY" value: "text_input" }
    output_map { key: "IDS" value: "_ids" }
  }
}
empty: [  ]
"""


def test_parse_errors_carry_source_line_and_column() -> None:
    with pytest.raises(RepositoryError) as err:
        parse('name: "x"\nbogus: 1\n', "m/config.pbtxt")
    assert err.value.lines == ['m/config.pbtxt:2:1: Message type "inference.ModelConfig" has no field named "bogus".']
    # the detail is what follows protobuf's first " : " (its own may hold more)
    with pytest.raises(RepositoryError) as err:
        render({"name": "m", "max_batch_size": " : "}, "m/config.pbtxt", frozenset())
    assert err.value.lines == ['m/config.pbtxt:2:17: \'max_batch_size: " : "\': Couldn\'t parse integer: " : "']
    cfg = parse('name: "x"\nmax_batch_size: 8\n', "m/config.pbtxt")
    assert (cfg.name, cfg.max_batch_size) == ("x", 8)


def test_placeholders_are_named_by_line_and_column() -> None:
    check_placeholders('name: "x"\nvalue: "$HOME {x}"\n', "m/config.pbtxt")
    with pytest.raises(RepositoryError) as err:
        check_placeholders('name: "x"\nkey: "${a}" value: "${b_c}"\n${}\n', "m/config.pbtxt")
    assert err.value.lines == ["m/config.pbtxt:2:7: unfilled template placeholder ${a}",
                               "m/config.pbtxt:2:21: unfilled template placeholder ${b_c}",
                               "m/config.pbtxt:3:1: unfilled template placeholder ${}"]


def _cfg(params: dict[str, str]):
    return parse(dumps({"name": "tensorrt_llm", "parameters": params}), "t")


def test_parameters_unknown_keys_with_a_hint_and_empty_values() -> None:
    known = frozenset({"gpt_model_path", "max_beam_width", "kv_cache_free_gpu_mem_fraction"})
    check_parameters(_cfg({"gpt_model_path": "/e", "max_beam_width": "1"}), known, "t/config.pbtxt")
    with pytest.raises(RepositoryError) as err:
        check_parameters(_cfg({"max_beam_widht": "1", "zzz": "1", "gpt_model_path": "",
                               "kv_cache_free_gpu_mem_fraction": "${kv}"}), known, "t/config.pbtxt")
    assert err.value.lines == [
        "t/config.pbtxt: parameters: 'gpt_model_path' has no value",
        "t/config.pbtxt: parameters: 'kv_cache_free_gpu_mem_fraction' has no value",
        "t/config.pbtxt: parameters: unknown key 'max_beam_widht' for model 'tensorrt_llm' (did you mean "
        "'max_beam_width'?)",
        "t/config.pbtxt: parameters: unknown key 'zzz' for model 'tensorrt_llm'"]


def test_render_returns_protobufs_canonical_text_and_the_message() -> None:
    text, cfg = render({"name": "m", "max_batch_size": 4, "parameters": {"k": "v"}}, "m/config.pbtxt",
                       frozenset({"k"}))
    assert text == 'name: "m"\nmax_batch_size: 4\nparameters {\n  key: "k"\n  value {\n    string_value: "v"\n  }\n}\n'
    assert (cfg.name, cfg.max_batch_size, cfg.parameters["k"].string_value) == ("m", 4, "v")
    with pytest.raises(RepositoryError, match=r"^m/config.pbtxt: parameters: unknown key 'k'"):
        render({"name": "m", "parameters": {"k": "v"}}, "m/config.pbtxt", frozenset())
    with pytest.raises(RepositoryError, match=r"^m/config.pbtxt:1:8: unfilled template placeholder \$\{n\}$"):
        render({"name": "${n}"}, "m/config.pbtxt", frozenset())
