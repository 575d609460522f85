"""Pod: a chip per node of the ICI torus (docs/pod.md); the chips' network interfaces are
hdl/nic/."""
