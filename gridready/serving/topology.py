"""Which certified nodes serve which tier, and with what tensor/pipeline parallelism.

Certification is read from the customer's ledger (gridready.ledger) and fails closed per node: a node is usable only
while its latest verdict is certified, inside its window and not drained, whichever run certified it; the others are
left out and the tiers are sized on what remains. TP stays inside a node (NVLink); PP spans nodes; each replica is one
Ray cluster.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gridready import ledger
from gridready.errors import InvalidInput, NotCertified
from gridready.inventory import Inventory
from gridready.ledger import Ledger
from gridready.spec import NodeGroup
from gridready.spec.parallel import Parallelism, resolve
from gridready.spec.serving import Tier

RDMA_KINDS = ("infiniband", "roce")


def cluster_file(inv: Inventory) -> str:
    """`inventories/<c>/cluster.yml` as the error lines show it."""
    path = (inv.path / "cluster.yml").resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return f"inventories/{inv.name}/cluster.yml"


@dataclass(frozen=True)
class CertifiedNode:
    """A node the certify stage passed, with what serving needs from that report."""

    name: str
    group: str
    ip: str  # Ray node IP = VLLM_HOST_IP
    hcas: tuple[str, ...] | None  # HCAs that passed certification; None when no HCA gate ran on the node


@dataclass
class Certification:
    """The ledger as serving sees it."""

    source: str  # the ledger read and its revision
    finished_at: datetime
    certified: dict[str, CertifiedNode] = field(default_factory=dict)
    quarantined: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


def node_ip(inv: Inventory, host: str) -> str:
    """The address Ray, vLLM and NCCL bind on: gridready_ray_node_ip, else ansible_host, else the name."""
    hv = inv.hosts.get(host, {})
    value = str(hv.get("gridready_ray_node_ip") or hv.get("ansible_host") or host)
    try:
        ipaddress.ip_address(value)
    except ValueError as err:
        raise InvalidInput(
            f"{inv.hosts_file.name}: {host}: set ansible_host or gridready_ray_node_ip to the node's IP "
            f"(Ray and vLLM must agree on one address)"
        ) from err
    return value


HYPOTHETICAL = "hypothetical: no certification yet; rendered as if every GPU node were certified"


def hypothetical_certification(inv: Inventory) -> Certification:
    """Every GPU node as if certified, no HCA verdicts: what `serve --render` sizes on before any certify run."""
    cert = Certification(source=HYPOTHETICAL, finished_at=datetime.now(UTC), messages=[HYPOTHETICAL])
    for host in inv.gpu_hosts():
        cert.certified[host] = CertifiedNode(name=host, group=inv.node_group_of(host) or "", ip=node_ip(inv, host),
                                             hcas=None)
    return cert


def read_certification(
    inv: Inventory, found: tuple[Path, Ledger] | None, now: datetime | None = None
) -> Certification:
    """Fail closed, per node: a node serves only while its ledger entry is certified, inside its validity window
    (and today's certification.validity_hours) and not drained. No certified node at all raises NotCertified.
    `found` is what `ledger.read(root, customer)` returned (validated against the ledger's schema)."""
    if found is None or not any(h in found[1].nodes for h in inv.gpu_hosts()):
        raise NotCertified(f"serve: no certification found for {inv.customer}; run `invoke certify` first")
    path, book = found
    now = now or datetime.now(UTC)
    hours = inv.spec.certification.validity_hours
    certified_at = [datetime.fromisoformat(e.judged_at) for h, e in book.nodes.items() if h in inv.gpu_hosts()]
    cert = Certification(source=f"{path}#revision={book.revision}",
                         finished_at=max(d if d.tzinfo else d.replace(tzinfo=UTC) for d in certified_at))
    missing, left_out = [], []
    for host in inv.gpu_hosts():
        entry = book.nodes.get(host)
        ok, why = ledger.usable(entry, hours, now)
        if entry is None:
            missing.append(host)
            continue
        if not ok:
            cert.quarantined.append(host)
            left_out.append(f"{host} ({why})")
            continue
        hcas = None if entry.hcas_passed is None else tuple(entry.hcas_passed)
        group = inv.node_group_of(host) or ""
        cert.certified[host] = CertifiedNode(name=host, group=group, ip=node_ip(inv, host), hcas=hcas)
    if missing:
        cert.messages.append(f"not in the certification (treated as uncertified): {', '.join(missing)}")
    if left_out:
        cert.messages.append(f"left out of serving: {', '.join(left_out)}")
    if not cert.certified:
        raise NotCertified(f"serve: no node of {inv.customer} is certified now ({'; '.join(left_out or missing)}); "
                           "run `invoke certify`")
    return cert


@dataclass(frozen=True)
class ReplicaPlan:
    """One model replica: one Ray cluster whose head runs the engine."""

    index: int
    nodes: tuple[str, ...]

    @property
    def head(self) -> str:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[str, ...]:
        return self.nodes[1:]


@dataclass(frozen=True)
class TierPlan:
    """One tier's placement on certified nodes and its parallelism, resolved once (gridready.spec.parallel);
    vLLM arguments, the Triton plan, the manifests and the benchmark all read it from here."""

    tier: Tier
    group: NodeGroup
    parallel: Parallelism
    replicas: tuple[ReplicaPlan, ...]

    @property
    def tensor_parallel(self) -> int:
        return self.parallel.tensor

    @property
    def pipeline_parallel(self) -> int:
        return self.parallel.pipeline

    @property
    def nodes_per_replica(self) -> int:
        return self.parallel.nodes_per_replica

    @property
    def gpus_per_node(self) -> int:
        return self.group.gpus_per_node

    @property
    def world_size(self) -> int:
        return self.parallel.world_size

    @property
    def gpus(self) -> int:
        """GPUs serving the tier: world size x replicas."""
        return self.world_size * len(self.replicas)

    @property
    def accelerator_type(self) -> str:
        """Ray's accelerator type name: H100 / H200."""
        return self.group.catalog_sku.name.split("-")[0]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for r in self.replicas for n in r.nodes)

    def cluster_name(self, replica: ReplicaPlan) -> str:
        return f"{self.tier.name}-{replica.index}"


def plan_tiers(inv: Inventory, cert: Certification, engine: str | None = None) -> list[TierPlan]:
    """Give each tier (in spec order) certified nodes of its group that no earlier tier took.

    Whether TP x PP can fit the inventory at all was checked when it loaded (gridready.spec.parallel.fit_problems,
    exit 2); NotCertified (exit 5) when it does not fit the certified nodes that remain.
    """
    spec = inv.spec
    used: set[str] = set()
    plans: list[TierPlan] = []
    short: list[str] = []
    for tier in spec.serving.tiers:
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        assert group is not None  # inventory.load checked every tier's node group
        available = [h for h in inv.groups.get(group.name, []) if h in cert.certified and h not in used]
        if any(n.kind in RDMA_KINDS for n in group.nics):
            # a node whose HCAs all failed would drag NCCL onto sockets: not usable across nodes
            no_rdma = [h for h in available if cert.certified[h].hcas == ()]
            if no_rdma:
                cert.messages.append(f"tier {tier.name}: no passing HCA, left out: {', '.join(no_rdma)}")
                available = [h for h in available if h not in no_rdma]
        par = resolve(tier, group)
        per_replica = par.nodes_per_replica
        need = per_replica * tier.replicas
        if need > len(available) or not available:
            short.append(
                f"serve: tier {tier.name} needs {need} certified node(s) of {group.name}, "
                f"{len(available)} left (quarantined: {', '.join(cert.quarantined) or 'none'})"
            )
            continue
        take = available[:need]
        used.update(take)
        replicas = tuple(
            ReplicaPlan(index=r, nodes=tuple(take[r * per_replica:(r + 1) * per_replica]))
            for r in range(tier.replicas)
        )
        plans.append(TierPlan(tier, group, par, replicas))
    if short:
        raise NotCertified("\n".join(short))
    if engine:
        plans = [p for p in plans if p.tier.engine == engine]
    return plans


def rdma_hcas(plan: TierPlan, node: CertifiedNode) -> tuple[str, ...]:
    """RDMA HCAs NCCL may use on this node: the spec's IB/RoCE NICs that certification passed."""
    spec_hcas = tuple(n.name for n in plan.group.nics if n.kind in RDMA_KINDS)
    if node.hcas is None:
        return spec_hcas
    return tuple(h for h in spec_hcas if h in node.hcas) if spec_hcas else tuple(node.hcas)


def common_hcas(plan: TierPlan, cert: Certification) -> tuple[str, ...]:
    """HCAs that passed on every certified node of the tier's group (for pods that may land on any of them)."""
    sets = [set(rdma_hcas(plan, n)) for n in cert.certified.values() if n.group == plan.group.name]
    if not sets:
        return ()
    common = set.intersection(*sets)
    order = [n.name for n in plan.group.nics if n.kind in RDMA_KINDS] or sorted(common)
    return tuple(h for h in order if h in common)
