"""Configuration of a pod (hdl/pod/, docs/pod.md): chips on an ICI torus, validated on
construction."""

from dataclasses import dataclass

from .chip import ChipConfig
from .config import Config, ConfigError, check_bool
from .nic import NICConfig

__all__ = ["PodConfig"]


@dataclass(frozen=True)
class PodConfig(Config):
    """Parameters of a pod: a chip per node of the network its network interface names
    (docs/pod.md, "Pod top").

    Parameters
    ----------
    chip : ChipConfig
        Every chip of the pod; it needs a network interface (``nic``), whose ``ici`` is the
        pod's network. Without a TensorCore the host drives each chip's network interface
        (a simulation chip); with one, its programs do.
    faults : bool
        A fault injector on every link (test only: bit flips the link layer must repair).
    """

    KIND = "pod"

    chip: ChipConfig = ChipConfig(tensorcore=None, memory="none", nic=NICConfig())
    faults: bool = False

    def validate(self):
        if self.chip.nic is None:
            raise ConfigError("chip.nic", "must be given (a pod's chips talk through their "
                                          "network interfaces)")
        check_bool("faults", self.faults)

    @property
    def nic(self):
        return self.chip.nic

    @property
    def ici(self):
        return self.chip.nic.ici

    @property
    def tensorcore(self):
        return self.chip.tensorcore

    @property
    def chips(self):
        return self.ici.nodes

    @property
    def name(self):
        """Verilog module name of the pod top."""
        return f"podium_pod_{self.ici.suffix}" + ("_fi" if self.faults else "") + \
            f"_{self.chip.digest()}"
