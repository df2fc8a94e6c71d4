"""nvidia-smi outputs as data, for hosts this machine does not have.

Provenance: these are CONSTRUCTED examples, not captures. They follow the formats
nvidia-smi documents (``nvidia-smi --help-query-gpu``: ``--format=csv,noheader,nounits``
prints one comma-separated row per GPU in the order of the requested fields,
memory in MiB; ``nvidia-smi topo -m`` prints a tab-separated matrix of ``X`` / ``NV#`` /
``PIX`` / ``PXB`` / ``PHB`` / ``NODE`` / ``SYS`` followed by a legend), with the
names, memory sizes and topologies of an 8 x H100 SXM (DGX H100: 18 NVLinks per
pair through NVSwitch), an 8 x H200 SXM and a 4 x L40S PCIe server.
"""

from __future__ import annotations

H100_BUS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")

H100_CSV = "".join(f"{i}, NVIDIA H100 80GB HBM3, 81559, 0, 550.54.15, 00000000:{bus}:00.0, 9.0\n"
                   for i, bus in enumerate(H100_BUS))

H200_CSV = "".join(f"{i}, NVIDIA H200, 143771, 1, 560.35.03, 00000000:{bus}:00.0, 9.0\n"
                   for i, bus in enumerate(H100_BUS))

# The five fields introspect health asks (index,name,memory.used,memory.total,driver_version).
H100_BASIC_CSV = "".join(f"{i}, NVIDIA H100 80GB HBM3, 0, 81559, 535.104.05\n" for i in range(8))

HEADER_550 = """\
Mon Dec  1 07:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
"""

HEADER_560 = HEADER_550.replace("550.54.15", "560.35.03").replace("CUDA Version: 12.4", "CUDA Version: 12.6")


def _nvlink_matrix(gpus: int, link: str) -> str:
    head = "\t" + "\t".join(f"GPU{i}" for i in range(gpus)) + "\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    rows = []
    for i in range(gpus):
        cells = [" X " if j == i else link for j in range(gpus)]
        cpus, numa = ("0-55,112-167", "0") if i < gpus // 2 else ("56-111,168-223", "1")
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\tPXB\t{cpus}\t{numa}\t\tN/A\n")
    return head + "".join(rows)


LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

H100_TOPO = _nvlink_matrix(8, "NV18") + LEGEND

L40S_TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNODE\tSYS\tSYS\t0-31\t0\t\tN/A
GPU1\tNODE\t X \tSYS\tSYS\t0-31\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tNODE\t32-63\t1\t\tN/A
GPU3\tSYS\tSYS\tNODE\t X \t32-63\t1\t\tN/A
""" + LEGEND
