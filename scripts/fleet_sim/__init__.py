"""A fleet of simulated SSH hosts on loopback: the load generator behind ``scripts/bench --fleet``.

One asyncio process serves N virtual hosts (127.1.0.1 upwards, an ephemeral port each): real SSH
(asyncssh's server side) with a host key per host and public-key login with one real client key,
so the controller does every bit of its real work per host (TCP connect, key exchange, host-key
check, login, channel, exec, frames). What a host answers is replayed from exchanges recorded once
from a real run of the product (:mod:`.record`); each host varies its versions by seed
(:mod:`.variation`). The fleet can be slow to reach (RTT, bandwidth: :mod:`.wire`), partly dead,
silent, slow, flaky or hung, and refuses connections past sshd's MaxStartups like sshd does
(:mod:`.spec`).

Why asyncssh rather than paramiko's server side: it is asyncio-native, so thousands of listeners
and connections live in one process and one thread with no thread per connection (paramiko's
``Transport`` runs one thread per connection: 3,000 hosts would be 3,000 threads in the simulator,
whose own scheduling would then be what a benchmark measures); and it speaks real SSH with real
key exchange, host keys and public-key authentication to every client the bench drives (paramiko,
OpenSSH for Ansible, libssh2 for parallel-ssh).

Not a test double of the product's logic: the product runs unchanged against it.
"""
