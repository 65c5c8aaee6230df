"""Issue 41, class 3: every extra engine option is resolved as the pinned engine's own parser resolves it (prefix,
alias, negation, '_' or '-' spelling), and one that lands on an option gridready owns, loads code or files,
follows a moving ref, is unknown or ambiguous, or carries a value its type or choices refuse, is one line at
validate: file, key path, reason, exit 2."""

from __future__ import annotations

import argparse
import copy
from typing import Any

import pytest

from gridready import cli
from gridready.exitcodes import ExitCode
from gridready.spec import engine_options, rules
from gridready.spec.cluster import ClusterSpec
from gridready.spec.serving import VLLM_VERSION
from tests.unit.test_bad_inputs import T0, _in_process, _lines_ok, at, tiers
from tests.unit.test_bad_inputs import tier as base_tier

SGLANG = engine_options.sglang_pin()
REV = "0e9e39f249a16976918f6564b8830bc894c89659"
BASE: dict[str, Any] = {
    "customer": "acme",
    "node_groups": [{"name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 8,
                     "nics": [{"name": f"mlx5_{i}", "kind": "infiniband", "rate_gbps": 400, "rail": i}
                              for i in range(8)]}],
    "certification": {"min_certified_nodes": 1},
    "serving": {"tiers": []},
}


def tier(engine: str = "vllm", **over: Any) -> dict[str, Any]:
    t = {"name": "llama", "engine": engine, "served_name": "llama", "tensor_parallel": 8, "pipeline_parallel": 1,
         "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": REV}}
    t.update(over)
    return t


def found(*many: dict[str, Any]) -> list[tuple[str, str]]:
    """Every line rules.check gives for these tiers, on two nodes."""
    data = copy.deepcopy(BASE)
    data["serving"]["tiers"] = list(many)
    return rules.check(ClusterSpec.model_validate(data), {"gpu_nodes": 2})


def one(engine: str, key: str, value: Any, **over: Any) -> list[tuple[str, str]]:
    return found(tier(engine, extra_engine_args={key: value}, **over))


K = "serving.tiers[0].extra_engine_args."
NAME = f"must be a vLLM engine argument name (^{rules.ENGINE_ARG.pattern}$)"
CASES = [
    # prefix: an unambiguous beginning is the option it begins
    ("prefix", "vllm", "trust_remote", True,
     "resolves to --trust-remote-code, which gridready owns (set the tier's trust_remote_code)"),
    ("prefix-parallel", "vllm", "tensor_parallel", 2,
     "resolves to --tensor-parallel-size, which gridready owns (set the tier's tensor_parallel)"),
    ("prefix-api-key", "vllm", "api_k", "abc", "resolves to --api-key, which gridready owns (the vault: VLLM_API_KEY)"),
    ("prefix-sglang", "sglang", "tp", 2,
     "resolves to --tp-size, which gridready owns (set the tier's tensor_parallel)"),
    ("prefix-served", "vllm", "served", "x", "resolves to --served-model-name, which gridready owns"),
    # negation: --no-<flag> and vLLM's --disable-<x> are strings of the owned option itself
    ("negation", "vllm", "no_trust_remote_code", True, "gridready sets this argument itself; use the tier's "
     "trust_remote_code"),
    ("negation-prefix", "vllm", "no_enable_prefix", True,
     "resolves to --no-enable-prefix-caching, which gridready owns (set the tier's enable_prefix_caching)"),
    ("negation-disable", "vllm", "disable_prefix_caching", True, "gridready sets this argument itself; use the "
     "tier's enable_prefix_caching"),
    ("false-renders-negation", "vllm", "enable_chunked_prefill", False, "gridready sets this argument itself"),
    ("negation-absent", "vllm", "disable_log_stats", False,
     "false renders --no-disable-log-stats, which vLLM 0.33.0 does not have for --disable-log-stats"),
    # alias: another string of the same action
    ("alias-sglang", "sglang", "tensor_parallel_size", 4, "gridready sets this argument itself; use the tier's "
     "tensor_parallel"),
    ("alias-sglang-model", "sglang", "model", "other/model", "gridready sets this argument itself; use the tier's "
     "model"),
    ("alias-sglang-dp", "sglang", "data_parallel_size", 2, "gridready sets this argument itself; use the tier's "
     "replicas"),
    ("alias-vllm", "vllm", "device_memory_utilization", 0.99, "gridready sets this argument itself; use the tier's "
     "gpu_memory_utilization"),
    ("alias-sglang-init", "sglang", "nccl_init_addr", "10.0.0.1:5000", "gridready sets this argument itself; use the "
     "tier's sglang.dist_init_port"),
    ("alias-prefix", "sglang", "nccl_init", "10.0.0.1:5000", "resolves to --nccl-init-addr, which gridready owns"),
    # '_' or '-': gridready renders both as '-'
    ("dash-spelling", "vllm", "tensor-parallel-size", 2, "gridready sets this argument itself; use the tier's "
     "tensor_parallel"),
    ("dash-prefix", "vllm", "trust-remote", True, "resolves to --trust-remote-code, which gridready owns"),
    # a key that is no option name still says what it would be
    ("key-with-dashes", "vllm", "--trust-remote-code", True, NAME + "; as an option it is --trust-remote-code, which "
     "gridready owns"),
    ("key-with-value", "vllm", "tensor_parallel_size=2", 1, NAME + "; as an option it is --tensor-parallel-size"),
    ("short-O", "vllm", "-O3", True, NAME + "; vLLM's -O<n> is --optimization-level <n>"),
    # placement: data parallelism, nodes and GPUs inside one engine
    ("dp-inside", "vllm", "data_parallel_size_local", 2, "gridready sets this argument itself; use the tier's "
     "replicas"),
    ("nnodes", "vllm", "nnodes", 2, "gridready sets this argument itself (the nodes and GPUs gridready places"),
    ("headless", "vllm", "headless", True, "gridready sets this argument itself (the leader serves the API)"),
    ("gpu-ids", "sglang", "base_gpu_id", 2, "gridready sets this argument itself (the GPUs gridready places)"),
    ("master-addr", "vllm", "master_addr", "10.0.0.1", "resolves to --master-addr, which sends to, loads from or "
     "binds an address"),
    # loads options from a file, or follows a moving ref
    ("config", "vllm", "config", "/etc/vllm.yaml", "resolves to --config, which loads more options from a file"),
    ("config-sglang", "sglang", "config", "/etc/sglang.yaml", "gridready sets this argument itself (the tier's "
     "0600 --config file)"),
    ("code-revision", "vllm", "code_revision", "main", "resolves to --code-revision, which follows a branch or tag"),
    ("code-revision-prefix", "vllm", "code_rev", "main", "resolves to --code-revision, which follows a branch or tag"),
    ("tokenizer-revision", "vllm", "tokenizer_revision", "v2", "resolves to --tokenizer-revision, which follows"),
    ("tokenizer", "vllm", "tokenizer", "other/tokenizer", "resolves to --tokenizer, which loads a tokenizer"),
    ("media-path", "vllm", "allowed_local_media_path", "/", "resolves to --allowed-local-media-path, which lets "
     "API clients read the node's files"),
    ("chat-template-file", "vllm", "chat_template", "/proc/self/environ", "resolves to --chat-template, which reads "
     "a file on the node into every prompt"),
    ("chat-template-file-sglang", "sglang", "chat_template", "/srv/t.jinja", "resolves to --chat-template, which "
     "reads a file on the node into every prompt"),
    ("generation-config-folder", "vllm", "generation_config", "/srv/gen", "resolves to --generation-config, which "
     "takes auto or vllm here"),
    ("path-value", "sglang", "tool_server", "x", "resolves to --tool-server, which connects"),
    ("path-value-any-option", "vllm", "tool_call_parser", "/srv/parser.py", "resolves to --tool-call-parser, given "
     "a path on the node: gridready passes the engine no file the inventory names"),
    ("file-url-value", "vllm", "reasoning_parser", "file:///etc/x", "resolves to --reasoning-parser, given a path"),
    ("logits-processors", "vllm", "logits_processors", "evil.module:Proc", "resolves to --logits-processors, which "
     "imports code"),
    ("worker-cls", "vllm", "worker_cls", "evil.Worker", "resolves to --worker-cls, which imports code"),
    ("compilation-config", "vllm", "compilation_config", '{"level": 3}', "resolves to --compilation-config, which "
     "takes a configuration object"),
    ("speculative-model", "sglang", "speculative_draft_model_path", "x/y",
     "resolves to --speculative-draft-model-path, which names another model to download or load"),
    ("grpc-port", "vllm", "grpc_port", 9000, "resolves to --grpc-port, which opens or reaches a port"),
    ("custom-logit", "sglang", "enable_custom_logit_processor", True,
     "resolves to --enable-custom-logit-processor, which lets API clients send serialized logit processors"),
    ("help", "vllm", "help", True, "resolves to --help, which prints the help and exits"),
    # the value: type, nargs and choices of the option
    ("value-type", "vllm", "seed", "seven", "--seed (vLLM 0.33.0) takes an int, not 'seven'"),
    ("value-float-for-int", "vllm", "max_logprobs", 2.5, "--max-logprobs (vLLM 0.33.0) takes an int, not '2.5'"),
    ("value-bool-for-int", "vllm", "seed", True, "--seed (vLLM 0.33.0) takes a value (int), not true"),
    ("value-for-switch", "vllm", "enforce_eager", "yes", "--enforce-eager (vLLM 0.33.0) is a switch without a value"),
    ("choices-sglang", "sglang", "max_lora_chunk_size", 8,
     "8 is not a value --max-lora-chunk-size (SGLang 0.5.19) accepts: one of 16, 32, 64, 128"),
    ("choices-str", "sglang", "tokenizer_mode", "fast",
     "fast is not a value --tokenizer-mode (SGLang 0.5.19) accepts: one of auto, slow"),
    # ambiguous and unknown to the pinned parser
    ("ambiguous", "vllm", "max", 1, "--max is ambiguous to vLLM 0.33.0's parser (it could match --max-cpu-loras"),
    ("ambiguous-sglang", "sglang", "trust", True, "--trust is ambiguous to SGLang 0.5.19's parser (it could match "
     "--trust-mm-content-hashes, --trust-remote-code)"),
    ("unknown", "vllm", "swap_space", 4, "--swap-space is not an option of vLLM 0.33.0: the engine would refuse to "
     "start"),
    ("unknown-other-engine", "vllm", "tp_size", 8, "--tp-size is not an option of vLLM 0.33.0"),
]


@pytest.mark.parametrize(("case", "engine", "key", "value", "message"), CASES, ids=[c[0] for c in CASES])
def test_an_extra_option_is_refused_as_the_parser_resolves_it(case, engine, key, value, message):
    lines = one(engine, key, value)
    assert [where for where, _ in lines] == [K + key], lines
    assert lines[0][1].startswith(message), lines


@pytest.mark.parametrize(("engine", "args"), [
    ("vllm", {"seed": 7, "enforce_eager": True, "enforce_eager_": None}),
    ("vllm", {"enforce_eag": True, "max_logprobs": "20", "disable_log_stats": True}),  # an unambiguous prefix
    ("vllm", {"optimization_level": 3, "generation_config": "vllm", "block_size": 32}),
    ("vllm", {"enable_auto_tool_choice": True, "tool_call_parser": "hermes", "disable_access_log_for_endpoints":
              "/health"}),
    ("sglang", {"cuda_graph_max_bs": 64, "disable_cuda_graph": False, "log_requests_level": 2}),
    ("sglang", {"max_lora_chunk_size": 32, "lora_target_modules": "all", "enable_torch_compile": True}),
    ("sglang", {"chat_template": "llama-3-instruct"}),  # a built-in template by name
])
def test_the_operators_own_options_pass(engine, args):
    args = {k: v for k, v in args.items() if v is not None}
    assert found(tier(engine, extra_engine_args=args)) == []


def test_the_tiers_own_values_are_checked_against_the_same_table():
    """vLLM 0.33 takes 1/8/16/32/64/128/256/320/512 as --max-lora-rank: a rank of 4 stopped the engine at start."""
    adapters = [{"name": "sql", "path": "/adapters/sql"}]
    assert found(tier(lora_adapters=adapters, max_lora_rank=4)) == [(
        "serving.tiers[0].max_lora_rank",
        "4 is not a value --max-lora-rank (vLLM 0.33.0) accepts: one of 1, 8, 16, 32, 64, 128, 256, 320, 512")]
    assert found(tier(lora_adapters=adapters, max_lora_rank=64)) == []
    assert found(tier(max_lora_rank=4)) == []  # no adapters: the rank is not rendered


def test_triton_trtllm_renders_no_extra_option():
    lines = found({**tier("triton-trtllm", extra_engine_args={"seed": 1}), "tensor_parallel": 8})
    assert ("serving.tiers[0].extra_engine_args", "triton-trtllm renders none of them (the Triton and "
            "TensorRT-LLM settings are under the tier's triton); remove them") in lines


def test_a_release_without_a_table_fails_closed():
    lines = one("sglang", "seed", 1, sglang={"version": "0.5.20"})
    assert lines == [(K + "seed", "gridready has no option table for SGLang 0.5.20 (gridready/data/engine_cli/"
                                  "sglang-0.5.20.json) to resolve extra_engine_args against")]


# --- the resolver is argparse's own -------------------------------------------------------------------------------

def _argparse(tbl: engine_options.Table) -> argparse.ArgumentParser:
    """The table as argparse itself holds it: allow_abbrev at its default (both engines keep it), --help added."""
    parser = argparse.ArgumentParser(prog=tbl.engine)
    for i, opt in enumerate(tbl.options):
        parser.add_argument(*opt.flags, dest=f"o{i}", action="store_true" if not opt.takes_value else "store")
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # type: ignore[method-assign]
    return parser


def _words(tbl: engine_options.Table) -> list[str]:
    """Every prefix of every long option string, a few beyond them, and '=' forms."""
    words = {f[:n] for f in tbl.by_flag if f.startswith("--") for n in range(3, len(f) + 1)}
    return sorted(words | {"--no-such-option", "--tensor-parallel-size=2", "--trust=1", "--x"})


@pytest.mark.parametrize(("engine", "version"), [("vllm", VLLM_VERSION), ("sglang", SGLANG)])
def test_resolution_is_argparses_own(engine, version):
    tbl = engine_options.table(engine, version)
    assert tbl is not None
    parser = _argparse(tbl)
    actions = {id(a): a for a in parser._actions}
    by_dest = {a.dest: a for a in actions.values()}
    for word in _words(tbl):
        mine = engine_options.resolve(tbl, word)
        try:
            theirs = parser._parse_optional(word)  # argparse's own lookup (no public equivalent)
        except ValueError as err:
            assert "ambiguous option" in str(err) and mine.option is None and len(mine.matches) > 1, word
            continue
        if theirs is None or theirs[0] is None:
            assert mine.option is None and not mine.matches, word
            continue
        action = theirs[0]
        if action.dest == "help":
            assert mine.option is engine_options.HELP, word
        else:
            assert mine.option is tbl.options[int(action.dest[1:])], (word, by_dest[action.dest].option_strings)


def test_a_parser_without_abbreviations_takes_whole_names_only():
    tbl = engine_options.table("vllm", VLLM_VERSION)
    assert tbl is not None and tbl.allow_abbrev
    strict = engine_options.Table(tbl.engine, tbl.version, tbl.options, tbl.by_flag, allow_abbrev=False)
    assert engine_options.resolve(strict, "--trust-remote").option is None
    assert engine_options.resolve(strict, "--trust-remote-code").flag == "--trust-remote-code"


# --- end to end: `invoke validate`'s path ---------------------------------------------------------------------------

E2E = [
    ("prefix", at("serving.tiers.0.extra_engine_args", {"trust_remote": True}),
     T0 + ".extra_engine_args.trust_remote: resolves to --trust-remote-code, which gridready owns (set the tier's "
     "trust_remote_code)"),
    ("config", at("serving.tiers.0.extra_engine_args", {"config": "/etc/x.yaml"}),
     T0 + ".extra_engine_args.config: resolves to --config"),
    ("lora-rank", tiers(base_tier(lora_adapters=[{"name": "sql", "path": "/adapters/sql"}], max_lora_rank=4)),
     T0 + ".max_lora_rank: 4 is not a value --max-lora-rank (vLLM 0.33.0) accepts: one of 1, 8, 16"),
    ("sglang-alias", tiers(base_tier(engine="sglang", extra_engine_args={"tensor_parallel": 2})),
     T0 + ".extra_engine_args.tensor_parallel: resolves to --tensor-parallel-size, which gridready owns"),
]


@pytest.mark.parametrize(("case", "setup", "expected"), E2E, ids=[r[0] for r in E2E])
def test_validate_exits_2_with_one_line(tmp_path, monkeypatch, capsys, case, setup, expected):
    _in_process(tmp_path, monkeypatch, setup)
    with pytest.raises(cli.CommandExit) as exit_:
        cli.guarded(lambda: cli.inventory("acme"))()
    err = capsys.readouterr().err
    assert exit_.value.code == ExitCode.INVALID, err
    _lines_ok(err, expected)
