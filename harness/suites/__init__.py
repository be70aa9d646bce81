"""The protocol suites: for each protocol, how to run its nodes and test them (workloads,
generators, checker wiring, bug list). Nodes never import these; third parties add their
own through the ``chaos_harness.protocols`` entry point group (see harness.protocols)."""
