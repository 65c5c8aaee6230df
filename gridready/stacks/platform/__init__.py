"""Pulumi program `gridready-platform`: namespaces, GPU Operator, KubeRay operator, node labels and taints."""
