"""An example protocol suite for chaos-harness (docs/extending.md): one register, kept by the
node with the lowest num_id; every other node forwards to it through its peer link."""
