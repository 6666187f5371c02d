#!/usr/bin/env python3
"""The functions a run executed, for linking them first (scripts/order-link.sh).

  layout-order.py resident FILE > PAGES
      the page numbers of FILE that are in the page cache (mincore), one per line
  layout-order.py order BINARY PAGES... > ORDER
      the (mangled) names of BINARY's functions that have a page in PAGES, for lld's
      --symbol-ordering-file: those of the first PAGES file first, each group in address
      order, every name once

BINARY is a diagnostic link with every function on a page of its own (a linker script
with SUBALIGN(4096) on .text), run from a file system without read-ahead: only the pages
that faulted are cached, so the cached pages are the functions that ran. Needs `nm`.
"""

import ctypes
import mmap
import os
import struct
import subprocess
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident(path):
    """Page numbers of `path` in the page cache (mapping it touches none of its pages)."""
    size = os.path.getsize(path)
    if size == 0:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    pages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            buf = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, buf) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            raw = buf.raw
            return [i for i in range(pages) if raw[i] & 1]
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def load_segments(path):
    """(file offset, virtual address, file size) of each PT_LOAD segment of an ELF64 file."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise SystemExit(f"{path}: not a little-endian ELF64 file")
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segments = []
    for i in range(phnum):
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from(
            "<IIQQQQ", table, i * phentsize
        )
        if p_type == 1:
            segments.append((off, vaddr, filesz))
    return segments


def functions(path):
    """(file offset, size, name) of each defined function of `path` with a size."""
    segments = load_segments(path)
    out = subprocess.run(
        ["nm", "--defined-only", "--print-size", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) != 4 or parts[2] not in ("t", "T", "W", "w"):
            continue
        vaddr, size = int(parts[0], 16), int(parts[1], 16)
        if size == 0:
            continue
        for off, base, filesz in segments:
            if base <= vaddr < base + filesz:
                found.append((vaddr - base + off, size, parts[3]))
                break
    found.sort()
    return found


def order(binary, page_files):
    funcs = functions(binary)
    seen = set()
    names = []
    for page_file in page_files:
        with open(page_file) as f:
            pages = {int(line) for line in f if line.strip()}
        for off, size, name in funcs:
            if name in seen:
                continue
            first, last = off // PAGE, (off + size - 1) // PAGE
            if any(p in pages for p in range(first, last + 1)):
                seen.add(name)
                names.append(name)
    return names


def main(argv):
    if len(argv) == 3 and argv[1] == "resident":
        sys.stdout.write("".join(f"{p}\n" for p in resident(argv[2])))
    elif len(argv) >= 4 and argv[1] == "order":
        sys.stdout.write("".join(f"{n}\n" for n in order(argv[2], argv[3:])))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
