"""The deterministic simulator: any protocol core on a virtual clock and network."""

from harness.sim.driver import Ev, MakeCore, Simulation, Wire
from harness.sim.network import Network

__all__ = ["Ev", "MakeCore", "Network", "Simulation", "Wire"]
