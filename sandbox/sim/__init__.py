"""Simulated NVIDIA tools of the sandbox fleet (stdlib only; `gridready_sim` on the hosts): docs/simulator.md."""
