"""The rolling provision's planner (gridready.stages.roll_plan): batch sizes, percentages and their rounding,
serving vs idle nodes, resume, the failures that stop the roll; and which gates a change re-certifies."""

from __future__ import annotations

import pytest

from gridready.errors import InvalidInput
from gridready.stages import roll_plan
from gridready.stages.roll import gates_after
from gridready.stages.roll_plan import Amount


@pytest.mark.parametrize(("raw", "want"), [("2", Amount(2)), ("25%", Amount(25, True)), (" 1 ", Amount(1)),
                                           ("100%", Amount(100, True))])
def test_a_count_or_a_share(raw, want):
    assert roll_plan.parse_amount(raw, "--batch", zero_ok=False) == want


@pytest.mark.parametrize("raw", ["0", "0%", "-1", "abc", "2.5", "", "150%", "%", "1e3", "10 %", "１"])
def test_a_bad_batch_is_one_line_naming_the_flag(raw):
    with pytest.raises(InvalidInput) as err:
        roll_plan.parse_amount(raw, "--batch", zero_ok=False)
    (line,) = err.value.lines
    assert line.startswith("--batch: (command line): ") and repr(raw) in line


def test_max_fail_takes_zero_and_not_above_a_whole():
    assert roll_plan.parse_amount("0", "--max-fail", zero_ok=True) == Amount(0)
    assert roll_plan.parse_amount("0%", "--max-fail", zero_ok=True) == Amount(0, True)
    with pytest.raises(InvalidInput, match=r"^--max-fail: \(command line\): '101%' is out of range"):
        roll_plan.parse_amount("101%", "--max-fail", zero_ok=True)
    assert roll_plan.parse_amount(None, "--max-fail", zero_ok=True) is None


@pytest.mark.parametrize(("serving", "batch", "size"), [
    (3, None, 1), (9, None, 1), (10, None, 1), (19, None, 1), (20, None, 2), (25, None, 2), (100, None, 10),
    (3, "2", 2), (3, "10", 10), (3, "50%", 1), (4, "50%", 2), (3, "1%", 1), (7, "100%", 7), (1, "30%", 1),
])
def test_batch_sizes_round_down_and_never_below_one(serving, batch, size):
    amount = roll_plan.parse_amount(batch, "--batch", zero_ok=False)
    assert roll_plan.batch_size(serving, amount) == size


@pytest.mark.parametrize(("total", "raw", "tolerated"), [
    (3, None, 0), (3, "1", 1), (3, "50%", 1), (3, "10%", 0), (10, "25%", 2), (4, "100%", 4)])
def test_failures_tolerated(total, raw, tolerated):
    assert roll_plan.max_failures(total, roll_plan.parse_amount(raw, "--max-fail", zero_ok=True)) == tolerated


def test_idle_nodes_first_in_one_batch_then_serving_nodes_by_size():
    got = roll_plan.batches(["i1", "i2", "i3"], ["s1", "s2", "s3", "s4", "s5"], 2)
    assert got == [["i1", "i2", "i3"], ["s1", "s2"], ["s3", "s4"], ["s5"]]
    assert roll_plan.batches([], ["s1", "s2"], 1) == [["s1"], ["s2"]]
    assert roll_plan.batches(["i1"], [], 1) == [["i1"]]
    assert roll_plan.batches([], ["s1"], 10) == [["s1"]]


def test_resume_leaves_done_nodes_out_and_puts_the_failed_first():
    got = roll_plan.batches(["i1"], ["s1", "s2", "s3", "s4"], 2, done={"i1", "s1"}, first=["s2", "zz"])
    assert got == [["s2", "s3"], ["s4"]]
    got = roll_plan.batches(["i1", "i2"], ["s1", "s2", "s3"], 1, done={"s1", "i1"}, first=["s3"])
    assert got == [["i2"], ["s3"], ["s2"]]


def test_the_roll_stops_once_more_failed_than_tolerated():
    assert roll_plan.should_stop(1, 0)
    assert not roll_plan.should_stop(0, 0)
    assert not roll_plan.should_stop(1, 1)
    assert roll_plan.should_stop(2, 1)


@pytest.mark.parametrize(("roles", "rebooted", "gates"), [
    (["nvidia_driver"], False, ()), ([], True, ()), (["host_tuning"], False, ()), (["rdma", "nccl"], False, ()),
    (["something_new"], False, ()), ([], False, None), (["preflight"], False, None),
    (["dcgm"], False, ("dcgm", "min_versions", "services", "software_versions")),
    (["container_toolkit", "container_engine"], False, ("min_versions", "services", "software_versions")),
])
def test_the_gates_a_change_re_certifies(roles, rebooted, gates):
    assert gates_after(roles, rebooted) == gates
    assert gates_after(["nccl"], False) and "nccl_allreduce" in gates_after(["nccl"], False)


@pytest.mark.parametrize(("nodes", "replicas", "units"), [
    (["a", "b", "c", "d"], [("a", "b"), ("c", "d")], [["a", "b"], ["c", "d"]]),
    (["a", "b", "c", "d"], [("b", "d"), ("a",), ("c",)], [["a"], ["b", "d"], ["c"]]),  # in the nodes' order
    (["a", "b", "c", "d", "e"], [("a", "c"), ("c", "e")], [["a", "c", "e"], ["b"], ["d"]]),  # sharing c: one unit
    (["a", "b"], [("a", "z")], [["a"], ["b"]]),  # z not rolled (--limit): a rolls alone
    (["a", "b", "c"], [], [["a"], ["b"], ["c"]]),
])
def test_units_are_whole_replicas(nodes, replicas, units):
    assert roll_plan.units_of(nodes, replicas) == units


@pytest.mark.parametrize(("size", "want"), [
    (1, [["n1", "n2"], ["n3", "n4"], ["n5"]]),  # a two-node replica is one batch however small the size
    (2, [["n1", "n2"], ["n3", "n4"], ["n5"]]),
    (3, [["n1", "n2"], ["n3", "n4", "n5"]]),  # never half a replica to fill a batch
    (4, [["n1", "n2", "n3", "n4"], ["n5"]]),
    (5, [["n1", "n2", "n3", "n4", "n5"]]),
])
def test_batches_are_cut_along_replicas(size, want):
    replicas = [("n1", "n2"), ("n3", "n4"), ("n5",)]
    got = roll_plan.batches([], ["n1", "n2", "n3", "n4", "n5"], size, replicas=replicas)
    assert got == want
    for batch in got:  # a replica is in one batch or none
        assert all(set(r) <= set(batch) or not set(r) & set(batch) for r in replicas)


def test_the_router_node_rolls_last_with_its_replica():
    assert roll_plan.batches(["i1"], ["n1", "n2", "n3"], 1, last="n1") == [["i1"], ["n2"], ["n3"], ["n1"]]
    replicas = [("n1", "n2"), ("n3",), ("n4",)]
    assert roll_plan.batches([], ["n1", "n2", "n3", "n4"], 2, replicas=replicas, last="n2") == \
        [["n3", "n4"], ["n1", "n2"]]
    # resumed: a node left drained goes first, the router's unit still last, the done ones not again
    assert roll_plan.batches([], ["n1", "n2", "n3", "n4"], 1, {"n3"}, ["n4"], replicas=replicas, last="n1") == \
        [["n4"], ["n1", "n2"]]
    assert roll_plan.batches([], ["n1", "n2"], 1, last="elsewhere") == [["n1"], ["n2"]]
