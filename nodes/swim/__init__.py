"""SWIM membership over UDP (../shared/specs/swim.md; docs/swim.md): codec, sans-IO core,
runtime, harness plugin."""
