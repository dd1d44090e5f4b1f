# SPDX-License-Identifier: BSD-3-Clause
"""What DPDK's EAL leaves behind for a --file-prefix once its processes are gone."""
import os
import shutil


def cleanup(prefix):
    """Remove a prefix's runtime directory and hugepage files: a primary that exits keeps
    its hugepage files (no --huge-unlink), and they hold the pages until removed."""
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    for f in os.listdir("/dev/hugepages") if os.path.isdir("/dev/hugepages") else []:
        if f.startswith(prefix + "map_"):
            os.unlink(os.path.join("/dev/hugepages", f))
