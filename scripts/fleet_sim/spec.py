"""What a simulated fleet looks like: its size, addresses, link, faults and sshd limits.

Every choice is deterministic for a seed: which hosts are dead, silent, slow, flaky or hung,
which ones drift, and each MaxStartups coin. Two runs with the same spec meet the same fleet.
"""

from __future__ import annotations

import ipaddress
import math
import random
from dataclasses import dataclass, field

# The roles a virtual host can play; "ok" answers every request from the recordings.
ROLES = ("dead", "silent", "slow", "flaky", "hang")

# sshd's default: `MaxStartups 10:30:100` (openssh-portable servconf.c, fill_default_server_options,
# https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/servconf.c#L348-L353).
DEFAULT_MAX_STARTUPS = "10:30:100"


@dataclass(frozen=True)
class MaxStartups:
    """sshd's ``MaxStartups start:rate:full`` (sshd_config(5)): a count of connections that have not
    yet authenticated; at ``start`` new ones are refused with probability rate/100, rising linearly to
    every one refused at ``full``. ``None`` everywhere: no limit."""

    start: int | None = 10
    rate: int = 30
    full: int | None = 100

    @classmethod
    def parse(cls, text: str) -> MaxStartups:
        """``start:rate:full``, a single ``N`` (refuse from N on), or ``none``. The same checks as
        servconf.c's ``case sMaxStartups`` (openssh-portable servconf.c#L1793-L1818 at the commit above)."""
        if text.strip().lower() == "none":
            return cls(None, 100, None)
        parts = text.split(":")
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"MaxStartups {text!r}: want start:rate:full, N or none") from None
        if len(values) == 1:
            start, rate, full = values[0], 100, values[0]
        elif len(values) == 3:
            start, rate, full = values
            if start > full or not 1 <= rate <= 100:
                raise ValueError(f"MaxStartups {text!r}: start must be <= full and rate 1..100")
        else:
            raise ValueError(f"MaxStartups {text!r}: want start:rate:full, N or none")
        if start <= 0 or full <= 0:
            raise ValueError(f"MaxStartups {text!r}: values must be positive")
        return cls(start, rate, full)

    def should_drop(self, startups: int, rng: random.Random) -> bool:
        """sshd's ``should_drop_connection(startups)``, line for line (openssh-portable sshd.c#L558-L578,
        https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L558-L578):
        integer arithmetic, ``arc4random_uniform(100)`` replaced by the host's seeded generator."""
        if self.start is None or self.full is None:
            return False
        if startups < self.start:
            return False
        if startups >= self.full:
            return True
        if self.rate == 100:
            return True
        p = 100 - self.rate
        p *= startups - self.start
        p //= self.full - self.start
        p += self.rate
        return rng.randrange(100) < p

    def __str__(self) -> str:
        return "none" if self.start is None else f"{self.start}:{self.rate}:{self.full}"


@dataclass(frozen=True)
class FleetSpec:
    """A fleet of ``hosts`` virtual hosts on loopback, host ``i`` at ``first_address + i``."""

    hosts: int
    first_address: str = "127.1.0.1"
    rtt_ms: float = 0.0  # round-trip time: every message waits rtt/2 each way
    bandwidth: float = 0.0  # bytes per second each way per host; 0: unlimited
    dead: float = 0.0  # fractions of the fleet, by role
    silent: float = 0.0
    slow: float = 0.0
    flaky: float = 0.0
    hang: float = 0.0
    slow_s: float = 2.0  # a slow host's extra delay before each answer
    flaky_p: float = 0.5  # a flaky host drops a connection after login with this probability
    drift: float = 0.0  # fraction of hosts whose versions change with every epoch (see variation.py)
    vary: bool = True  # per-host versions in the replayed frames; False replays them byte for byte
    max_startups: MaxStartups = field(default_factory=MaxStartups)
    seed: int = 1

    def __post_init__(self) -> None:
        if self.hosts < 1:
            raise ValueError("a fleet needs at least one host")
        total = sum(getattr(self, role) for role in ROLES)
        if any(getattr(self, role) < 0 for role in ROLES) or total > 1:
            raise ValueError(f"role fractions must be >= 0 and sum to <= 1 (got {total})")
        last = ipaddress.IPv4Address(self.first_address) + self.hosts - 1
        if not (ipaddress.IPv4Address(self.first_address).is_loopback and last.is_loopback):
            raise ValueError(f"the fleet must stay inside 127.0.0.0/8 ({self.first_address} + {self.hosts})")

    def address(self, index: int) -> str:
        return str(ipaddress.IPv4Address(self.first_address) + index)

    def roles(self) -> list[str]:
        """Each host's role: fraction * hosts of each, halves rounded up (5% of 10 hosts is one host),
        on hosts drawn by the seed."""
        order = list(range(self.hosts))
        random.Random(f"roles:{self.seed}").shuffle(order)
        roles = ["ok"] * self.hosts
        taken = 0
        for role in ROLES:
            count = math.floor(getattr(self, role) * self.hosts + 0.5)
            for index in order[taken:taken + count]:
                roles[index] = role
            taken += count
        return roles

    def drifting(self) -> set[int]:
        """The hosts whose versions change with the epoch (drawn by the seed)."""
        order = list(range(self.hosts))
        random.Random(f"drift:{self.seed}").shuffle(order)
        return set(order[:math.floor(self.drift * self.hosts + 0.5)])
