"""extra_engine_args at the value level, every sentence whole: the ambiguous list cut after six, a value checked
against the option's nargs, type (an int, a float, None where the option accepts it) and choices (numbers first, in
order), a policy read from the option's names (NAMED, the last word, any word), a file value however it is spelt,
the owner line by spelling and channel, and the tier's own rendered values (argparse's rules: the Python
documentation of argparse, "Argument abbreviations", "nargs", "type", "choices")."""

from __future__ import annotations

import pytest

from gridready.spec import engine_options as eo
from gridready.spec.serving import VLLM_VERSION, Tier
from tests.unit.spec.test_rule_messages import tier

V = VLLM_VERSION
S = eo.sglang_pin()


def option(*flags: str, takes_value: bool = True, nargs: int | str | None = None, type_: str | None = None,
           accepts_none: bool = False, choices: tuple[object, ...] | None = None) -> eo.Option:
    return eo.Option(flags, takes_value, nargs, type_, accepts_none, choices)


def table(*options: eo.Option, engine: str = "vllm", abbrev: bool = True) -> eo.Table:
    return eo.Table(engine, "9.9", options, {f: o for o in options for f in o.flags}, abbrev)


def test_ambiguous_shows_six_matches_then_an_ellipsis():
    tbl = eo.table("vllm", V)
    assert tbl is not None
    matches = sorted(f for f in tbl.by_flag if f.startswith("--max"))
    assert len(matches) > 6
    assert eo.problems("vllm", V, "max", 1) == (
        f"--max is ambiguous to vLLM {V}'s parser (it could match {', '.join(matches[:6])}, ...); write the option "
        "in full")


def test_ambiguous_with_six_or_fewer_lists_them_all():
    tbl = table(*(option(f"--opt-{c}") for c in "fedcba"))
    assert eo.resolve(tbl, "--opt").matches == tuple(f"--opt-{c}" for c in "abcdef")
    tbl7 = table(*(option(f"--opt-{c}") for c in "abcdefg"))
    assert eo.resolve(tbl7, "--opt").matches == tuple(f"--opt-{c}" for c in "abcdefg")
    assert eo.problems("sglang", S, "trust", True) == (
        f"--trust is ambiguous to SGLang {S}'s parser (it could match --trust-mm-content-hashes, "
        "--trust-remote-code); write the option in full")


def test_unknown_engine_and_release():
    assert eo.problems("tgi", "3.0", "seed", 1) == (
        "gridready has no option table for tgi 3.0 (gridready/data/engine_cli/tgi-3.0.json) to resolve "
        "extra_engine_args against")
    assert eo.table("vllm", "0.0.1") is None
    assert table(engine="tgi").label == "tgi 9.9"
    assert table(engine="sglang").label == "SGLang 9.9"


@pytest.mark.parametrize(("word", "flag"), [
    ("--seed", "--seed"), ("--seed=3", "--seed"), ("--se", "--seed"), ("--se=3", "--seed"),
    ("--seed=3=4", "--seed"), ("--se=3=4", "--seed"), ("--seed-x", None), ("-x", None), ("-se", None),
])
def test_resolve_exact_then_before_equals_then_prefix(word, flag):
    tbl = table(option("--seed"), option("--no-x", takes_value=False), option("-s", takes_value=False))
    got = eo.resolve(tbl, word)
    assert got.flag == flag and (got.option is None) == (flag is None) and got.word == word


def test_the_exact_single_dash_word_resolves():
    tbl = table(option("--seed"), option("-s", takes_value=False))
    assert eo.resolve(tbl, "-s").flag == "-s"
    assert eo.resolve(table(option("--seed"), abbrev=False), "--se").option is None


SWITCH = option("--eager", takes_value=False, nargs=0)
W = "--x (vLLM 9.9)"


@pytest.mark.parametrize(("opt", "value", "want"), [
    (SWITCH, True, None), (SWITCH, False, None),
    (SWITCH, "yes", "--x (vLLM 9.9) is a switch without a value: give true or false, not 'yes'"),
    (SWITCH, 1, "--x (vLLM 9.9) is a switch without a value: give true or false, not 1"),
    (option("--x", nargs="?", type_="str"), True, None),
    (option("--x", type_="int"), True, f"{W} takes a value (int), not true"),
    (option("--x", nargs="+", type_="float"), False, f"{W} takes a value (float), not false"),
    (option("--x"), False, f"{W} takes a value (a string), not false"),
    (option("--x", type_="int"), "7", None), (option("--x", type_="int"), 7, None),
    (option("--x", type_="int"), "seven", f"{W} takes an int, not 'seven'"),
    (option("--x", type_="int"), 2.5, f"{W} takes an int, not '2.5'"),
    (option("--x", type_="float"), "0.5", None), (option("--x", type_="float"), 3, None),
    (option("--x", type_="float"), "half", f"{W} takes a float, not 'half'"),
    (option("--x", type_="int", accepts_none=True), "None", None),
    (option("--x", type_="int"), "None", f"{W} takes an int, not 'None'"),
    (option("--x", type_="int", accepts_none=True), "none", f"{W} takes an int, not 'none'"),
    (option("--x", type_="int", choices=(16, 32, 8)), 8, None),
    (option("--x", type_="int", choices=(16, 32, 8)), "32", None),
    (option("--x", type_="int", choices=(16, 32, 8)), 12, f"12 is not a value {W} accepts: one of 8, 16, 32"),
    (option("--x", type_="str", choices=("slow", "auto")), "auto", None),
    (option("--x", type_="str", choices=("slow", "auto")), "fast", f"fast is not a value {W} accepts: one of auto, "
                                                                   "slow"),
    (option("--x", type_="int", choices=("1", "2")), 2, None),     # the string given is one of the choices
    (option("--x", type_="str", accepts_none=True, choices=("b", None, "a")), "None", None),
    (option("--x", type_="str", accepts_none=True, choices=("b", None, "a")), "c",
     f"c is not a value {W} accepts: one of None, a, b"),
    (option("--x", type_="float", choices=(2.5, "auto", 1, 10)), "3", f"3 is not a value {W} accepts: one of 1, 2.5, "
                                                                      "10, auto"),
])
def test_check_value(opt, value, want):
    assert eo.check_value(table(opt), opt, "--x", value) == want


@pytest.mark.parametrize(("opt", "why"), [
    (option("--lora-target-modules"), None),                                   # ALLOWED despite "modules"
    (option("--x-config", "--lora-target-modules"), None),
    (option("--config"), eo.NAMED["--config"]),
    (option("--x", "--tokenizer"), eo.NAMED["--tokenizer"]),                    # any of its strings
    (option("--draft-model"), eo.LAST_WORD["model"]),
    (option("--model-impl"), None),                                            # "model" only as the last word
    (option("--metrics-port"), eo.LAST_WORD["port"]),
    (option("--port-range"), None),
    (option("--weights-path-prefix"), eo.ANY_WORD["path"]),                    # any word
    (option("--x", "--worker-cls"), eo.ANY_WORD["cls"]),
    (option("--y", "--some-url"), eo.LAST_WORD["url"]),
    (option("--seed"), None),
])
def test_refused_by_policy(opt, why):
    assert eo.refused_by_policy(opt) == why


@pytest.mark.parametrize(("key", "value", "want"), [
    ("tool_call_parser", "/srv/p.py", True), ("tool_call_parser", "~/p.py", True),
    ("tool_call_parser", "file:x", True), ("tool_call_parser", "FILE:x", True),
    ("tool_call_parser", "hermes", False), ("tool_call_parser", "a/b", False),   # a path only at the start
    ("disable_access_log_for_endpoints", "/health", False),
])
def test_a_file_value_however_spelt(key, value, want):
    line = eo.problems("vllm", V, key, value)
    flag = eo.flag_of(key)
    assert (line == f"resolves to {flag}, given a path on the node: gridready passes the engine no file the "
                    "inventory names") is want


@pytest.mark.parametrize(("engine", "key", "value", "want"), [
    ("vllm", "generation_config", "auto", None), ("vllm", "generation_config", "vllm", None),
    ("vllm", "generation_config", "hf", "resolves to --generation-config, which takes auto or vllm here: a folder "
     "path loads the sampling defaults from files the inventory names"),
    ("sglang", "chat_template", "llama-3-instruct", None),
    ("sglang", "completion_template", "x/y", "resolves to --completion-template, which " + eo._TEMPLATE_FILE
     + "; a built-in template's name (no '/') is taken"),
    ("vllm", "chat_template", "chatml", "resolves to --chat-template, which " + eo._TEMPLATE_FILE),
])
def test_options_taken_with_some_values_only(engine, key, value, want):
    assert eo.problems(engine, V if engine == "vllm" else S, key, value) == want


@pytest.mark.parametrize(("key", "want"), [
    ("headless", "gridready sets this argument itself (the leader serves the API)"),
    ("headl", "resolves to --headless, which gridready owns (the leader serves the API)"),
    ("trust_remote_code", "gridready sets this argument itself; use the tier's trust_remote_code"),
    ("trust_remote", "resolves to --trust-remote-code, which gridready owns (set the tier's trust_remote_code)"),
    ("seed", None),
])
def test_owner_lines(key, want):
    assert eo.owner_problem("vllm", V, key) == want


def test_owned_option():
    assert eo.owned_option("vllm", V, "trust_remote") == ("--trust-remote-code", "trust_remote_code")
    assert eo.owned_option("vllm", V, "seed") is None
    assert eo.owned_option("vllm", V, "max") is None               # ambiguous: no option, no owner
    assert eo.owned_option("vllm", "0.0.1", "trust_remote_code") is None


def test_owned_keeps_the_first_field_of_an_option():
    opt = option("--tensor-parallel-size", "-tp")
    tbl = table(opt, option("--port"))
    assert eo.owned(tbl) == {opt: "tensor_parallel", tbl.by_flag["--port"]: "port"}
    assert eo.owned(table(opt, engine="tgi")) == {}


@pytest.mark.parametrize(("key", "want"), [
    ("trust_remote", "trust_remote_code"), ("trust-remote-code", "trust_remote_code"), ("seed", "seed"),
    ("max", "max"), ("no_such_option", "no_such_option"),
])
def test_canonical_key(key, want):
    assert eo.canonical_key("vllm", V, key) == want
    assert eo.canonical_key("vllm", "0.0.1", key) == key


def test_false_renders_the_negation_which_must_be_the_same_option():
    assert eo.problems("vllm", V, "disable_log_stats", False) == (
        f"false renders --no-disable-log-stats, which vLLM {V} does not have for --disable-log-stats; leave the key "
        "out for the engine's default")
    assert eo.problems("vllm", V, "enforce_eager", False) is None          # --no-enforce-eager is its own negation
    assert eo.problems("sglang", S, "enable_torch_compile", False) is None   # SGLang renders nothing for false


def test_a_negation_that_is_another_option_is_refused(monkeypatch):
    """`--no-foo` must be foo's own negation: here it is a prefix of another option, --no-foo-cache."""
    tbl = table(option("--foo", takes_value=False), option("--no-foo-cache", takes_value=False),
                option("--bar", takes_value=False), option("--no-bar", takes_value=False))
    monkeypatch.setattr(eo, "table", lambda engine, version: tbl)
    assert eo.problems("vllm", "9.9", "foo", False) == (
        "false renders --no-foo, which vLLM 9.9 does not have for --foo; leave the key out for the engine's default")
    assert eo.problems("vllm", "9.9", "bar", False) == (
        "false renders --no-bar, which vLLM 9.9 does not have for --bar; leave the key out for the engine's default")
    tbl.by_flag["--no-bar"] = tbl.by_flag["--bar"]                      # argparse's BooleanOptionalAction
    assert eo.problems("vllm", "9.9", "bar", False) is None
    assert eo.problems("vllm", "9.9", "foo", True) is None


def _tier(**over: object) -> Tier:
    return Tier.model_validate(tier(**over))


def test_rendered_values_of_the_tier():
    adapters = [{"name": "sql", "path": "/adapters/sql"}]
    assert list(eo.rendered_values("vllm", V, _tier(lora_adapters=adapters, max_lora_rank=4, max_loras=2))) == [
        ("max_lora_rank", f"4 is not a value --max-lora-rank (vLLM {V}) accepts: one of 1, 8, 16, 32, 64, 128, 256, "
                          "320, 512")]
    assert list(eo.rendered_values("vllm", V, _tier(max_lora_rank=4))) == []
    assert list(eo.rendered_values("vllm", V, _tier(tensor_parallel="derive", pipeline_parallel="derive"))) == []
    assert list(eo.rendered_values("vllm", "0.0.1", _tier(lora_adapters=adapters, max_lora_rank=4))) == []


def test_rendered_values_reads_nested_fields(monkeypatch):
    seen: list[tuple[str, object]] = []

    def record(_tbl, _opt, flag, value):
        seen.append((flag, value))
        return None
    monkeypatch.setattr(eo, "check_value", record)
    list(eo.rendered_values("vllm", V, _tier(max_num_batched_tokens=4096, dtype="bfloat16")))
    assert ("--max-num-batched-tokens", 4096) in seen and ("--dtype", "bfloat16") in seen
    assert ("--revision", "0e9e39f249a16976918f6564b8830bc894c89659") in seen    # model.revision, two levels
    assert ("--served-model-name", "llama") in seen and ("--tensor-parallel-size", 8) in seen
    assert not [f for f, v in seen if isinstance(v, bool) or v is None]
    assert "--max-lora-rank" not in dict(seen) and "--quantization" not in dict(seen)


@pytest.mark.parametrize(("letters", "shown"), [
    ("abcdef", "--opt-a, --opt-b, --opt-c, --opt-d, --opt-e, --opt-f"),                  # six: no ellipsis
    ("abcdefg", "--opt-a, --opt-b, --opt-c, --opt-d, --opt-e, --opt-f, ..."),
])
def test_the_ambiguous_line_cuts_after_six(monkeypatch, letters, shown):
    tbl = table(*(option(f"--opt-{c}") for c in letters))
    monkeypatch.setattr(eo, "table", lambda engine, version: tbl)
    assert eo.problems("vllm", "9.9", "opt", 1) == (
        f"--opt is ambiguous to vLLM 9.9's parser (it could match {shown}); write the option in full")


def test_problems_names_an_owned_option_itself():
    """problems() is complete on its own: an owned option is refused there too, not only by rules.engine_args."""
    assert eo.problems("vllm", V, "tensor_parallel", 2) == (
        "resolves to --tensor-parallel-size, which gridready owns (set the tier's tensor_parallel)")
    assert eo.problems("sglang", S, "tp_size", 2) == (
        "gridready sets this argument itself; use the tier's tensor_parallel")


def test_a_value_line_names_the_option_a_prefix_resolves_to(monkeypatch):
    tbl = table(option("--seed", type_="int"))
    monkeypatch.setattr(eo, "table", lambda engine, version: tbl)
    assert eo.problems("vllm", "9.9", "se", "seven") == "--seed (vLLM 9.9) takes an int, not 'seven'"


def test_rendered_values_go_on_past_a_derived_field():
    adapters = [{"name": "sql", "path": "/adapters/sql"}]
    t = _tier(tensor_parallel="derive", pipeline_parallel="derive", lora_adapters=adapters, max_lora_rank=4)
    assert [f for f, _ in eo.rendered_values("vllm", V, t)] == ["max_lora_rank"]


def test_rendered_values_skip_flags_the_table_lacks_and_engines_that_render_none(monkeypatch):
    rank = option("--max-lora-rank", type_="int", choices=(8, 16))
    tbl = table(rank)                                             # none of the other rendered flags
    monkeypatch.setattr(eo, "table", lambda engine, version: tbl)
    t = _tier(lora_adapters=[{"name": "sql", "path": "/adapters/sql"}], max_lora_rank=4)
    assert list(eo.rendered_values("vllm", "9.9", t)) == [
        ("max_lora_rank", "4 is not a value --max-lora-rank (vLLM 9.9) accepts: one of 8, 16")]
    assert list(eo.rendered_values("tgi", "9.9", t)) == []       # no RENDERED entry for the engine
