"""Machine-wide BPF object ids: which program a fd is, and whether an id
still exists (ids, unlike fds, outlive the process that loaded them)."""
from __future__ import annotations

import ctypes
import errno
import os

from dataplane.prog_test_run import libbpf

_PROG_INFO_BYTES = 256   # more than the fields we read; the kernel fills what it has


def object_id(fd: int) -> int:
    """The kernel's id of the program or map behind `fd` (struct
    bpf_prog_info and struct bpf_map_info both begin: type, id)."""
    info = ctypes.create_string_buffer(_PROG_INFO_BYTES)
    size = ctypes.c_uint32(_PROG_INFO_BYTES)
    if libbpf().bpf_obj_get_info_by_fd(fd, info, ctypes.byref(size)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf_obj_get_info_by_fd: {os.strerror(err)}")
    return int.from_bytes(info.raw[4:8], "little")


prog_id = object_id


def map_fd_by_id(map_id: int) -> int:
    """A new fd for a map another process created (its id from a record)."""
    fd = libbpf().bpf_map_get_fd_by_id(map_id)
    if fd < 0:
        raise OSError(-fd, f"no BPF map with id {map_id}: {os.strerror(-fd)}")
    return fd


def prog_exists(prog_id_: int) -> bool:
    fd = libbpf().bpf_prog_get_fd_by_id(prog_id_)
    if fd >= 0:
        os.close(fd)
        return True
    if -fd == errno.ENOENT or ctypes.get_errno() == errno.ENOENT:
        return False
    raise OSError(-fd, f"bpf_prog_get_fd_by_id({prog_id_}): {os.strerror(-fd)}")
