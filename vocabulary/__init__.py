"""The shared vocabulary, once: the history format (op types, pairing, reading and writing
history.jsonl) and the fault vocabulary (every nemesis start/stop op and its kind). Imports
nothing of ours, so every layer (nodes aside) reads histories and faults the same way."""
